"""Replay re-executes the recorded replies and reports every divergence."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from cove.config import Settings
from cove.conversation import Conversations, scripted_factory
from cove.events import BlockStarted, ReplayFinished, ReplayTurnChecked
from cove.persistence.postgres.url import is_postgres
from tests.backends import database_for

pytestmark = pytest.mark.slow  # sandbox workers started per test

TURN_ONE = [
    {
        "thinking": "random numbers and a function",
        "code": [
            "import random\nrolls = [random.randint(1, 100) for _ in range(5)]",
            "def spread(xs):\n    return max(xs) - min(xs)",
            "import datetime\nstamp = str(datetime.datetime.now())\nspread(rolls)",
        ],
    },
    {"thinking": "an error the model recovers from", "code": ["rolls[99]"]},
    {
        "thinking": "ask a sub-query",
        "code": ['verdict = llm_query("Is " + str(spread(rolls)) + " a big spread?")'],
        "answer": "{{rolls}} spread {{verdict}}",
    },
]
TURN_TWO = [
    {
        "thinking": "more randomness",
        "code": ["import uuid\nkey = str(uuid.uuid4())\nrolls.append(random.random())"],
        "answer": "{{key}}",
    }
]


async def record(tmp_path: Path) -> tuple[Settings, str]:
    settings = Settings.load(
        env={}, data_dir=tmp_path, db_path=database_for(tmp_path, ""), sandbox_libraries=False
    ).replace(worker_pool_size=1)
    factory = scripted_factory(
        [json.dumps(r) for r in TURN_ONE + TURN_TWO], subquery_replies=["Yes, quite big."]
    )
    async with await Conversations.open(settings, llm_factory=factory) as convs:
        conv = await convs.create()
        async for _ in convs.send(conv.id, "roll"):
            pass
        async for _ in convs.send(conv.id, "again"):
            pass
    return settings, conv.id


async def alter(settings: Settings, statement: str) -> None:
    """Change the record behind cove's back, on either backend."""
    database = settings.store.database
    if is_postgres(database):
        conn = await asyncpg.connect(database)
        try:
            await conn.execute(statement)
        finally:
            await conn.close()
        return
    with closing(sqlite3.connect(database)) as db, db:
        db.execute(statement)


async def replay(settings: Settings, conversation_id: str) -> list[Any]:
    async with await Conversations.open(settings, llm_factory=scripted_factory([])) as convs:
        return [event async for event in convs.replay(conversation_id)]


async def test_faithful_replay_matches_every_block(tmp_path: Path) -> None:
    settings, cid = await record(tmp_path)
    events = await replay(settings, cid)
    turns = [e for e in events if isinstance(e, ReplayTurnChecked)]
    assert [t.mismatches for t in turns] == [(), ()]
    assert [t.blocks for t in turns] == [5, 1]
    done = events[-1]
    assert isinstance(done, ReplayFinished) and done.ok and done.mismatches == 0


async def test_an_altered_record_is_reported_as_a_divergence(tmp_path: Path) -> None:
    settings, cid = await record(tmp_path)
    await alter(
        settings, "UPDATE block SET result_preview = '999' WHERE code LIKE '%spread(rolls)'"
    )
    events = await replay(settings, cid)
    done = events[-1]
    assert isinstance(done, ReplayFinished) and not done.ok
    first = next(e for e in events if isinstance(e, ReplayTurnChecked))
    assert any("result_preview" in m and "999" in m for m in first.mismatches)


async def test_a_turn_cancelled_mid_block_replays_as_cancelled_and_the_next_turn_matches(
    tmp_path: Path,
) -> None:
    settings = Settings.load(
        env={}, data_dir=tmp_path, db_path=database_for(tmp_path, ""), sandbox_libraries=False
    ).replace(worker_pool_size=1, block_timeout_s=60, block_timeout_max_s=60)
    factory = scripted_factory(
        [
            json.dumps({"thinking": "t", "code": ["base = 20"], "answer": "{{base}}"}),
            json.dumps({"thinking": "t", "code": ["base += 1", "while True:\n    pass"]}),
            json.dumps({"thinking": "t", "code": ["base * 2"], "answer": "{{base}}"}),
        ]
    )
    async with await Conversations.open(settings, llm_factory=factory) as convs:
        conv = await convs.create()
        await convs.send(conv.id, "one").finished()
        spinning = convs.send(conv.id, "spin")
        async for event in spinning:
            if isinstance(event, BlockStarted) and event.index == 2:
                assert await convs.cancel(conv.id)
        await convs.send(conv.id, "three").finished()
        statuses = [t.status for t in (await convs.inspect(conv.id)).turns]
    assert statuses == ["done", "cancelled", "done"]
    events = await replay(settings, conv.id)
    turns = [e for e in events if isinstance(e, ReplayTurnChecked)]
    assert [(t.recorded_status, t.replayed_status) for t in turns] == [
        ("done", "done"),
        ("cancelled", "cancelled"),
        ("done", "done"),
    ]
    assert [t.mismatches for t in turns] == [(), (), ()]
    assert [t.blocks for t in turns] == [1, 2, 1] and turns[1].matched == 2
    assert isinstance(events[-1], ReplayFinished) and events[-1].ok


async def test_a_turn_whose_model_failed_replays_as_failed(tmp_path: Path) -> None:
    settings = Settings.load(
        env={}, data_dir=tmp_path, db_path=database_for(tmp_path, ""), sandbox_libraries=False
    ).replace(worker_pool_size=1)
    factory = scripted_factory([json.dumps({"thinking": "t", "code": ["x = 1"]})])
    async with await Conversations.open(settings, llm_factory=factory) as convs:
        conv = await convs.create()
        finished = await convs.send(conv.id, "the model fails at iteration 2").finished()
    assert (finished.status, finished.iterations) == ("failed", 2)
    [turn] = [e for e in await replay(settings, conv.id) if isinstance(e, ReplayTurnChecked)]
    assert (turn.recorded_status, turn.replayed_status) == ("failed", "failed")


async def test_a_replay_matches_chunked_values_also_once_thinned(tmp_path: Path) -> None:
    settings = Settings.load(
        env={}, data_dir=tmp_path, db_path=database_for(tmp_path, ""), sandbox_libraries=False
    ).replace(worker_pool_size=1, history_budget_mb=1)
    replies = [
        {"code": [f"big = list(range({k}, {k} + 300_000))", "big[7] = -7\nbig.append(1)"]}
        for k in range(3)
    ]
    replies = [{**reply, "answer": "done"} for reply in replies]
    factory = scripted_factory([json.dumps(r) for r in replies])
    async with await Conversations.open(settings, llm_factory=factory) as convs:
        conv = await convs.create()
        for _ in replies:
            async for _ in convs.send(conv.id, "grow"):
                pass
        figures = await convs.history(conv.id)
    assert figures.thinned > 0  # the budget (1 MB) thinned the oldest of 6 versions of 2 MB
    events = await replay(settings, conv.id)
    turns = [e for e in events if isinstance(e, ReplayTurnChecked)]
    assert [t.mismatches for t in turns] == [(), (), ()]
    done = events[-1]
    assert isinstance(done, ReplayFinished) and done.ok
