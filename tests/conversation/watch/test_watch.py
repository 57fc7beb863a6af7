"""Watching conversations in one process: sequence numbers, fan-out, resync and resume."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from cove.conversation import Conversations, scripted_factory
from cove.conversation.watch.hub import Watcher
from cove.errors import NotFound
from cove.events import (
    BlockFinished,
    Event,
    IterationStarted,
    ModelDelta,
    ModelReply,
    Resync,
    TurnFinished,
    TurnQueued,
)
from cove.persistence import reads
from cove.persistence.database import Call
from cove.persistence.store import Store, _reads
from tests.conversation.watch.watch_helpers import GatedClient, durable, kinds, three_iterations
from tests.scripted import reply, settings_for


async def collect(stream: object, until_finished: bool = True) -> list[Event]:
    events: list[Event] = []
    async for event in stream:  # type: ignore[attr-defined]
        events.append(event)
        if until_finished and isinstance(event, TurnFinished):
            break
    return events


async def test_every_event_carries_the_conversation_and_a_growing_seq(tmp_path: Path) -> None:
    settings = settings_for(tmp_path)
    factory = scripted_factory([*three_iterations(), reply(["c = 3"], "{{c}}")])
    async with Conversations.open(settings, llm_factory=factory) as convs:
        conv = await convs.create()
        first = [e async for e in convs.send(conv.id, "count")]
    # A new process continues the sequence where the store left it.
    async with Conversations.open(settings, llm_factory=factory) as convs:
        second = [e async for e in convs.send(conv.id, "more")]
    events = first + second
    assert all(e.conversation_id == conv.id for e in events)
    seqs = [e.seq for e in events]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs) and seqs[0] > 0
    assert any(isinstance(e, ModelDelta) for e in events)


async def test_store_rebuilds_durable_events_with_the_live_numbers(tmp_path: Path) -> None:
    settings = settings_for(tmp_path)
    factory = scripted_factory(three_iterations())
    async with Conversations.open(settings, llm_factory=factory) as convs:
        conv = await convs.create()
        live = [e async for e in convs.send(conv.id, "count")]
    async with Conversations.open(settings, llm_factory=factory) as convs:
        stream = await convs.watch(conv.id, after=0).start()
        rebuilt = await collect(stream)
        await stream.aclose()
    assert [same_clock(e) for e in rebuilt] == [same_clock(e) for e in durable(live)]


def same_clock(event: Event) -> Event:
    """A turn's duration is measured live but rebuilt from its timestamps."""
    if isinstance(event, TurnFinished):
        return dataclasses.replace(event, duration_ms=0.0)
    return event


async def test_three_watchers_and_the_sender_see_the_same_sequence(tmp_path: Path) -> None:
    factory = scripted_factory(three_iterations())
    async with Conversations.open(settings_for(tmp_path), llm_factory=factory) as convs:
        conv = await convs.create()
        watchers = [await convs.watch(conv.id).start() for _ in range(3)]
        readers = [asyncio.create_task(collect(w)) for w in watchers]
        sent = [e async for e in convs.send(conv.id, "count")]
        seen = await asyncio.gather(*readers)
        for w in watchers:
            await w.aclose()
    assert isinstance(sent[-1], TurnFinished) and sent[-1].answer == "a=1 b=10"
    assert all(events == sent for events in seen)
    assert {type(e) for e in sent} >= {IterationStarted, ModelDelta, ModelReply, BlockFinished}


async def test_a_watcher_that_never_reads_does_not_hold_the_turn_and_gets_resync(
    tmp_path: Path,
) -> None:
    factory = scripted_factory(three_iterations())
    async with Conversations.open(settings_for(tmp_path), llm_factory=factory) as convs:
        conv = await convs.create()
        stuck = await convs.watch(conv.id, capacity=4).start()
        reference = await convs.watch(conv.id).start()
        reading = asyncio.create_task(collect(reference))
        # The turn finishes while ``stuck`` has read nothing.
        finished = await convs.send(conv.id, "count").finished()
        assert finished.status == "done"
        full = await reading
        late = await collect(stuck)
        await stuck.aclose()
        await reference.aclose()
    assert isinstance(late[0], Resync) and len(late) <= 5
    assert stuck.watcher.resyncs >= 1
    # After the resync it continues with the newest events, in order, ending like everyone.
    assert late[1:] == full[-len(late) + 1 :]


async def test_resume_after_n_mid_turn_yields_exactly_the_missing_events(tmp_path: Path) -> None:
    model = GatedClient(three_iterations(), gates=[2])
    async with Conversations.open(settings_for(tmp_path), llm_factory=model.factory()) as convs:
        conv = await convs.create()
        reference = await convs.watch(conv.id).start()
        reading = asyncio.create_task(collect(reference))
        first = await convs.watch(conv.id).start()
        handle = convs.send(conv.id, "count")
        seen: list[Event] = []
        async for event in first:
            seen.append(event)
            if isinstance(event, BlockFinished) and event.iteration == 1:
                break
        await first.aclose()  # the connection drops mid-turn
        await model.reached[2].wait()  # the turn is still running, at its third model call
        after = seen[-1].seq
        resumed = await convs.watch(conv.id, after=after).start()
        model.release(2)
        rest = await collect(resumed)
        await resumed.aclose()
        await handle.finished()
        full = await reading
        await reference.aclose()
    assert seen + rest == full
    assert kinds(rest) == [(e.type, e.seq) for e in full if e.seq > after]


async def test_resume_from_the_store_when_the_ring_no_longer_reaches(tmp_path: Path) -> None:
    model = GatedClient(three_iterations(), gates=[1])
    async with Conversations.open(settings_for(tmp_path), llm_factory=model.factory()) as convs:
        conv = await convs.create()
        handle = convs.send(conv.id, "count")
        await model.reached[1].wait()
        hub = convs._watching.hub(conv.id)
        hub.ring.clear()  # as if the ring had been overrun
        resumed = await convs.watch(conv.id, after=0).start()
        model.release(1)
        rest = await collect(resumed)
        await resumed.aclose()
        sent = [e async for e in handle]
    # Committed before the gate: the first iteration and the second's start, rebuilt from rows.
    second = next(e for e in sent if isinstance(e, IterationStarted) and e.iteration == 2)
    committed = [e for e in durable(sent) if e.seq <= second.seq]
    assert rest[: len(committed)] == committed
    assert rest[len(committed) :] == [e for e in sent if e.seq > second.seq]


async def test_watching_an_unknown_conversation_fails_clearly(tmp_path: Path) -> None:
    async with Conversations.open(settings_for(tmp_path), llm_factory=scripted_factory([])) as c:
        with pytest.raises(NotFound):
            await c.watch("f" * 32).start()


async def test_cancel_withdraws_a_queued_turn(tmp_path: Path) -> None:
    model = GatedClient([reply([], "first"), reply([], "third")], gates=[0])
    async with Conversations.open(settings_for(tmp_path), llm_factory=model.factory()) as convs:
        conv = await convs.create()
        running = convs.send(conv.id, "one")
        await model.reached[0].wait()
        queued = convs.send(conv.id, "two")
        assert isinstance(await anext(queued), TurnQueued)
        assert await queued.cancel()
        withdrawn = await queued.finished()
        model.release(0)
        assert (await running.finished()).answer == "first"
        assert (await convs.send(conv.id, "three").finished()).answer == "third"
        turns = await convs._store.turns(conv.id)
    assert withdrawn.status == "cancelled" and withdrawn.turn_id == 0
    assert [t.request for t in turns] == ["one", "three"]


async def test_resync_replaces_the_backlog_once() -> None:
    watcher = Watcher(capacity=3)
    for seq in range(1, 11):
        watcher.push(
            dataclasses.replace(IterationStarted(turn_id=1, iteration=1, budget=1), seq=seq)
        )
    watcher.close()
    got = [e async for e in watcher]
    assert isinstance(got[0], Resync) and [e.seq for e in got] == [9, 10]


def numbered(seq: int) -> Event:
    return dataclasses.replace(IterationStarted(turn_id=1, iteration=1, budget=1), seq=seq)


async def test_a_batch_reader_is_woken_once_and_takes_what_is_ready_in_order() -> None:
    watcher = Watcher(after=1)
    ready = watcher.ready()
    assert not ready.done() and watcher.take(10) == []
    for seq in (1, 2, 3, 3, 4):  # 1 is before ``after``, the second 3 a duplicate
        watcher.push(numbered(seq))
    assert ready.done()
    assert [e.seq for e in watcher.take(2)] == [2, 3]
    assert watcher.ready().done()  # more is queued
    assert [e.seq for e in watcher.take(10)] == [4]
    assert not watcher.ready().done()
    watcher.close(NotFound("conversation", "x"))
    with pytest.raises(NotFound):
        watcher.take(10)
    with pytest.raises(StopAsyncIteration):
        watcher.take(10)


async def test_the_list_watch_reports_created_renamed_running_and_deleted(
    tmp_path: Path,
) -> None:
    model = GatedClient([reply([], "done")], gates=[0])
    async with Conversations.open(settings_for(tmp_path), llm_factory=model.factory()) as convs:
        existing = await convs.create()
        async with convs.watch_list() as changes:
            conv = await convs.create()
            created = await anext(changes)
            await convs._store.set_title(conv.id, "Renamed")
            renamed = await anext(changes)
            handle = convs.send(existing.id, "go")
            await model.reached[0].wait()
            started = await anext(changes)
            model.release(0)
            await handle.finished()
            ended = await anext(changes)
            await convs.delete(conv.id)
            deleted = await anext(changes)
    assert (created.kind, created.conversation_id) == ("created", conv.id)
    assert (renamed.kind, renamed.title) == ("updated", "Renamed")
    assert (started.conversation_id, started.running) == (existing.id, True)
    assert (ended.conversation_id, ended.running) == (existing.id, False)
    assert (deleted.kind, deleted.conversation_id) == ("deleted", conv.id)


async def test_closing_withdraws_queued_turns_instead_of_running_them(tmp_path: Path) -> None:
    model = GatedClient([reply([], "first"), reply([], "never")], gates=[0])
    convs = await Conversations.open(settings_for(tmp_path), llm_factory=model.factory())
    conv = await convs.create()
    running = convs.send(conv.id, "one")
    await model.reached[0].wait()
    queued = convs.send(conv.id, "two")
    assert isinstance(await anext(queued), TurnQueued)
    closing = asyncio.create_task(convs.aclose())
    await asyncio.sleep(0)
    model.release(0)
    await closing
    assert (await queued.finished()).turn_id == 0
    assert (await running.finished()).status in ("cancelled", "done")
    assert model.calls == 1


async def test_the_handle_cancels_its_running_turn(tmp_path: Path) -> None:
    model = GatedClient([reply([], "never")], gates=[0])
    async with Conversations.open(settings_for(tmp_path), llm_factory=model.factory()) as convs:
        conv = await convs.create()
        handle = convs.send(conv.id, "one")
        await model.reached[0].wait()
        assert await handle.cancel()
        finished = await handle.finished()
        assert not await handle.cancel()  # it has ended
    assert finished.status == "cancelled" and finished.turn_id > 0


async def test_resume_is_exact_after_turns_this_process_did_not_see(tmp_path: Path) -> None:
    settings = settings_for(tmp_path)
    factory = scripted_factory([*three_iterations(), reply(["c = 3"], "{{c}}")])
    async with Conversations.open(settings, llm_factory=factory) as convs:
        conv = await convs.create()
        first = [e async for e in convs.send(conv.id, "one")]
        # Another process runs a turn meanwhile: here the hub only learns the store moved on.
        async with Conversations.open(settings, llm_factory=factory) as other:
            second = [e async for e in other.send(conv.id, "two")]
        after = first[2].seq  # a client that saw only the start of the first turn
        resumed = await convs.watch(conv.id, after=after).start()
        last_turn = second[-1].turn_id  # type: ignore[attr-defined]

        async def read() -> list[Event]:
            got: list[Event] = []
            async for event in resumed:
                got.append(event)
                if isinstance(event, TurnFinished) and event.turn_id == last_turn:
                    return got
            return got

        got = await asyncio.wait_for(read(), 60)  # a gap would leave it waiting
        await resumed.aclose()
    expected = [e for e in durable(first + second) if e.seq > after]
    assert [(e.type, e.seq) for e in got] == [(e.type, e.seq) for e in expected]


async def test_a_turn_whose_lease_lapsed_elsewhere_ends_interrupted_for_watchers(
    tmp_path: Path,
) -> None:
    settings = settings_for(tmp_path)
    async with Conversations.open(settings, llm_factory=scripted_factory([])) as convs:
        conv = await convs.create()
        # Another host's process took the lease, started a turn, and went silent.
        await convs._store.acquire_lease(conv.id, "elsewhere:1:x", 0.5)
        turn = await convs._store.start_turn(conv.id, "abandoned")
        stream = await convs.watch(conv.id, after=0).start()
        events = [e async for e in _until_finished(stream)]
        await stream.aclose()
        stored = await convs._store.get_turn(turn.id)
    assert [e.type for e in events] == ["turn_started", "turn_finished"]
    finished = events[-1]
    assert isinstance(finished, TurnFinished) and finished.status == "interrupted"
    assert stored.status == "interrupted"


async def test_a_read_only_watcher_of_a_lapsed_turn_waits_for_a_writer_to_end_it(
    tmp_path: Path,
) -> None:
    settings = settings_for(tmp_path)
    async with Conversations.open(settings, llm_factory=scripted_factory([])) as convs:
        conv = await convs.create()
        await convs._store.acquire_lease(conv.id, "elsewhere:1:x", 0.2)
        turn = await convs._store.start_turn(conv.id, "abandoned")
        async with Conversations.open(settings, read_only=True) as reader:
            stream = await reader.watch(conv.id, after=0).start()
            first = await asyncio.wait_for(anext(aiter(stream)), 30)
            await asyncio.sleep(1.5)  # the lease lapsed and the follower looked again
            assert await convs._store.interrupt_orphans() == 1  # a writing process reaps it
            rest = await asyncio.wait_for(_collect(_until_finished(stream)), 30)
            await stream.aclose()
        stored = await convs._store.get_turn(turn.id)
    assert [e.type for e in [first, *rest]] == ["turn_started", "turn_finished"]
    finished = rest[-1]
    assert isinstance(finished, TurnFinished) and finished.status == "interrupted"
    assert stored.status == "interrupted"


async def _collect(events: AsyncIterator[Event]) -> list[Event]:
    return [e async for e in events]


async def _until_finished(stream: object) -> AsyncIterator[Event]:
    async for event in stream:  # type: ignore[attr-defined]
        yield event
        if isinstance(event, TurnFinished):
            return


async def test_the_followers_one_commit_wakes_read_their_markers_together(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[list[str]] = []

    async def counted(call: Call, conversation_ids: Sequence[str]) -> dict[str, Any]:
        asked.append(list(conversation_ids))
        return await reads.change_markers(call, conversation_ids)

    monkeypatch.setattr(Store, "change_markers", _reads(counted))
    settings = settings_for(tmp_path)
    factory = scripted_factory([reply(["x = 1"], "{{x}}")])
    async with Conversations.open(settings, llm_factory=factory) as convs:
        ids = [(await convs.create()).id for _ in range(6)]
        streams = [await convs.watch(cid).start() for cid in ids]
        await asyncio.sleep(0.5)  # each follower's first look, alone as it attached
        asked.clear()
        # Another process runs a turn: every commit wakes the six followers here.
        async with Conversations.open(settings, llm_factory=factory) as other:
            ran = [e async for e in other.send(ids[0], "one")]
        seen = await asyncio.wait_for(collect(streams[0]), 60)
        for stream in streams:
            await stream.aclose()
    assert [e.seq for e in seen] == [e.seq for e in durable(ran)]  # nothing missed
    # One read per commit for all six, not one per follower (a follower busy reading its
    # conversation's transcript may ask a moment later, alone).
    assert max(map(len, asked)) == len(ids)
    assert sum(map(len, asked)) >= 3 * len(asked)
