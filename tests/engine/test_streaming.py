"""A reply's stream as the engine passes it on: every chunk's text, in order; chunks that
arrived together while the turn's reader was busy go out as one delta."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from cove.engine.llm import CallKind, Completion, DeltaSink, Message, Reasoning, Retry, RetrySink
from cove.events import ModelDelta, ModelRetry, TurnFinished
from cove.persistence.records import ModelOption
from cove.results import Usage
from tests.engine.harness import engine_stack
from tests.scripted import settings_for

pytestmark = pytest.mark.slow  # a sandbox worker per test

REPLY = json.dumps({"thinking": "nothing to run", "code": [], "answer": "done"})


class ChunkedClient:
    """Streams ``REPLY`` in pieces, with a retry notice after the first; ``paced`` waits until
    the turn's reader has seen each delta before passing on the next piece."""

    model = "chunked"

    def __init__(self, pieces: Sequence[str], *, paced: bool) -> None:
        self.pieces = pieces
        self.paced = paced
        self.seen = asyncio.Event()

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
        assert on_delta is not None and on_retry is not None
        for k, piece in enumerate(self.pieces):
            await on_delta(piece)
            if k == 0:
                await on_retry(Retry(1, 2, "HTTP 503"))
            if self.paced:
                await self.seen.wait()
                self.seen.clear()
        return Completion(REPLY, Usage(1, 1), self.model, duration_ms=1.0)

    async def aclose(self) -> None:
        pass


def pieces() -> list[str]:
    return [REPLY[i : i + 7] for i in range(0, len(REPLY), 7)]


async def test_chunks_that_arrive_together_become_one_delta_around_a_retry(
    tmp_path: Path,
) -> None:
    client = ChunkedClient(pieces(), paced=False)
    async with engine_stack(settings_for(tmp_path), client, tmp_path) as stack:
        events, final = await stack.turn("go")
    assert final.status == "done"
    streamed = [e for e in events if isinstance(e, ModelDelta | ModelRetry)]
    assert [type(e).__name__ for e in streamed] == ["ModelDelta", "ModelRetry", "ModelDelta"]
    assert "".join(e.text for e in streamed if isinstance(e, ModelDelta)) == REPLY
    assert streamed[0] == ModelDelta(turn_id=final.turn_id, iteration=1, text=pieces()[0])


async def test_a_reader_that_keeps_up_gets_every_chunk_as_it_came(tmp_path: Path) -> None:
    client = ChunkedClient(pieces(), paced=True)
    async with engine_stack(settings_for(tmp_path), client, tmp_path) as stack:
        deltas: list[str] = []
        async for event in stack.query("go").run():
            if isinstance(event, ModelDelta):
                deltas.append(event.text)
                client.seen.set()
            if isinstance(event, TurnFinished):
                assert event.status == "done"
    assert deltas == pieces()
