"""What each unit of an iteration sends: its checks ride in the statements that write.

The fence and the iteration's running state are conditions of the write itself, so a unit sends
no statement for them. On PostgreSQL each unit of an iteration is one statement, a transaction of
its own: one round trip, with other nodes told after it, off its path.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from cove.persistence.fence import Fence, fenced
from cove.persistence.locations import open_database
from cove.persistence.records import IterationWrite, ReplyWrite
from cove.persistence.store import DEFAULT_HISTORY_BUDGET, Store
from cove.results import BlockResult, VarVersion
from tests.persistence.counting import CountingDatabase, Counts, WireCounter, WireCounts
from tests.postgres_server import PostgresServer

T = TypeVar("T")

#: Statements of each unit of an iteration, by backend. SQLite: the prompt's blob and the guarded
#: iteration; one guarded update; the guarded block and its versions; the block code indexed for
#: search (read, FTS5 rows numbered, added: three) and the guarded status. PostgreSQL chains
#: each unit's writes into its guarded statement: one each.
STATEMENTS = {"sqlite": [2, 1, 2, 5], "postgres": [1, 1, 1, 1]}


def _versions(version: int) -> list[VarVersion]:
    return [
        VarVersion(
            name=name,
            version=version,
            block_position=0,
            kind="value",
            encoded='{"int": 1}',
            type_name="int",
            preview="1",
        )
        for name in ("total", "count")
    ]


async def _iteration(
    store: Store, turn_id: int, position: int, take: Callable[[], Awaitable[T]]
) -> list[T]:
    """Record one iteration unit by unit; what ``await take()`` counted after each unit."""
    counted = []
    iteration = await store.start_iteration(
        turn_id, position, system_prompt="p", request_message="r", context_message="c"
    )
    counted.append(await take())
    await store.record_reply(iteration, ReplyWrite(raw_reply="{}", planned_blocks=("x = 1",)))
    counted.append(await take())
    await store.record_block(
        iteration, BlockResult(position=0, code="x = 1", ok=True), _versions(position + 1)
    )
    counted.append(await take())
    await store.finish_iteration(iteration, IterationWrite(status="ok"))
    counted.append(await take())
    return counted


async def test_a_fenced_iteration_sends_no_statement_for_its_checks(
    database: str, backend: str
) -> None:
    db = CountingDatabase(await open_database(database, read_only=False))
    async with Store(db, time.time, DEFAULT_HISTORY_BUDGET) as store:
        conversation = await store.create_conversation(channel="cli")
        epoch = await store.acquire_lease(conversation.id, "a", 30.0)
        with fenced(Fence(conversation.id, "a", epoch)):
            turn = await store.start_turn(conversation.id, "q")
            db.counts.take()

            async def take() -> Counts:
                return db.counts.take()

            counted = await _iteration(store, turn.id, 0, take)
        (transcript_turn,) = (await store.transcript(conversation.id)).turns
        (recorded,) = transcript_turn.iterations

    assert counted == [Counts(units=1, statements=n, transactions=1) for n in STATEMENTS[backend]]
    assert recorded.status == "ok" and recorded.raw_reply == "{}"
    assert [b.code for b in recorded.blocks] == ["x = 1"]


async def test_on_postgresql_a_unit_is_one_round_trip_and_other_nodes_are_told_after_it(
    postgres_server: PostgresServer,
) -> None:
    url = postgres_server.database()
    async with WireCounter(url) as counter, Store.open(counter.url) as store:
        conversation = await store.create_conversation(channel="cli")
        epoch = await store.acquire_lease(conversation.id, "a", 30.0)
        told = store._db.told  # type: ignore[attr-defined]

        async def take() -> WireCounts:
            await told()
            return counter.counts.take()

        with fenced(Fence(conversation.id, "a", epoch)):
            turn = await store.start_turn(conversation.id, "q")
            await _iteration(store, turn.id, 0, take)  # each statement prepared once
            await take()
            counted = await _iteration(store, turn.id, 1, take)

    # Each unit: its one statement, a transaction of its own (no BEGIN, no COMMIT); then, off
    # its path and on a connection of its own, the commit number and the notification in one
    # statement; nothing prepared again.
    assert counted == [WireCounts(round_trips=1 + 1, statements=1 + 1, prepares=0)] * 4
