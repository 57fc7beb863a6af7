"""One iteration: one LLM round-trip and its blocks, recorded as they happen.

build context → record the iteration start (its exact prompt) → call the model (streaming
``ModelDelta``) → record the reply as soon as it arrives → parse → run the blocks, recording each
with its variable versions as it finishes → close the iteration. Each record is one atomic
write, so a process killed mid-block leaves the reply, the finished blocks and (from the reply's
planned blocks) which block was running.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Literal

from cove.config import ModelSettings, SandboxSettings
from cove.engine.answer import AnswerRefused, fill_answer
from cove.engine.budgets import VAR_INDEX_ROWS
from cove.engine.context import JournalEntry, context_message, request_message
from cove.engine.control import TurnControl
from cove.engine.determinism import BlockInputs
from cove.engine.journal import block_ref
from cove.engine.llm import Completion, LLMClient
from cove.engine.protocol import CodeBlock, ReplyParseError, parse_reply
from cove.environment.environment import Environment
from cove.environment.sandbox.outcome import BlockOutcome
from cove.errors import ModelError
from cove.events import (
    BlockFinished,
    BlockStarted,
    Event,
    IterationStarted,
    ModelDelta,
    ModelReply,
    SandboxRestarted,
    SteerReceived,
    VarChange,
    VarsChanged,
)
from cove.persistence.records import BlockWrite, IterationWrite, ReplyWrite, TurnRecord
from cove.persistence.store import Store

IterationOutcome = Literal["ok", "error", "parse_error", "cancelled", "failed"]


@dataclass
class LoopState:
    """What one iteration hands the next: the journal and the prior thinking."""

    journal_entries: list[JournalEntry]
    prior_thinking: str | None = None


@dataclass
class IterationResult:
    """How an iteration ended, for the turn loop to decide what comes next."""

    status: IterationOutcome
    thinking: str | None = None
    answer: str | None = None
    confidence: str | None = None
    failure: str | None = None
    journal: list[JournalEntry] = field(default_factory=list)
    signature: str = ""  # code + results, to spot repetition
    refusal: str | None = None
    next_reasoning: str | None = None
    restart_reason: str | None = None
    restarted_lost: tuple[str, ...] = ()
    parse_problem: str | None = None  # why the reply could not be used (status parse_error)


@dataclass
class IterationSetup:
    """Everything an iteration needs from its turn."""

    model_settings: ModelSettings  # the price table
    sandbox: SandboxSettings  # the block timeouts
    store: Store
    env: Environment
    llm: LLMClient
    control: TurnControl
    inputs: BlockInputs
    turn: TurnRecord
    system_prompt: str
    handover_message: str | None  # the request message with handover, for iteration 0
    request_message: str = ""  # the request message of every other iteration


class Iteration:
    """One LLM round-trip; iterate ``run()`` for events, then read ``result``."""

    def __init__(
        self, setup: IterationSetup, position: int, state: LoopState, nudges: Sequence[str]
    ):
        self.setup = setup
        self.position = position
        self.state = state
        self.nudges = list(nudges)
        self.result = IterationResult(status="failed", failure="iteration did not run")
        self.llm_task: asyncio.Task[Completion] | None = None

    async def run(self) -> AsyncIterator[Event]:
        """Run the iteration, yielding its events; the outcome lands in ``self.result``."""
        s, control = self.setup, self.setup.control
        turn = s.turn
        started = time.perf_counter()
        request_msg = (
            s.handover_message
            if self.position == 0 and s.handover_message
            else (s.request_message or request_message(control.request, None))
        )
        steering = control.take_steering(self.position)
        context_msg = context_message(
            iteration=self.position + 1,
            budget=control.budget,
            prior_thinking=self.state.prior_thinking,
            journal=self.state.journal_entries,
            var_index=s.env.var_index.recent(VAR_INDEX_ROWS),
            nudges=self.nudges,
            steering=steering,
            var_count=len(s.env.var_index),
        )
        seed = s.inputs.iteration_seed(turn.position, self.position)
        iteration_id = await s.store.start_iteration(
            turn.id,
            self.position,
            system_prompt=s.system_prompt,
            request_message=request_msg,
            context_message=context_msg,
            seed=seed,
        )
        if steering:
            await s.store.add_steering(iteration_id, steering)
        yield IterationStarted(turn_id=turn.id, iteration=self.position + 1, budget=control.budget)
        for note in steering:
            yield SteerReceived(turn_id=turn.id, iteration=self.position + 1, text=note)
        messages = [
            {"role": "system", "content": s.system_prompt},
            {"role": "user", "content": request_msg},
            {"role": "user", "content": context_msg},
        ]
        completion: Completion | None = None
        try:
            async for event in self._complete(messages):
                yield event
            assert self.llm_task is not None
            completion = self.llm_task.result()
        except (ModelError, asyncio.CancelledError) as exc:
            cancelled = control.cancel_requested.is_set()
            if not cancelled and isinstance(exc, asyncio.CancelledError):
                raise
            ending: IterationOutcome = "cancelled" if cancelled else "failed"
            await s.store.finish_iteration(
                iteration_id,
                IterationWrite(
                    status="cancelled" if cancelled else "error",
                    raw_reply=None,
                    parse_error=None if cancelled else str(exc),
                    duration_ms=_ms(started),
                ),
            )
            self.result = IterationResult(status=ending, failure=None if cancelled else str(exc))
            return
        cost = control.usage.add(
            s.model_settings, completion.model, completion.tokens_in, completion.tokens_out
        )
        try:
            reply = parse_reply(completion.text)
        except ReplyParseError as exc:
            yield ModelReply(
                turn_id=turn.id,
                iteration=self.position + 1,
                thinking="",
                code=(),
                parse_error=str(exc),
            )
            entry = JournalEntry(
                ref=block_ref(turn.position, self.position, 0),
                code="(unreadable reply)",
                ok=False,
                result=None,
                stdout="",
                stderr="",
                error=str(exc),
                duration_ms=0.0,
            )
            await s.store.finish_iteration(
                iteration_id,
                IterationWrite(
                    status="parse_error",
                    raw_reply=completion.text,
                    parse_error=str(exc),
                    tokens_in=completion.tokens_in,
                    tokens_out=completion.tokens_out,
                    cost_usd=cost,
                    llm_ms=completion.duration_ms,
                    duration_ms=_ms(started),
                ),
            )
            self.result = IterationResult(
                status="parse_error",
                journal=[entry],
                signature=f"parse:{exc}",
                parse_problem=exc.problem,
            )
            return
        await s.store.record_reply(
            iteration_id,
            ReplyWrite(
                raw_reply=completion.text,
                thinking=reply.thinking,
                tokens_in=completion.tokens_in,
                tokens_out=completion.tokens_out,
                cost_usd=cost,
                llm_ms=completion.duration_ms,
                planned_blocks=tuple(b.code for b in reply.blocks),
            ),
        )
        yield ModelReply(
            turn_id=turn.id,
            iteration=self.position + 1,
            thinking=reply.thinking,
            code=tuple(b.code for b in reply.blocks),
            answer=reply.answer,
        )
        if reply.title and control.title is None:
            await control.set_title(reply.title)
        for event in control.take_events():
            yield event

        blocks: list[BlockWrite] = []
        unrecorded: list[BlockWrite] = []
        outcomes: list[BlockOutcome] = []
        async for event in self._run_blocks(
            reply.blocks, iteration_id, seed, blocks, unrecorded, outcomes
        ):
            yield event

        failed = [i + 1 for i, block in enumerate(blocks) if not block.ok]
        answer: str | None = None
        refusal: str | None = None
        cancelled = control.cancel_requested.is_set()
        if reply.answer is not None and not cancelled:
            try:
                answer = fill_answer(reply.answer, s.env.value_text, failed_blocks=failed)
            except AnswerRefused as exc:
                refusal = exc.reason
        status: Literal["cancelled", "error", "ok"] = "ok"
        if cancelled:
            status = "cancelled"
        elif (blocks and len(failed) == len(blocks)) or refusal:
            status = "error"
        await s.store.finish_iteration(
            iteration_id,
            IterationWrite(
                status=status,
                raw_reply=completion.text,
                thinking=reply.thinking,
                tokens_in=completion.tokens_in,
                tokens_out=completion.tokens_out,
                cost_usd=cost,
                llm_ms=completion.duration_ms,
                duration_ms=_ms(started),
                blocks=tuple(unrecorded),
                subqueries=control.take_subqueries(),
            ),
        )
        journal = [
            JournalEntry(
                ref=block_ref(turn.position, self.position, b.position),
                code=b.code,
                ok=b.ok,
                result=b.result_preview,
                stdout=b.stdout,
                stderr=b.stderr,
                error=b.error,
                duration_ms=b.duration_ms,
                timed_out=b.timed_out,
            )
            for b in blocks
        ]
        lost: tuple[str, ...] = ()
        restart_reason: str | None = None
        for outcome in outcomes:
            if outcome.restart is not None:
                lost += outcome.restart.lost
                restart_reason = outcome.restart.reason
        self.result = IterationResult(
            status=status,
            thinking=reply.thinking,
            answer=answer,
            confidence=reply.confidence,
            journal=journal,
            signature=repr([(b.code, b.result_preview, b.error) for b in blocks]),
            refusal=refusal,
            next_reasoning=reply.next_reasoning,
            restart_reason=restart_reason,
            restarted_lost=lost,
        )
        for event in control.take_events():
            yield event

    async def _complete(self, messages: list[dict[str, str]]) -> AsyncIterator[Event]:
        """Call the model, yielding ``ModelDelta`` events while the reply streams."""
        s, turn = self.setup, self.setup.turn
        queue: asyncio.Queue[str | None] = asyncio.Queue()

        async def sink(text: str) -> None:
            queue.put_nowait(text)

        self.llm_task = asyncio.create_task(
            s.llm.complete(messages, reasoning=s.control.reasoning, on_delta=sink)
        )
        self.llm_task.add_done_callback(lambda _: queue.put_nowait(None))
        s.control.running_llm = self.llm_task
        try:
            while (text := await queue.get()) is not None:
                yield ModelDelta(turn_id=turn.id, iteration=self.position + 1, text=text)
            await self.llm_task
        finally:
            s.control.running_llm = None

    async def _run_blocks(
        self,
        code_blocks: Sequence[CodeBlock],
        iteration_id: int,
        seed: int,
        blocks: list[BlockWrite],
        unrecorded: list[BlockWrite],
        outcomes: list[BlockOutcome],
    ) -> AsyncIterator[Event]:
        """Run the reply's blocks in order, recording each with its versions as it finishes.

        Blocks that do not run (after a failure or a cancellation) land in ``unrecorded``, for
        the iteration's closing write.
        """
        s, control, turn = self.setup, self.setup.control, self.setup.turn
        stop_reason: str | None = None
        changes: list[VarChange] = []
        for index, block in enumerate(code_blocks):
            if stop_reason is None and control.cancel_requested.is_set():
                stop_reason = "not run: the turn was cancelled"
            if stop_reason is not None:
                skipped = BlockWrite(position=index, code=block.code, ok=False, error=stop_reason)
                blocks.append(skipped)
                unrecorded.append(skipped)
                continue
            yield BlockStarted(
                turn_id=turn.id, iteration=self.position + 1, index=index + 1, code=block.code
            )
            block_seed = s.inputs.block_seed(turn.position, self.position, index, seed)
            clock = s.inputs.block_clock(turn.position, self.position, index)
            control.current_block = index
            outcome, new_versions = await s.env.run_block(
                block.code,
                position=index,
                timeout_s=_clamp_timeout(s.sandbox, block.timeout_s),
                seed=block_seed,
                clock=clock,
            )
            control.current_block = None
            outcomes.append(outcome)
            changes.extend(
                VarChange(
                    name=v.name, version=v.version, type=v.type_name, preview=v.preview, kind=v.kind
                )
                for v in new_versions
            )
            finished = BlockWrite(
                position=index,
                code=block.code,
                ok=outcome.ok,
                result_preview=outcome.value_preview,
                result_encoded=outcome.value_encoded,
                stdout=outcome.stdout,
                stderr=outcome.stderr,
                error=outcome.error,
                duration_ms=outcome.duration_ms,
                timed_out=outcome.timed_out,
                seed=block_seed,
                clock=clock,
            )
            blocks.append(finished)
            # Recorded now, so a crash in a later block cannot lose this one.
            await s.store.record_block(
                iteration_id, finished, new_versions, control.take_subqueries()
            )
            for event in control.take_events():
                yield event
            yield BlockFinished(
                turn_id=turn.id,
                iteration=self.position + 1,
                index=index + 1,
                code=block.code,
                ok=outcome.ok,
                result_preview=outcome.value_preview,
                stdout=outcome.stdout,
                stderr=outcome.stderr,
                error=outcome.error,
                duration_ms=outcome.duration_ms,
                timed_out=outcome.timed_out,
            )
            if outcome.restart is not None:
                yield SandboxRestarted(
                    turn_id=turn.id,
                    reason=outcome.restart.reason,
                    restored=outcome.restart.restored,
                    lost=outcome.restart.lost,
                )
            if not outcome.ok:
                stop_reason = f"not run: block {index + 1} failed"
        if changes:
            yield VarsChanged(turn_id=turn.id, iteration=self.position + 1, changes=tuple(changes))


def _clamp_timeout(settings: SandboxSettings, requested: float | None) -> float:
    timeout = settings.block_timeout_s if requested is None else float(requested)
    return min(max(timeout, settings.block_timeout_min_s), settings.block_timeout_max_s)


def _ms(started: float) -> float:
    return (time.perf_counter() - started) * 1000
