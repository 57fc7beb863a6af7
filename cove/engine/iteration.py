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
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from cove.config import ModelSettings, SandboxSettings
from cove.engine import answer as answers
from cove.engine.budgets import VAR_INDEX_ROWS
from cove.engine.context import JournalEntry, context_message, request_message
from cove.engine.control import TurnControl
from cove.engine.determinism import BlockInputs
from cove.engine.journal import block_ref
from cove.engine.llm import Completion, LLMClient, Retry
from cove.engine.llm.client import with_image
from cove.engine.protocol import CodeBlock, Reply, ReplyParseError, parse_reply
from cove.environment.environment import Environment
from cove.environment.sandbox.outcome import BlockOutcome
from cove.errors import ModelError
from cove.events import (
    AnswerRefused,
    BlockFinished,
    BlockStarted,
    Event,
    IterationStarted,
    ModelDelta,
    ModelReply,
    ModelRetry,
    SandboxRestarted,
    SteerReceived,
    VarsChanged,
)
from cove.persistence.records import IterationWrite, ReplyWrite, TurnRecord
from cove.persistence.store import Store
from cove.results import BlockResult, VarVersion

IterationOutcome = Literal["ok", "error", "parse_error", "cancelled", "failed"]
#: The error of a block a cancellation kept from running.
NOT_RUN_CANCELLED = "not run: the turn was cancelled"


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


@dataclass(frozen=True)
class Prompt:
    """An iteration's recorded start: its row, seed and the three messages it sends."""

    iteration_id: int
    seed: int
    messages: list[dict[str, Any]]
    steering: list[str]


@dataclass(frozen=True)
class BlockDone:
    """A block's outcome, and whether it was recorded as it finished.

    A block that did not run (after a failure or a cancellation) is written when the iteration
    closes.
    """

    outcome: BlockOutcome
    recorded: bool


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
        self._started = time.perf_counter()

    async def run(self) -> AsyncIterator[Event]:
        """Run the iteration, yielding its events; the outcome lands in ``self.result``.

        prepare → call → parse → run blocks → answer → commit.
        """
        s, control = self.setup, self.setup.control
        self._started = time.perf_counter()
        prompt = await self._prepare()
        yield IterationStarted(turn_id=s.turn.id, iteration=self.number, budget=control.budget)
        for note in prompt.steering:
            yield SteerReceived(turn_id=s.turn.id, iteration=self.number, text=note)
        try:
            async for event in self._complete(prompt.messages):
                yield event
        except (ModelError, asyncio.CancelledError) as exc:
            self.result = await self._call_failed(prompt, exc)
            return
        answered = self._answered()
        try:
            reply = parse_reply(answered.raw_reply or "")
        except ReplyParseError as exc:
            yield self._reply_event(parse_error=str(exc))
            self.result = await self._unreadable(prompt, answered, exc)
            return
        await self._record_reply(prompt, answered, reply)
        yield self._reply_event(reply=reply)
        if reply.title and control.title is None:
            await control.set_title(reply.title)
        for event in control.take_events():
            yield event
        done: list[BlockDone] = []
        async for item in self._run_blocks(reply.blocks, prompt):
            if isinstance(item, BlockDone):
                done.append(item)
            else:
                yield item
        self.result = await self._commit(prompt, reply, done)
        if self.result.refusal is not None:
            yield AnswerRefused(
                turn_id=s.turn.id, iteration=self.number, reason=self.result.refusal
            )
        for event in control.take_events():
            yield event

    @property
    def number(self) -> int:
        """The iteration's 1-based number, as events and the model see it."""
        return self.position + 1

    async def _prepare(self) -> Prompt:
        """Build the context and record the iteration's start with its exact prompt."""
        s, control = self.setup, self.setup.control
        request_msg = (
            s.handover_message
            if self.position == 0 and s.handover_message
            else (s.request_message or request_message(control.request, None))
        )
        steering = control.take_steering(self.position)
        image = await self._newest_figure() if s.model_settings.model_images else None
        context_msg = context_message(
            iteration=self.number,
            budget=control.budget,
            prior_thinking=self.state.prior_thinking,
            journal=self.state.journal_entries,
            var_index=s.env.var_index.recent(VAR_INDEX_ROWS),
            nudges=self.nudges,
            steering=steering,
            var_count=len(s.env.var_index),
            image=image[0] if image else None,
        )
        seed = s.inputs.iteration_seed(s.turn.position, self.position)
        iteration_id = await s.store.start_iteration(
            s.turn.id,
            self.position,
            system_prompt=s.system_prompt,
            request_message=request_msg,
            context_message=context_msg,
            seed=seed,
        )
        if steering:
            await s.store.add_steering(iteration_id, steering)
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": s.system_prompt},
            {"role": "user", "content": request_msg},
            {"role": "user", "content": context_msg},
        ]
        if image:
            messages[2]["content"] = with_image(context_msg, image[1])
        return Prompt(iteration_id, seed, messages, steering)

    async def _newest_figure(self) -> tuple[str, bytes] | None:
        """The journal's newest figure, described, and its PNG (``model_images``)."""
        s = self.setup
        for entry in reversed(self.state.journal_entries):
            if entry.block.figures:
                figure = entry.block.figures[-1]
                png = figure.png or await s.store.figure(s.env.conversation_id, figure.digest)
                return f"[{entry.ref}] {figure.describe()}", png
        return None

    def _answered(self) -> ReplyWrite:
        """The finished call's reply as the store keeps it, its cost added to the turn's usage
        (its thinking and planned blocks are added once it is parsed)."""
        assert self.llm_task is not None
        completion = self.llm_task.result()
        return ReplyWrite(
            raw_reply=completion.text,
            usage=self.setup.control.count(completion),
            llm_ms=completion.duration_ms,
            model=completion.model,
        )

    async def _call_failed(
        self, prompt: Prompt, exc: ModelError | asyncio.CancelledError
    ) -> IterationResult:
        """Close an iteration whose model call failed or was cancelled."""
        cancelled = self.setup.control.cancel_requested.is_set()
        if not cancelled and isinstance(exc, asyncio.CancelledError):
            raise exc
        await self.setup.store.finish_iteration(
            prompt.iteration_id,
            IterationWrite(
                status="cancelled" if cancelled else "error",
                parse_error=None if cancelled else str(exc),
                duration_ms=self._ms(),
            ),
        )
        if cancelled:
            return IterationResult(status="cancelled")
        return IterationResult(status="failed", failure=str(exc))

    def _reply_event(self, *, reply: Reply | None = None, parse_error: str | None = None) -> Event:
        answered = self.llm_task.result().model if self.llm_task is not None else None
        if reply is None:
            return ModelReply(
                turn_id=self.setup.turn.id,
                iteration=self.number,
                thinking="",
                code=(),
                parse_error=parse_error,
                model=answered,
            )
        return ModelReply(
            turn_id=self.setup.turn.id,
            iteration=self.number,
            thinking=reply.thinking,
            code=tuple(b.code for b in reply.blocks),
            answer=reply.answer,
            model=answered,
        )

    async def _unreadable(
        self, prompt: Prompt, answered: ReplyWrite, exc: ReplyParseError
    ) -> IterationResult:
        """Close an iteration whose reply could not be parsed (the reply is recorded with it)."""
        await self.setup.store.finish_iteration(
            prompt.iteration_id,
            IterationWrite(
                status="parse_error", parse_error=str(exc), duration_ms=self._ms(), reply=answered
            ),
        )
        unreadable = BlockResult(position=0, code="(unreadable reply)", ok=False, error=str(exc))
        return IterationResult(
            status="parse_error",
            journal=[self._journal_entry(unreadable)],
            signature=f"parse:{exc}",
            parse_problem=exc.problem,
        )

    async def _record_reply(self, prompt: Prompt, answered: ReplyWrite, reply: Reply) -> None:
        """Record the reply as soon as it arrives, with its thinking and the blocks it plans."""
        await self.setup.store.record_reply(
            prompt.iteration_id,
            replace(
                answered,
                thinking=reply.thinking,
                planned_blocks=tuple(b.code for b in reply.blocks),
            ),
        )

    def _answer(
        self, reply: Reply, results: Sequence[BlockResult]
    ) -> tuple[str | None, str | None]:
        """The reply's answer with its ``{{name}}`` filled in, or why it was refused."""
        if reply.answer is None or self.setup.control.cancel_requested.is_set():
            return None, None
        failed = [i + 1 for i, block in enumerate(results) if not block.ok]
        try:
            return answers.fill_answer(
                reply.answer, self.setup.env.value_text, failed_blocks=failed
            ), None
        except answers.AnswerRefused as exc:
            return None, exc.reason

    async def _commit(
        self, prompt: Prompt, reply: Reply, done: Sequence[BlockDone]
    ) -> IterationResult:
        """Decide the answer and the status, and close the iteration with what is unrecorded
        (the reply was recorded on arrival)."""
        s = self.setup
        results = [d.outcome.result for d in done]
        answer, refusal = self._answer(reply, results)
        status = _status(s.control.cancel_requested.is_set(), results, refusal)
        await s.store.finish_iteration(
            prompt.iteration_id,
            IterationWrite(
                status=status,
                duration_ms=self._ms(),
                blocks=tuple(d.outcome.result for d in done if not d.recorded),
                subqueries=s.control.take_subqueries(),
                refusal=refusal,
            ),
        )
        restarts = [d.outcome.restart for d in done if d.outcome.restart is not None]
        return IterationResult(
            status=status,
            thinking=reply.thinking,
            answer=answer,
            confidence=reply.confidence,
            journal=[self._journal_entry(r) for r in results],
            signature=repr([(r.code, r.result_preview, r.error) for r in results]),
            refusal=refusal,
            next_reasoning=reply.next_reasoning,
            restart_reason=restarts[-1].reason if restarts else None,
            restarted_lost=tuple(name for r in restarts for name in r.lost),
        )

    def _journal_entry(self, block: BlockResult) -> JournalEntry:
        return JournalEntry(
            block_ref(self.setup.turn.position, self.position, block.position), block
        )

    async def _complete(self, messages: list[dict[str, Any]]) -> AsyncIterator[Event]:
        """Call the model, yielding ``ModelDelta`` events while the reply streams and a
        ``ModelRetry`` for each retry of a failed request.

        Chunks that arrived together while this generator's reader was busy go out as one
        delta (in order, the text whole): a busy process handles fewer events, never less text.
        """
        s = self.setup
        arrived: list[str | Retry] = []
        woken = asyncio.Event()

        async def sink(item: str | Retry) -> None:
            arrived.append(item)
            woken.set()

        self.llm_task = asyncio.create_task(
            s.llm.complete(messages, reasoning=s.control.reasoning, on_delta=sink, on_retry=sink)
        )
        self.llm_task.add_done_callback(lambda _: woken.set())
        s.control.running_llm = self.llm_task
        try:
            while arrived or not self.llm_task.done():
                await woken.wait()
                woken.clear()
                batch, arrived[:] = arrived[:], []
                for event in self._streamed(batch):
                    yield event
            await self.llm_task
        finally:
            s.control.running_llm = None

    def _streamed(self, batch: Sequence[str | Retry]) -> list[Event]:
        """The events of what the model client passed on: runs of text joined into one delta."""
        turn, events = self.setup.turn, list[Event]()
        text: list[str] = []
        for item in [*batch, None]:
            if isinstance(item, str):
                text.append(item)
                continue
            if text:
                events.append(
                    ModelDelta(turn_id=turn.id, iteration=self.number, text="".join(text))
                )
                text = []
            if isinstance(item, Retry):
                events.append(
                    ModelRetry(
                        turn_id=turn.id,
                        iteration=self.number,
                        attempt=item.attempt,
                        of=item.of,
                        reason=item.reason,
                    )
                )
        return events

    async def _run_blocks(
        self, code_blocks: Sequence[CodeBlock], prompt: Prompt
    ) -> AsyncIterator[Event | BlockDone]:
        """Run the reply's blocks in order, yielding their events and a ``BlockDone`` each.

        A block runs only while every block before it succeeded and the turn is not cancelled;
        the others are reported as not run.
        """
        s, control, turn = self.setup, self.setup.control, self.setup.turn
        stop_reason: str | None = None
        changes: list[VarVersion] = []
        for index, block in enumerate(code_blocks):
            if s.inputs.stops(turn.position, self.position, index):
                control.cancel_requested.set()  # replay: the record stopped before this block
            if stop_reason is None and control.cancel_requested.is_set():
                stop_reason = NOT_RUN_CANCELLED
            if stop_reason is not None:
                skipped = BlockResult(position=index, code=block.code, ok=False, error=stop_reason)
                yield BlockDone(BlockOutcome(skipped), recorded=False)
                continue
            yield BlockStarted(
                turn_id=turn.id, iteration=self.number, index=index + 1, code=block.code
            )
            outcome = await self._run_block(index, block, prompt.seed)
            changes.extend(outcome.changes)
            # Recorded now, so a crash in a later block cannot lose this one.
            await s.store.record_block(
                prompt.iteration_id, outcome.result, outcome.changes, control.take_subqueries()
            )
            for event in control.take_events():
                yield event
            yield BlockFinished(
                turn_id=turn.id, iteration=self.number, index=index + 1, block=outcome.result
            )
            if outcome.restart is not None:
                yield SandboxRestarted(
                    turn_id=turn.id,
                    reason=outcome.restart.reason,
                    restored=outcome.restart.restored,
                    lost=outcome.restart.lost,
                )
            yield BlockDone(outcome, recorded=True)
            if not outcome.result.ok:
                stop_reason = f"not run: block {index + 1} failed"
        if s.inputs.stops(turn.position, self.position, len(code_blocks)):
            control.cancel_requested.set()  # replay: the record stopped after its blocks
        if changes:
            yield VarsChanged(turn_id=turn.id, iteration=self.number, changes=tuple(changes))

    async def _run_block(self, index: int, block: CodeBlock, seed: int) -> BlockOutcome:
        """Run one block in the environment with its seed and clock."""
        s, control, turn = self.setup, self.setup.control, self.setup.turn
        control.current_block = index
        control.current_iteration = self.position
        try:
            return await s.env.run_block(
                block.code,
                position=index,
                timeout_s=_clamp_timeout(s.sandbox, block.timeout_s),
                seed=s.inputs.block_seed(turn.position, self.position, index, seed),
                clock=s.inputs.block_clock(turn.position, self.position, index),
            )
        finally:
            control.current_block = None

    def _ms(self) -> float:
        return (time.perf_counter() - self._started) * 1000


def _status(
    cancelled: bool, results: Sequence[BlockResult], refusal: str | None
) -> Literal["cancelled", "error", "ok"]:
    """An iteration's status: cancelled, an error when every block failed or the answer was
    refused, else ok."""
    if cancelled:
        return "cancelled"
    if (results and all(not r.ok for r in results)) or refusal:
        return "error"
    return "ok"


def _clamp_timeout(settings: SandboxSettings, requested: float | None) -> float:
    timeout = settings.block_timeout_s if requested is None else float(requested)
    return min(max(timeout, settings.block_timeout_min_s), settings.block_timeout_max_s)
