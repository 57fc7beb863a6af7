"""A turn with no model: code the caller wrote runs as the turn's one block.

A channel whose caller writes the code itself (an agent over MCP, ``cove exec``) sends a
``TurnRequest`` with ``no_model=True`` and the code as its text. The turn is recorded like any
other — its row, one iteration, the block with its variable versions, the events every watcher
sees — but no model is called:

* the iteration records no prompt (nothing was sent to a model: empty messages), and as its
  reply the JSON a model would have sent for the same block (``given_reply``), so a replay
  reads it back with the protocol's own parser and runs the same block;
* the turn records no model (``TurnRecord.model`` is None), which is how replay tells such a
  turn; it costs nothing, and ``llm_query`` inside its block fails (there is no model to ask);
* it ends ``done`` when the block succeeded, ``failed`` with the block's error when it did
  not, ``cancelled`` when it was stopped. It has no answer: the block is the result.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Mapping, Sequence

from cove.engine.iteration import (
    BlockDone,
    Iteration,
    IterationResult,
    IterationSetup,
    LoopState,
    Prompt,
)
from cove.engine.llm import CallKind, Completion, DeltaSink, Message, Reasoning, RetrySink
from cove.engine.protocol import CodeBlock, Reply, parse_reply
from cove.errors import CoveError, ModelError
from cove.events import Event, IterationStarted
from cove.persistence.records import ModelOption, ReplyWrite
from cove.results import TurnOutcome

#: What ``llm_query`` says inside a turn that has no model.
NO_MODEL_ERROR = (
    "this turn runs code with no model, so there is no model to ask: "
    "send the question to cove as a turn of its own instead"
)


class NoModel:
    """The ``LLMClient`` of a turn with no model: every call fails with ``ModelError``."""

    model = ""

    async def complete(
        self,
        messages: Sequence[Message],
        *,
        kind: CallKind = "iteration",
        reasoning: Reasoning = "balanced",
        on_delta: DeltaSink | None = None,
        options: Mapping[str, ModelOption] | None = None,
        on_retry: RetrySink | None = None,
    ) -> Completion:
        """Refuse: a turn with no model makes no model call."""
        raise ModelError(NO_MODEL_ERROR)

    async def models(self) -> list[str]:
        """No model at all."""
        return []

    async def aclose(self) -> None:
        """Nothing to close."""


def given_reply(code: str, timeout_s: float | None = None) -> str:
    """The reply recorded for ``code``: what a model would have sent to run it as one block."""
    reply = Reply(thinking="", blocks=(CodeBlock(code, timeout_s),))
    return json.dumps(reply.to_json())


def given_block(raw_reply: str) -> CodeBlock:
    """The block a recorded given reply runs (the inverse of ``given_reply``).

    Raises:
        CoveError: The text is not a reply with exactly one block.
    """
    blocks = parse_reply(raw_reply).blocks
    if len(blocks) != 1:
        raise CoveError(f"a turn with no model runs one block, the record has {len(blocks)}")
    return blocks[0]


def given_outcome(result: IterationResult) -> TurnOutcome:
    """How a turn with no model ends, from its one iteration."""
    if result.status == "cancelled":
        return TurnOutcome("cancelled")
    if result.status == "ok":
        return TurnOutcome("done")
    errors = [entry.block.error for entry in result.journal if entry.block.error]
    return TurnOutcome("failed", error=errors[0] if errors else result.failure)


class GivenIteration(Iteration):
    """The one iteration of a turn with no model: its reply is the caller's block.

    The steps are an iteration's, without the model call: record the start (no prompt), record
    the reply, run the block, close the iteration.
    """

    def __init__(self, setup: IterationSetup, block: CodeBlock) -> None:
        super().__init__(setup, 0, LoopState(journal_entries=[]), ())
        self.block = block

    async def run(self) -> AsyncIterator[Event]:
        """Run the block, yielding the iteration's events; the outcome lands in ``result``."""
        s, control = self.setup, self.setup.control
        self._started = time.perf_counter()
        prompt = await self._start()
        yield IterationStarted(turn_id=s.turn.id, iteration=self.number, budget=control.budget)
        reply = Reply(thinking="", blocks=(self.block,))
        text = given_reply(self.block.code, self.block.timeout_s)
        await self._record_reply(prompt, ReplyWrite(raw_reply=text), reply)
        yield self._reply_event(reply=reply)
        done: list[BlockDone] = []
        async for item in self._run_blocks(reply.blocks, prompt):
            if isinstance(item, BlockDone):
                done.append(item)
            else:
                yield item
        self.result = await self._commit(prompt, reply, done)
        for event in control.take_events():
            yield event

    async def _start(self) -> Prompt:
        """Record the iteration's start: no prompt, since no model is asked anything."""
        s = self.setup
        seed = s.inputs.iteration_seed(s.turn.position, self.position)
        iteration_id = await s.store.start_iteration(
            s.turn.id, self.position, system_prompt="", request_message="", context_message="",
            seed=seed,
        )  # fmt: skip
        return Prompt(iteration_id, seed, [], [])
