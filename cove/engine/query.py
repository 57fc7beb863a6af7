"""One turn (a query): validate → record the turn → iterate → finalize.

``Query.run()`` is an async iterator of events ending with exactly one ``TurnFinished``. The turn
row exists from the start; each iteration commits atomically; whatever happens (model down,
cancellation, error budget) the turn is finalized with a status and nothing committed is lost.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import cast

from cove.config import Settings
from cove.engine.context import JOURNAL_ITERATIONS, Handover, request_message, system_prompt
from cove.engine.control import TurnControl
from cove.engine.determinism import BlockInputs, LiveInputs
from cove.engine.iteration import Iteration, IterationResult, IterationSetup, LoopState
from cove.engine.journal import Journal
from cove.engine.llm import LLMClient, Reasoning
from cove.engine.nudges import REPEAT_LIMIT, NudgeState, builtin_nudges
from cove.environment.environment import Environment
from cove.errors import CoveError
from cove.events import Event, Nudge, TurnFinished, TurnStarted
from cove.persistence.records import ConversationRecord, TurnRecord
from cove.persistence.store import Store

MAX_REQUEST_CHARS = 1_000_000
#: Consecutive failed iterations after which the model is asked to reason harder.
ESCALATE_AFTER_ERRORS = 2
#: Unusable replies in a row that end the turn, in error budgets (a strategy restart between).
UNUSABLE_BUDGETS = 2


@dataclass
class TurnEnd:
    """How a turn ended; the loop fills it in, ``run`` records it."""

    status: str = "failed"
    answer: str | None = None
    confidence: str | None = None
    error: str | None = "the turn ended unexpectedly"
    iterations: int = 0

    def set(
        self,
        status: str,
        iterations: int,
        *,
        answer: str | None = None,
        confidence: str | None = None,
        error: str | None = None,
    ) -> None:
        """Record the ending."""
        self.status, self.iterations = status, iterations
        self.answer, self.confidence, self.error = answer, confidence, error


@dataclass
class TurnOptions:
    """Per-turn overrides of settings."""

    max_iterations: int | None = None


class Query:
    """Runs one turn of one conversation against a live environment."""

    def __init__(
        self,
        *,
        settings: Settings,
        store: Store,
        env: Environment,
        llm: LLMClient,
        conversation: ConversationRecord,
        request: str,
        options: TurnOptions | None = None,
        inputs: BlockInputs | None = None,
        steering: dict[int, list[str]] | None = None,
        attachments: Sequence[tuple[str, int]] = (),
    ) -> None:
        self.settings = settings
        self.store = store
        self.env = env
        self.llm = llm
        self.conversation = conversation
        self.request = request
        self.options = options or TurnOptions()
        self.inputs = inputs or LiveInputs()
        self.attachments = tuple(attachments)  # (name, size) of the files attached to the request
        self.control: TurnControl | None = None
        self._cancelled_early = False
        self._steering = steering or {}  # replay: recorded notes by iteration position
        self._early_notes: list[str] = []

    def steer(self, text: str) -> None:
        """Show ``text`` from the person in the next iteration's context message."""
        if self.control is None:
            self._early_notes.append(text)
        else:
            self.control.steering.append(text)

    def take_unshown_steering(self) -> list[str]:
        """Notes no iteration showed (they came too late); the caller may start a turn."""
        notes = self._early_notes
        self._early_notes = []
        if self.control is not None:
            notes += self.control.steering
            self.control.steering = []
        return notes

    async def cancel(self) -> None:
        """Stop the turn: at the next boundary, killing running sandbox code at once."""
        if self.control is None:
            self._cancelled_early = True
            return
        self.control.cancel_requested.set()
        if self.control.running_llm is not None:
            self.control.running_llm.cancel()
        if self.control.current_block is not None:
            await self.env.kill_running()

    async def run(self) -> AsyncIterator[Event]:
        """Run the turn, yielding its events; the last one is ``TurnFinished``."""
        request = self.request
        if not request.strip():
            raise CoveError("the request is empty")
        if len(request) > MAX_REQUEST_CHARS:
            raise CoveError(f"the request is longer than {MAX_REQUEST_CHARS:,} characters")
        previous = await self._previous_turn()
        turn = await self.store.start_turn(
            self.conversation.id, request, model=self.llm.model, attachments=self.attachments
        )
        started = time.perf_counter()
        control = TurnControl(
            loop=self.settings.loop,
            model_settings=self.settings.model,
            store=self.store,
            llm=self.llm,
            conversation_id=self.conversation.id,
            request=request,
            last_answer=previous.answer if previous else None,
            budget=self.options.max_iterations or self.settings.loop.max_iterations,
            title=self.conversation.title,
        )
        control.scheduled_steering = {k: list(v) for k, v in self._steering.items()}
        control.steering, self._early_notes = self._early_notes, []
        self.control = control
        if self._cancelled_early:
            control.cancel_requested.set()
        yield TurnStarted(
            conversation_id=self.conversation.id,
            turn_id=turn.id,
            position=turn.position,
            request=request,
        )
        end = TurnEnd()
        try:
            await self.env.begin_turn(control)
            try:
                async for event in self._loop(turn, control, previous, end):
                    yield event
            finally:
                self.env.end_turn()
        except CoveError as exc:
            end.set("failed", end.iterations, error=str(exc))
        finally:
            record = await self.store.finish_turn(
                turn.id,
                status=end.status,
                answer=end.answer,
                confidence=end.confidence,
                tokens_in=control.usage.tokens_in,
                tokens_out=control.usage.tokens_out,
                cost_usd=control.usage.cost_usd,
                error=end.error,
            )
        yield TurnFinished(
            turn_id=turn.id,
            status=record.status,
            answer=end.answer,
            confidence=end.confidence,
            iterations=end.iterations,
            tokens_in=control.usage.tokens_in,
            tokens_out=control.usage.tokens_out,
            cost_usd=control.usage.cost_usd,
            duration_ms=(time.perf_counter() - started) * 1000,
            error=end.error,
            conversation_id=self.conversation.id,
            cost_known=self.settings.model.price_of(self.llm.model) is not None,
        )

    async def _previous_turn(self) -> TurnRecord | None:
        # One indexed lookup: a turn's start must not read what grows with the conversation.
        return await self.store.last_turn(self.conversation.id)

    async def _loop(
        self, turn: TurnRecord, control: TurnControl, previous: TurnRecord | None, end: TurnEnd
    ) -> AsyncIterator[Event]:
        journal = Journal.from_records(
            JOURNAL_ITERATIONS,
            await self.store.last_blocks(self.conversation.id, JOURNAL_ITERATIONS * 8),
        )
        handover = None
        if previous is not None:
            handover = Handover(
                request=previous.request,
                answer=previous.answer,
                thinking=await self.store.last_thinking(previous.id),
            )
        setup = IterationSetup(
            model_settings=self.settings.model,
            sandbox=self.settings.sandbox,
            store=self.store,
            env=self.env,
            llm=self.llm,
            control=control,
            inputs=self.inputs,
            turn=turn,
            system_prompt=system_prompt(self.env.system_prompt_docs()),
            handover_message=(
                request_message(control.request, handover, self.attachments) if handover else None
            ),
            request_message=request_message(control.request, None, self.attachments),
        )
        state = LoopState(journal_entries=journal.entries())
        nudge_state = NudgeState(error_budget=self.settings.loop.error_budget)
        signatures: list[str] = []
        errors = restarts = unusable = 0
        last: IterationResult | None = None
        position = 0
        while True:
            if control.cancel_requested.is_set():
                end.set("cancelled", position)
                return
            if position >= control.budget:
                end.set("max_iterations", position, answer=_fallback(last))
                return
            nudge_state.iteration = position + 1
            nudge_state.budget = control.budget
            nudge_state.has_title = control.title is not None
            nudge_state.var_count = len(self.env.var_index)
            nudges = [
                *builtin_nudges(nudge_state),
                *self.env.extension_nudges(iteration=position + 1, budget=control.budget),
            ]
            for text in nudges:
                yield Nudge(turn_id=turn.id, text=text)
            iteration = Iteration(setup, position, state, nudges)
            async for event in iteration.run():
                yield event
            result = iteration.result
            position += 1
            if result.status == "failed":
                end.set("failed", position, error=result.failure)
                return
            if result.status == "cancelled":
                end.set("cancelled", position)
                return
            journal.add((turn.position, position - 1), result.journal)
            state.journal_entries = journal.entries()
            state.prior_thinking = result.thinking or state.prior_thinking
            last = result
            if result.answer is not None:
                end.set("done", position, answer=result.answer, confidence=result.confidence)
                return
            signatures.append(result.signature)
            nudge_state.repeated = signatures[-REPEAT_LIMIT:].count(result.signature)
            nudge_state.lost_variables = result.restarted_lost
            nudge_state.sandbox_restarted = result.restart_reason is not None
            nudge_state.restart_reason = result.restart_reason
            nudge_state.refusal = result.refusal
            nudge_state.strategy_restart = False
            errors = errors + 1 if result.status in ("error", "parse_error") else 0
            nudge_state.error_streak = errors
            # A strategy restart forgives failing code, not replies that cannot be read: those
            # get one restart's worth of chances, then end the turn.
            unusable = unusable + 1 if result.status == "parse_error" else 0
            if unusable >= UNUSABLE_BUDGETS * self.settings.loop.error_budget:
                end.set(
                    "error_budget",
                    position,
                    answer=_fallback(last),
                    error=f"{unusable} replies in a row could not be used; the last: "
                    + (result.parse_problem or "unreadable"),
                )
                return
            if errors >= self.settings.loop.error_budget:
                if restarts >= self.settings.loop.max_restarts:
                    end.set(
                        "error_budget",
                        position,
                        answer=_fallback(last),
                        error=f"{errors} consecutive failed iterations after {restarts} restarts",
                    )
                    return
                restarts += 1
                errors = 0
                nudge_state.error_streak = 0
                nudge_state.strategy_restart = True
            control.reasoning = _next_reasoning(result.next_reasoning, errors, restarts)


def _next_reasoning(requested: str | None, errors: int, restarts: int) -> Reasoning:
    """The effort of the next call: the model's request, else raised while the turn struggles."""
    if requested in ("quick", "balanced", "deep"):
        return cast(Reasoning, requested)
    return "deep" if errors >= ESCALATE_AFTER_ERRORS or restarts else "balanced"


def _fallback(last: IterationResult | None) -> str:
    thinking = (last.thinking if last else None) or "no reasoning was recorded"
    return "I could not finish within the iteration budget. Where I got to: " + thinking[:2000]
