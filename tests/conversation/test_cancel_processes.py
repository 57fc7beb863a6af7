"""Stopping a turn that another process runs: ``Conversations.cancel`` reaches the lease holder.

The turn runs in a real ``cove run -c`` process against the fake endpoint; the cancel comes from
this process's ``Conversations``, which learns the outcome through its watch stream.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import AsyncIterator
from contextlib import closing
from pathlib import Path

import asyncpg
import pytest

from cove.conversation import Conversations, scripted_factory
from cove.events import IterationStarted, ModelReply, TurnFinished
from cove.persistence.postgres.url import is_postgres
from tests.conversation.watch.test_watch_processes import (
    env_for,
    gated,
    local_settings,
    start_run,
    until,
)
from tests.fakes.openai_server import FakeOpenAI
from tests.scripted import reply

pytestmark = pytest.mark.slow  # sandbox workers started per test

#: A block that says it runs (a workspace file), then spins until it is stopped.
SPIN = reply(
    [{"code": "write_file('running', 'yes')\nwhile True:\n    pass", "timeout_s": 600}]  # type: ignore[list-item]
)


@pytest.fixture
async def server() -> AsyncIterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


async def cancel_requests(tmp_path: Path) -> list[tuple[object, ...]]:
    """The cancel requests stored in the test's database, of either backend."""
    database = local_settings(tmp_path).store.database
    if is_postgres(database):
        conn = await asyncpg.connect(database)
        try:
            return [tuple(row) for row in await conn.fetch("SELECT * FROM cancel_request")]
        finally:
            await conn.close()
    with closing(sqlite3.connect(database)) as db:
        return db.execute("SELECT * FROM cancel_request").fetchall()


async def test_a_turn_held_at_the_model_in_another_process_is_cancelled_from_here(
    tmp_path: Path, server: FakeOpenAI
) -> None:
    gate, reached = threading.Event(), threading.Event()
    server.add_replies(reply(["a = 1"]), gated(reply([], "never"), gate, reached))
    async with Conversations.open(
        local_settings(tmp_path), llm_factory=scripted_factory([])
    ) as convs:
        conv = await convs.create()
        async with convs.watch(conv.id) as stream:
            process = await start_run(env_for(tmp_path, server), conv.id, "hang at the model")
            try:
                await until(stream, lambda e: isinstance(e, IterationStarted) and e.iteration == 2)
                assert await asyncio.to_thread(reached.wait, 30)
                assert await convs.cancel(conv.id)  # asked of the process that runs it
                assert await convs.cancel(conv.id)  # asking twice is the same request
                rest = await asyncio.wait_for(
                    until(stream, lambda e: isinstance(e, TurnFinished)), 60
                )
                _, err = await asyncio.wait_for(process.communicate(), 60)
            finally:
                gate.set()
                if process.returncode is None:
                    process.kill()
                    await process.communicate()
        [turn] = await convs._store.turns(conv.id)
        transcript = await convs.inspect(conv.id)
    finished = rest[-1]
    assert isinstance(finished, TurnFinished) and finished.status == "cancelled"
    assert process.returncode == 5, err.decode()
    assert turn.status == "cancelled"
    assert [it.status for it in transcript.turns[0].iterations] == ["ok", "cancelled"]
    assert await cancel_requests(tmp_path) == []  # the holder cleared the request


async def test_a_running_block_in_another_process_is_killed_by_the_cancel(
    tmp_path: Path, server: FakeOpenAI
) -> None:
    server.add_replies(SPIN)
    env = env_for(tmp_path, server) | {"COVE_BLOCK_TIMEOUT_MAX_S": "600"}
    async with Conversations.open(
        local_settings(tmp_path), llm_factory=scripted_factory([])
    ) as convs:
        conv = await convs.create()
        async with convs.watch(conv.id) as stream:
            process = await start_run(env, conv.id, "spin")
            try:
                await until(stream, lambda e: isinstance(e, ModelReply))
                running = local_settings(tmp_path).store.workspaces / conv.id / "running"
                while not running.exists():  # noqa: ASYNC110 (another process writes it)
                    await asyncio.sleep(0.02)
                assert await convs.cancel(conv.id)
                rest = await asyncio.wait_for(
                    until(stream, lambda e: isinstance(e, TurnFinished)), 60
                )
                await asyncio.wait_for(process.communicate(), 60)
            finally:
                if process.returncode is None:
                    process.kill()
                    await process.communicate()
        transcript = await convs.inspect(conv.id)
    assert isinstance(rest[-1], TurnFinished) and rest[-1].status == "cancelled"
    assert process.returncode == 5
    [iteration] = transcript.turns[0].iterations
    assert iteration.status == "cancelled"
    [block] = iteration.blocks
    assert not block.ok and block.error and "stopped" in block.error


async def test_cancelling_when_nothing_runs_asks_nothing(tmp_path: Path) -> None:
    factory = scripted_factory([reply(["a = 1"], "one")])
    async with Conversations.open(local_settings(tmp_path), llm_factory=factory) as convs:
        conv = await convs.create()
        assert not await convs.cancel(conv.id)
        await (convs.send(conv.id, "one")).finished()
        assert not await convs.cancel(conv.id)
    assert await cancel_requests(tmp_path) == []
