"""Fenced leases: the epoch grows with every takeover and stale-epoch writes are refused."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import AsyncIterator, Callable

import pytest

from cove.errors import Busy
from cove.persistence.fence import Fence, fenced
from cove.persistence.opener import Opener
from cove.persistence.records import IterationWrite, ReplyWrite
from cove.persistence.store import Store
from cove.results import BlockResult, TurnOutcome, VarVersion
from tests.persistence.store_helpers import FakeClock, count, rows_in

TTL = 30.0


def block(code: str = "x = 1") -> BlockResult:
    return BlockResult(position=0, code=code, ok=True)


async def test_the_epoch_grows_with_every_new_holder_and_not_with_renewals(
    store: Store, clock: FakeClock
) -> None:
    conversation = await store.create_conversation(channel="cli")

    first = await store.acquire_lease(conversation.id, "a", TTL)
    renewed = await store.acquire_lease(conversation.id, "a", TTL)
    await store.renew_lease(conversation.id, "a", TTL)
    clock.advance(TTL + 1)
    taken = await store.acquire_lease(conversation.id, "b", TTL)
    await store.release_lease(conversation.id, "b")
    again = await store.acquire_lease(conversation.id, "a", TTL)

    assert (first, renewed, taken, again) == (1, 1, 2, 3)


async def test_writes_under_the_current_epoch_land(store: Store) -> None:
    conversation = await store.create_conversation(channel="cli")
    epoch = await store.acquire_lease(conversation.id, "a", TTL)

    with fenced(Fence(conversation.id, "a", epoch)):
        turn = await store.start_turn(conversation.id, "q")
        iteration = await store.start_iteration(
            turn.id, 0, system_prompt="s", request_message="r", context_message="c"
        )
        await store.record_block(iteration, block())
        await store.set_title(conversation.id, "fenced title")
        done = await store.finish_turn(turn.id, TurnOutcome("done", answer="a"))

    assert done.status == "done"
    assert (await store.get_conversation(conversation.id)).title == "fenced title"


#: What a stale write could have added to; each count must stay as it was.
WRITTEN = ("turn", "iteration", "block", "var_version", "blob", "value_chunk", "search_doc")


async def test_every_turn_write_with_a_stale_epoch_is_refused_and_writes_nothing(
    store: Store, open_store: Callable[[], Opener[Store]], clock: FakeClock
) -> None:
    conversation = await store.create_conversation(channel="cli")
    stale = Fence(conversation.id, "a", await store.acquire_lease(conversation.id, "a", TTL))
    with fenced(stale):
        turn = await store.start_turn(conversation.id, "q")
        iteration = await store.start_iteration(
            turn.id, 0, system_prompt="s", request_message="r", context_message="c"
        )
    clock.advance(TTL + 1)
    async with open_store() as other:  # another process takes the conversation over
        assert await other.acquire_lease(conversation.id, "b", TTL) == stale.epoch + 1
    before = {table: await rows_in(store, table) for table in WRITTEN}
    touched = (await store.get_conversation(conversation.id)).updated_at
    # What each write would add is new: a prompt and a result never stored, versions whose
    # values are kept inline and in chunks.
    big = BlockResult(position=0, code="y = 2", ok=True, result_encoded=json.dumps("r" * 9000))
    small, large = (
        [VarVersion(name=name, kind="value", encoded=encoded, type_name="str", preview="v")]
        for name, encoded in (("small", '{"int": 1}'), ("large", json.dumps("v" * 9000)))
    )

    with fenced(stale):
        attempts = {
            "start_turn": lambda: store.start_turn(conversation.id, "late"),
            "start_iteration": lambda: store.start_iteration(
                turn.id, 1, system_prompt="a new prompt", request_message="r", context_message="c"
            ),
            "record_reply": lambda: store.record_reply(iteration, ReplyWrite(raw_reply="late")),
            "record_block": lambda: store.record_block(iteration, block()),
            "record_block, a large result": lambda: store.record_block(iteration, big, small),
            "record_block, values in chunks": lambda: store.record_block(iteration, big, large),
            "finish_iteration": lambda: store.finish_iteration(iteration, IterationWrite("ok")),
            "add_steering": lambda: store.add_steering(iteration, ["late note"]),
            "set_title": lambda: store.set_title(conversation.id, "stale title"),
            "finish_turn": lambda: store.finish_turn(turn.id, TurnOutcome("done", answer="late")),
        }
        for name, attempt in attempts.items():
            with pytest.raises(Busy, match="epoch 1 was refused") as refused:
                await attempt()
            assert refused.value.owner == "b", name

    assert {table: await rows_in(store, table) for table in WRITTEN} == before
    assert await rows_in(store, "steering") == 0
    (kept,) = (await store.transcript(conversation.id)).turns[0].iterations
    assert kept.raw_reply is None and kept.status == "interrupted"
    record = await store.get_conversation(conversation.id)
    assert record.title is None and record.lease_owner == "b"
    assert record.updated_at == touched
    assert (await store.get_turn(turn.id)).status == "interrupted"  # the takeover's doing


@contextlib.asynccontextmanager
async def _busy(store: Store) -> AsyncIterator[None]:
    """Keep the store's connection busy for the body: on SQLite its one thread runs a unit that
    waits; on PostgreSQL a pooled connection is taken."""
    db = store._db  # type: ignore[attr-defined]
    if store.kind != "sqlite":
        async with db.reading():
            yield
        return
    release = threading.Event()

    async def waiting(_: object) -> None:
        release.wait(30)  # on the connection's thread: every later unit queues behind it

    holding = asyncio.ensure_future(db.run(waiting))
    try:
        yield
    finally:
        release.set()
        await holding


async def _in_flight_across(
    store: Store, takeover: Callable[[], object], fence: Fence, conversation_id: str
) -> asyncio.Task[object]:
    """Issue a ``start_turn`` under ``fence`` while the store's connection is held, run
    ``takeover`` (an awaitable factory) meanwhile, then let the write execute."""
    # The store is held busy, so the write waits exactly as a write does behind a slow unit;
    # the fence is captured when the write is issued.
    async with _busy(store):
        with fenced(fence):
            write: asyncio.Task[object] = asyncio.ensure_future(
                store.start_turn(conversation_id, "issued before the takeover")
            )
        await asyncio.sleep(0)  # let the write start waiting for the connection
        assert not write.done()
        await takeover()  # type: ignore[misc]
    await asyncio.gather(write, return_exceptions=True)
    return write


async def test_a_write_in_flight_when_another_process_takes_over_does_not_land(
    store: Store, open_store: Callable[[], Opener[Store]], clock: FakeClock, db_path: object
) -> None:
    conversation = await store.create_conversation(channel="cli")
    fence = Fence(conversation.id, "a", await store.acquire_lease(conversation.id, "a", TTL))
    other = await open_store()

    async def takeover() -> None:
        clock.advance(TTL + 1)
        await other.acquire_lease(conversation.id, "b", TTL)

    try:
        write = await _in_flight_across(store, takeover, fence, conversation.id)
    finally:
        await other.aclose()

    assert isinstance(write.exception(), Busy)
    assert "epoch 1 was refused" in str(write.exception())
    assert count(db_path, "turn") == 0  # type: ignore[arg-type]


async def test_the_same_write_in_flight_lands_when_nobody_takes_over(
    store: Store, db_path: object
) -> None:
    conversation = await store.create_conversation(channel="cli")
    fence = Fence(conversation.id, "a", await store.acquire_lease(conversation.id, "a", TTL))

    async def nothing() -> None:
        pass

    write = await _in_flight_across(store, nothing, fence, conversation.id)

    assert write.exception() is None
    assert count(db_path, "turn") == 1  # type: ignore[arg-type]
