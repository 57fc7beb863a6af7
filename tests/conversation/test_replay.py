"""Replay re-executes the recorded replies and reports every divergence."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from cove.config import Settings
from cove.conversation import Conversations, scripted_factory
from cove.events import ReplayFinished, ReplayTurnChecked

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
    settings = Settings.load(env={}, data_dir=tmp_path).replace(worker_pool_size=1)
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
    with sqlite3.connect(settings.store.database) as db:
        db.execute("UPDATE block SET result_preview = '999' WHERE code LIKE '%spread(rolls)'")
    events = await replay(settings, cid)
    done = events[-1]
    assert isinstance(done, ReplayFinished) and not done.ok
    first = next(e for e in events if isinstance(e, ReplayTurnChecked))
    assert any("result_preview" in m and "999" in m for m in first.mismatches)


async def test_a_replay_matches_chunked_values_also_once_thinned(tmp_path: Path) -> None:
    settings = Settings.load(env={}, data_dir=tmp_path).replace(
        worker_pool_size=1, history_budget_mb=1
    )
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
