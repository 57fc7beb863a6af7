"""Coalescing model deltas: fewer events, same text, same order."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator

from cove.conversation import coalesce_deltas
from cove.events import Event, ModelDelta, ModelReply


def delta(seq: int, text: str, iteration: int = 1) -> ModelDelta:
    return dataclasses.replace(ModelDelta(turn_id=1, iteration=iteration, text=text), seq=seq)


async def source(events: list[Event], gate: asyncio.Event | None = None) -> AsyncIterator[Event]:
    for event in events:
        if gate is not None and event.seq == 3:
            await gate.wait()
        yield event


async def test_runs_of_deltas_merge_until_another_event() -> None:
    reply = dataclasses.replace(ModelReply(turn_id=1, iteration=1, thinking="", code=()), seq=9)
    events = [delta(1, "he"), delta(2, "llo"), delta(3, " wor"), delta(4, "ld"), reply]
    events += [delta(10, "a", iteration=2), delta(11, "b", iteration=3)]
    got = [e async for e in coalesce_deltas(source(events), window_s=60)]
    assert [(type(e).__name__, e.seq) for e in got] == [
        ("ModelDelta", 4),
        ("ModelReply", 9),
        ("ModelDelta", 10),
        ("ModelDelta", 11),
    ]
    first = got[0]
    assert isinstance(first, ModelDelta) and first.text == "hello world"


async def test_a_window_releases_what_it_holds_without_waiting_for_more() -> None:
    gate = asyncio.Event()
    events: list[Event] = [delta(1, "a"), delta(2, "b"), delta(3, "c")]
    stream = coalesce_deltas(source(events, gate), window_s=0.01)
    first = await anext(stream)  # the source waits at the gate: only the window can release it
    gate.set()
    rest = [e async for e in stream]
    assert isinstance(first, ModelDelta) and first.text == "ab"
    assert [e.seq for e in rest] == [3]


async def test_an_error_of_the_source_comes_through_after_what_came_before() -> None:
    async def failing() -> AsyncIterator[Event]:
        yield delta(1, "x")
        raise RuntimeError("gone")

    got: list[Event] = []
    try:
        async for event in coalesce_deltas(failing(), window_s=60):
            got.append(event)
    except RuntimeError as exc:
        assert str(exc) == "gone"
    else:
        raise AssertionError("the error was swallowed")
    assert [e.seq for e in got] == [1]
