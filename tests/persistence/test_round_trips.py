"""What each unit of an iteration sends: its checks ride in the statements that write.

The fence and the iteration's running state are conditions of the write itself, so a unit sends
no statement for them; on PostgreSQL a write unit's round trips are its statements plus one
BEGIN and one message that commits and then notifies.
"""

from __future__ import annotations

import time

from cove.persistence.fence import Fence, fenced
from cove.persistence.locations import open_database
from cove.persistence.records import IterationWrite, ReplyWrite
from cove.persistence.store import DEFAULT_HISTORY_BUDGET, Store
from cove.results import BlockResult, VarVersion
from tests.persistence.counting import CountingDatabase, Counts, WireCounter, WireCounts
from tests.postgres_server import PostgresServer

#: Statements of ``finish_iteration`` closing an iteration of recorded blocks: the block code
#: indexed for search (SQLite reads it, numbers the FTS5 rows and adds them in three; PostgreSQL
#: adds it in one INSERT ... SELECT), then the guarded status.
FINISH = {"sqlite": 5, "postgres": 2}


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


async def _iteration(store: Store, turn_id: int, position: int, take: object) -> list[object]:
    """Record one iteration unit by unit; what ``take()`` counted after each unit."""
    counted = []
    iteration = await store.start_iteration(
        turn_id, position, system_prompt="p", request_message="r", context_message="c"
    )
    counted.append(take())  # type: ignore[operator]
    await store.record_reply(iteration, ReplyWrite(raw_reply="{}", planned_blocks=("x = 1",)))
    counted.append(take())  # type: ignore[operator]
    await store.record_block(
        iteration, BlockResult(position=0, code="x = 1", ok=True), _versions(position + 1)
    )
    counted.append(take())  # type: ignore[operator]
    await store.finish_iteration(iteration, IterationWrite(status="ok"))
    counted.append(take())  # type: ignore[operator]
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
            counted = await _iteration(store, turn.id, 0, db.counts.take)
        (transcript_turn,) = (await store.transcript(conversation.id)).turns
        (recorded,) = transcript_turn.iterations

    # start: the prompt's blob and the guarded iteration; reply: one guarded update; block:
    # the guarded block and its versions (one statement for both).
    assert counted == [
        Counts(units=1, statements=2, transactions=1),
        Counts(units=1, statements=1, transactions=1),
        Counts(units=1, statements=2, transactions=1),
        Counts(units=1, statements=FINISH[backend], transactions=1),
    ]
    assert recorded.status == "ok" and recorded.raw_reply == "{}"
    assert [b.code for b in recorded.blocks] == ["x = 1"]


async def test_on_postgresql_a_unit_is_its_statements_plus_two_round_trips(
    postgres_server: PostgresServer,
) -> None:
    url = postgres_server.database()
    async with WireCounter(url) as counter, Store.open(counter.url) as store:
        conversation = await store.create_conversation(channel="cli")
        epoch = await store.acquire_lease(conversation.id, "a", 30.0)
        with fenced(Fence(conversation.id, "a", epoch)):
            turn = await store.start_turn(conversation.id, "q")
            await _iteration(store, turn.id, 0, lambda: None)  # each statement prepared once
            counter.counts.take()
            counted = await _iteration(store, turn.id, 1, counter.counts.take)

    # BEGIN, the statements (the versions' executemany is one exchange and a statement per
    # row), then one message taking the commit number, committing and notifying after the
    # commit; nothing prepared again.
    assert counted == [
        WireCounts(round_trips=2 + 2, statements=2 + 4, prepares=0),
        WireCounts(round_trips=1 + 2, statements=1 + 4, prepares=0),
        WireCounts(round_trips=2 + 2, statements=3 + 4, prepares=0),
        WireCounts(round_trips=2 + 2, statements=2 + 4, prepares=0),
    ]
