"""Recording an iteration unit by unit: the reply on arrival, each block as it finishes.

Also the totals of turns that did not finish normally: the sum of what they recorded.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from cove.errors import Busy, StoreError
from cove.persistence.opener import Opener
from cove.persistence.records import (
    IterationWrite,
    ReplyWrite,
    SubqueryWrite,
)
from cove.persistence.store import Store
from cove.results import BlockResult, TurnOutcome, Usage, VarVersion
from tests.persistence.store_helpers import SYSTEM_PROMPT, count


async def start(store: Store, position: int = 0) -> tuple[str, int, int]:
    conversation = await store.create_conversation(channel="cli")
    turn = await store.start_turn(conversation.id, "question")
    iteration_id = await store.start_iteration(
        turn.id, position, system_prompt=SYSTEM_PROMPT, request_message="r", context_message="c"
    )
    return conversation.id, turn.id, iteration_id


def block(position: int, code: str = "x = 1") -> BlockResult:
    return BlockResult(position=position, code=code, ok=True, result_preview="1")


def version(name: str, number: int, position: int) -> VarVersion:
    return VarVersion(name, "value", "1", "int", "1", version=number, block_position=position)


async def test_reply_and_blocks_are_readable_before_the_iteration_ends(store: Store) -> None:
    conversation_id, turn_id, iteration_id = await start(store)
    await store.record_reply(
        iteration_id,
        ReplyWrite(
            raw_reply='{"code": ["x = 1", "y = 2"]}',
            thinking="two steps",
            usage=Usage(100, 20, 0.5),
            llm_ms=12.0,
            planned_blocks=("x = 1", "y = 2"),
        ),
    )
    await store.record_block(iteration_id, block(0), [version("x", 1, 0)])
    transcript = await store.transcript(conversation_id)
    [it] = transcript.turns[0].iterations
    assert it.status == "running"
    assert (it.raw_reply, it.thinking, it.usage.tokens_in, it.usage.cost_usd) == (
        '{"code": ["x = 1", "y = 2"]}',
        "two steps",
        100,
        0.5,
    )
    assert [b.code for b in it.blocks] == ["x = 1"]
    assert it.planned_blocks == ("x = 1", "y = 2")
    assert it.running_block == 1  # the second block is the one running now
    assert list(await store.vars_as_of(conversation_id)) == ["x"]
    # Code is indexed for search when the iteration closes (one FTS segment per iteration).
    assert await store.search("x", conversation_id=conversation_id) == []

    await store.record_block(iteration_id, block(1, "y = 2"), [version("y", 1, 1)])
    await store.finish_iteration(iteration_id, IterationWrite(status="ok", duration_ms=30.0))
    [it] = (await store.transcript(conversation_id)).turns[0].iterations
    assert it.status == "ok" and it.raw_reply and it.thinking == "two steps"
    # Closing the iteration leaves the reply as it was recorded, its usage and cost included.
    assert (it.usage, it.llm_ms, it.duration_ms) == (Usage(100, 20, 0.5), 12.0, 30.0)
    assert [b.position for b in it.blocks] == [0, 1]
    hits = await store.search("y", conversation_id=conversation_id)
    assert [h.kind for h in hits] == ["code"]
    await store.finish_turn(turn_id, TurnOutcome("done", answer="a", usage=Usage(100, 20, 0.5)))


async def test_a_block_unit_is_atomic(store: Store, db_path: Path) -> None:
    _, _, iteration_id = await start(store)
    await store.record_reply(iteration_id, ReplyWrite(raw_reply="r", planned_blocks=("x = 1",)))
    with pytest.raises(StoreError, match="names block 5"):
        await store.record_block(iteration_id, block(0), [version("x", 1, 5)])
    assert count(db_path, "block") == 0 and count(db_path, "var_version") == 0


async def test_units_of_an_iteration_no_longer_running_are_refused(
    open_store: Callable[[], Opener[Store]],
) -> None:
    async with open_store() as store:
        _, turn_id, iteration_id = await start(store)
        await store.finish_turn(turn_id, TurnOutcome("cancelled"))
        with pytest.raises(Busy):
            await store.record_reply(iteration_id, ReplyWrite(raw_reply="late"))
        with pytest.raises(Busy):
            await store.record_block(iteration_id, block(0))


async def test_a_failed_turn_reports_what_its_iterations_recorded(store: Store) -> None:
    _, turn_id, iteration_id = await start(store)
    await store.record_reply(iteration_id, ReplyWrite(raw_reply="r", usage=Usage(300, 40, 0.25)))
    sub = SubqueryWrite(
        position=0, block_position=0, prompt="p", reply="q", model="m", usage=Usage(10, 5, 0.01),
    )  # fmt: skip
    await store.record_block(iteration_id, block(0), subqueries=[sub])
    record = await store.finish_turn(
        turn_id, TurnOutcome("failed", error="the model endpoint went away")
    )
    assert (record.usage.tokens_in, record.usage.tokens_out) == (310, 45)
    assert record.usage.cost_usd == pytest.approx(0.26)


async def test_crash_recovery_sums_the_recorded_usage(
    open_store: Callable[[], Opener[Store]],
) -> None:
    async with open_store() as store:
        conversation_id, turn_id, iteration_id = await start(store)
        await store.record_reply(iteration_id, ReplyWrite(raw_reply="r", usage=Usage(70, 7, 0.07)))
        await store.finish_iteration(
            iteration_id,
            IterationWrite(status="ok"),
        )
        second = await store.start_iteration(
            turn_id, 1, system_prompt=SYSTEM_PROMPT, request_message="r", context_message="c"
        )
        await store.record_reply(
            second,
            ReplyWrite(raw_reply="r2", usage=Usage(30, 3, 0.03),
                       planned_blocks=("a = 1", "b = 2")),
        )  # fmt: skip
        await store.record_block(second, block(0, "a = 1"))
    # The process "died": its turn is still running. Reopening recovers it.
    async with open_store() as store:
        turn = await store.get_turn(turn_id)
        assert turn.status == "interrupted"
        assert (turn.usage.tokens_in, turn.usage.tokens_out) == (100, 10)
        assert turn.usage.cost_usd == pytest.approx(0.10)
        [_, cut] = (await store.transcript(conversation_id)).turns[0].iterations
        assert cut.status == "interrupted" and cut.running_block == 1
        # Recovery indexes the blocks the dead process recorded but never closed.
        hits = await store.search("a", conversation_id=conversation_id)
        assert [h.kind for h in hits] == ["code"]


async def test_a_unit_waits_for_a_write_lock_held_elsewhere_instead_of_failing(
    store: Store, db_path: Path
) -> None:
    conversation_id, _, iteration_id = await start(store)
    other = sqlite3.connect(db_path, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")  # another process is writing
        task = asyncio.create_task(
            store.record_reply(iteration_id, ReplyWrite(raw_reply="late but kept"))
        )
        await asyncio.sleep(0)  # let it try: the lock is taken, so it must be waiting, not done
        assert not task.done()
        other.execute("COMMIT")
        await task
    finally:
        other.close()
    [it] = (await store.transcript(conversation_id)).turns[0].iterations
    assert it.raw_reply == "late but kept"
