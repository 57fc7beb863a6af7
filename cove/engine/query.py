"""One turn (a query): validate → record the turn → iterate → finalize.

``Query.run()`` is an async iterator of events ending with exactly one ``TurnFinished``. The turn
row exists from the start; each iteration commits atomically; whatever happens (model down,
cancellation, error budget) the turn is finalized with a status and nothing committed is lost.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field, replace

from cove.config import Settings
from cove.engine.approvals import RecordedVerdicts, TurnApprovals
from cove.engine.context import JOURNAL_ITERATIONS, Handover, request_message, system_prompt
from cove.engine.control import TurnControl
from cove.engine.determinism import BlockInputs, LiveInputs
from cove.engine.given import GivenIteration, given_outcome
from cove.engine.iteration import Iteration, IterationResult, IterationSetup, LoopState
from cove.engine.journal import Journal
from cove.engine.llm import LLMClient, WithOptions
from cove.engine.nudges import NudgeNote, NudgeState, builtin_nudges
from cove.engine.policy import Ending, Streak, TurnPolicy, observed
from cove.engine.protocol import CodeBlock
from cove.environment.environment import Environment
from cove.environment.extensions.approval import Approver
from cove.errors import CoveError
from cove.events import Event, Nudge, TurnFinished, TurnStarted
from cove.persistence.records import ConversationRecord, ModelOption, TurnRecord
from cove.persistence.store import Store
from cove.results import TurnOutcome

MAX_REQUEST_CHARS = 1_000_000
#: The outcome of a turn whose iterations stopped without an ending (it is recorded as failed).
UNEXPECTED_END = TurnOutcome("failed", error="the turn ended unexpectedly")


@dataclass(frozen=True)
class TurnEnd:
    """How the iterations ended: the outcome, still without the turn's usage, and how many ran."""

    outcome: TurnOutcome = UNEXPECTED_END
    iterations: int = 0


@dataclass(frozen=True)
class TurnRequest:
    """One turn as it was asked: the request, its files, and the settings it overrides.

    Built once where a turn is sent (``Conversations.send``) and handed down whole: the
    conversation layer resolves the conversation, checks the owner, saves the files and picks
    the model; ``Query`` records the text and options and runs the turn.

    Attributes:
        conversation_id: The conversation, as the sender named it (an id or a unique prefix).
        text: The request.
        attachments: Files sent with it, as (name, content), saved into the conversation's
            workspace before the turn starts.
        model: The model for this turn; None: the configured one.
        max_iterations: The turn's iteration budget; None: the configured one.
        model_options: Sent with each of the turn's model calls and recorded with the turn
            (``temperature``, ``max_tokens``, …).
        owner: The principal the conversation must belong to; None: no owner check.
        no_model: The text is Python code the caller wrote: the turn runs it as its one block
            and calls no model (``given.py``); the turn records no model.
        timeout_s: With ``no_model``, the block's time limit (clamped to the sandbox's
            bounds); None: the configured one.
        approver: How the sending channel asks its person about an extension call the
            policy says to ask about; None: nobody can be asked, so such a call is denied.
        instructions: The conversation's instructions for this turn, shown in the system
            prompt (resolved from the conversation's profile where the turn starts; replay:
            the recorded ones); None: none.
        delivery: The name of the delivery from outside the turn answers (a Telegram update
            kept in the store's inbox): the turn starts only while the delivery has not
            started one, checked under the conversation's lease, and the delivery is finished
            once the turn is recorded (``persistence/inbox.py``); None: none.
    """

    conversation_id: str
    text: str
    attachments: tuple[tuple[str, bytes], ...] = ()
    model: str | None = None
    max_iterations: int | None = None
    model_options: Mapping[str, ModelOption] = field(default_factory=dict)
    owner: str | None = None
    no_model: bool = False
    timeout_s: float | None = None
    approver: Approver | None = field(default=None, compare=False)
    instructions: str | None = None
    delivery: str | None = None


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
        request: TurnRequest,
        inputs: BlockInputs | None = None,
        steering: dict[int, list[str]] | None = None,
        attachments: Sequence[tuple[str, int]] = (),
        approvals: RecordedVerdicts | None = None,
    ) -> None:
        """Prepare the turn ``request`` asks of ``conversation``.

        Args:
            settings: The settings the request does not override.
            store: Where the turn is recorded.
            env: The conversation's live environment.
            llm: The client of the request's model.
            conversation: The conversation (resolved from ``request.conversation_id``).
            request: The turn as it was asked (its files already saved: see ``attachments``).
            inputs: What blocks see of the world (replay: the recorded inputs).
            steering: Replay: the recorded notes by iteration position.
            attachments: The (name, size) of the files saved for the request, which its
                request message lists.
            approvals: Replay: the recorded verdicts on extension calls (nothing is asked).
        """
        self.settings = settings
        self.store = store
        self.env = env
        self.request = request
        options = request.model_options
        self.llm = WithOptions(llm, options) if options else llm
        self.conversation = conversation
        self.inputs = inputs or LiveInputs()
        self.attachments = tuple(attachments)  # (name, size) of the files attached to the request
        self.control: TurnControl | None = None
        self._cancelled_early = False
        self._steering = steering or {}  # replay: recorded notes by iteration position
        self._early_notes: list[str] = []
        self._approvals = approvals  # replay: recorded verdicts by (iteration, order)

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
        request = self.request.text
        if not request.strip():
            raise CoveError("the request is empty")
        if len(request) > MAX_REQUEST_CHARS:
            raise CoveError(f"the request is longer than {MAX_REQUEST_CHARS:,} characters")
        previous = await self._previous_turn()
        no_model = self.request.no_model
        cost_known = no_model or self.settings.model.price_of(self.llm.model) is not None
        turn = await self.store.start_turn(
            self.conversation.id,
            request,
            model=None if no_model else self.llm.model,
            attachments=self.attachments,
            model_options=self.request.model_options,
            cost_known=cost_known,
            delivery=self.request.delivery,
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
            budget=1
            if no_model
            else self.request.max_iterations or self.settings.loop.max_iterations,
            title=self.conversation.title,
        )
        control.approvals = TurnApprovals(
            self.store,
            self.conversation.id,
            turn.position,
            approver=self.request.approver,
            timeout_s=self.settings.extensions.approval_timeout_s,
            recorded=self._approvals,
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
            loop = self._given if no_model else self._loop
            try:
                async for item in loop(turn, control, previous):
                    if isinstance(item, TurnEnd):
                        end = item
                    else:
                        yield item
            finally:
                self.env.end_turn()
        except CoveError as exc:
            end = TurnEnd(TurnOutcome("failed", error=str(exc)), end.iterations)
        finally:
            outcome = replace(end.outcome, usage=control.usage)
            cost_known = cost_known and not control.unpriced_call
            await self.store.finish_turn(turn.id, outcome, cost_known=cost_known)
        yield TurnFinished(
            turn_id=turn.id,
            outcome=outcome,
            iterations=end.iterations,
            duration_ms=(time.perf_counter() - started) * 1000,
            conversation_id=self.conversation.id,
            cost_known=cost_known,
        )

    async def _previous_turn(self) -> TurnRecord | None:
        # One indexed lookup: a turn's start must not read what grows with the conversation.
        return await self.store.last_turn(self.conversation.id)

    async def _setup(
        self, turn: TurnRecord, control: TurnControl, previous: TurnRecord | None
    ) -> IterationSetup:
        """What every iteration of the turn needs: the prompt, the request and its handover."""
        handover = None
        if previous is not None:
            handover = Handover(
                request=previous.request,
                answer=previous.answer,
                thinking=await self.store.last_thinking(previous.id),
            )
        return IterationSetup(
            model_settings=self.settings.model,
            sandbox=self.settings.sandbox,
            store=self.store,
            env=self.env,
            llm=self.llm,
            control=control,
            inputs=self.inputs,
            turn=turn,
            system_prompt=system_prompt(self.env.system_prompt_docs(), self.request.instructions),
            handover_message=(
                request_message(control.request, handover, self.attachments) if handover else None
            ),
            request_message=request_message(control.request, None, self.attachments),
        )

    def _nudges(self, state: NudgeState, control: TurnControl, position: int) -> list[NudgeNote]:
        """The nudges of iteration ``position``: the built-in ones, then the extensions'."""
        state.iteration = position + 1
        state.budget = control.budget
        state.has_title = control.title is not None
        state.var_count = len(self.env.var_index)
        extensions = self.env.extension_nudges(iteration=position + 1, budget=control.budget)
        return [*builtin_nudges(state), *(NudgeNote("extension", text) for text in extensions)]

    async def _loop(
        self, turn: TurnRecord, control: TurnControl, previous: TurnRecord | None
    ) -> AsyncIterator[Event | TurnEnd]:
        """Run iterations until the policy ends the turn; the last item is the ``TurnEnd``."""
        journal = Journal.from_records(
            JOURNAL_ITERATIONS,
            await self.store.last_blocks(self.conversation.id, JOURNAL_ITERATIONS * 8),
        )
        setup = await self._setup(turn, control, previous)
        policy = TurnPolicy(self.settings.loop.error_budget, self.settings.loop.max_restarts)
        state = LoopState(journal_entries=journal.entries())
        nudge_state = NudgeState(error_budget=self.settings.loop.error_budget)
        signatures: list[str] = []
        streak = Streak()
        last: IterationResult | None = None
        position = 0
        while True:
            if self.inputs.stops(turn.position, position, None):
                control.cancel_requested.set()  # replay: the record stopped before this call
            before = policy.before(position, control.budget, control.cancel_requested.is_set())
            if before is not None:
                yield _ending(before, position, last)
                return
            nudges = self._nudges(nudge_state, control, position)
            for note in nudges:
                yield Nudge(turn_id=turn.id, text=note.text, kind=note.kind)
            iteration = Iteration(setup, position, state, [note.text for note in nudges])
            async for event in iteration.run():
                yield event
            result = iteration.result
            position += 1
            if result.status not in ("failed", "cancelled"):
                journal.add((turn.position, position - 1), result.journal)
                state.journal_entries = journal.entries()
                state.prior_thinking = result.thinking or state.prior_thinking
                last = result
                signatures.append(result.signature)
            step = policy.after(streak, result)
            if step.ending is not None:
                yield _ending(step.ending, position, last)
                return
            streak = step.streak
            nudge_state = observed(nudge_state, result, step, signatures)
            control.reasoning = step.reasoning

    async def _given(
        self, turn: TurnRecord, control: TurnControl, previous: TurnRecord | None
    ) -> AsyncIterator[Event | TurnEnd]:
        """The one iteration of a turn with no model (``given.py``); then the ``TurnEnd``."""
        if self.inputs.stops(turn.position, 0, None):
            control.cancel_requested.set()  # replay: the record stopped before the block
        if control.cancel_requested.is_set():
            yield TurnEnd(TurnOutcome("cancelled"), 0)
            return
        setup = IterationSetup(
            model_settings=self.settings.model,
            sandbox=self.settings.sandbox,
            store=self.store,
            env=self.env,
            llm=self.llm,
            control=control,
            inputs=self.inputs,
            turn=turn,
            system_prompt="",
            handover_message=None,
        )
        iteration = GivenIteration(setup, CodeBlock(self.request.text, self.request.timeout_s))
        async for event in iteration.run():
            yield event
        yield TurnEnd(given_outcome(iteration.result), 1)


def _ending(ending: Ending, iterations: int, last: IterationResult | None) -> TurnEnd:
    """The turn's end as recorded: a ``done`` ending carries the last iteration's answer."""
    if ending.status == "done" and last is not None:
        return TurnEnd(TurnOutcome("done", last.answer, last.confidence), iterations)
    answer = _fallback(ending, iterations, last) if ending.fallback else None
    return TurnEnd(TurnOutcome(ending.status, answer, error=ending.error), iterations)


def _fallback(ending: Ending, iterations: int, last: IterationResult | None) -> str:
    """The answer of a turn that ended unfinished: why it stopped, then where it got to.

    It is what a script reading ``cove run``'s stdout captures, so it names the real reason.
    """
    if ending.status == "error_budget":
        reason = f"I stopped: the error budget ran out ({ending.error or 'too many failures'})."
    else:
        reason = f"I could not finish within the iteration budget ({iterations} iterations)."
    thinking = (last.thinking if last else None) or "no reasoning was recorded"
    return f"{reason} Where I got to: {thinking[:2000]}"
