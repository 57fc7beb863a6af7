"""Watching a conversation whose turn a separate ``cove run`` process drives."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from cove.config import Settings
from cove.conversation import Conversations, scripted_factory
from cove.events import (
    BlockFinished,
    BlockStarted,
    Event,
    IterationStarted,
    ModelReply,
    TurnFinished,
    TurnStarted,
    VarsChanged,
)
from tests.backends import database_for
from tests.conversation.watch.watch_helpers import durable
from tests.fakes.openai_server import FakeOpenAI
from tests.scripted import reply

pytestmark = pytest.mark.slow  # sandbox workers started per test

FAKE_KEY = "sk-watch-test-NEVER-PRINTED-555"


def gated(text: str, gate: threading.Event, reached: threading.Event) -> Callable[[Any], str]:
    """A fake-server reply that holds the model call until ``gate`` opens."""

    def answer(body: Any) -> str:
        reached.set()
        gate.wait(60)
        return text

    return answer


@pytest.fixture
async def server() -> AsyncIterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


def env_for(tmp_path: Path, server: FakeOpenAI) -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path),
        "COVE_DATA_DIR": str(tmp_path / "data"),
        "COVE_SANDBOX_LIBRARIES": "0",
        "COVE_DB": database_for(tmp_path, str(tmp_path / "cove.db")) or "",
        "OPENAI_BASE_URL": server.base_url,
        "OPENAI_API_KEY": FAKE_KEY,
        "COVE_MODEL": "fake-model",
        "COVE_MAX_RETRIES": "1",
        "COVE_REQUEST_TIMEOUT_S": "60",
        "COVE_WORKER_POOL_SIZE": "1",
    }


def local_settings(tmp_path: Path) -> Settings:
    return Settings.load(env={}, data_dir=tmp_path / "data", sandbox_libraries=False).replace(
        db_path=database_for(tmp_path, str(tmp_path / "cove.db")), worker_pool_size=1
    )


async def start_run(env: dict[str, str], cid: str, text: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "cove",
        "run",
        "-c",
        cid,
        text,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


async def until(stream: AsyncIterator[Event], done: Callable[[Event], bool]) -> list[Event]:
    events: list[Event] = []
    async for event in stream:
        events.append(event)
        if done(event):
            break
    return events


async def test_a_turn_run_by_another_process_arrives_in_order(
    tmp_path: Path, server: FakeOpenAI
) -> None:
    gate, reached = threading.Event(), threading.Event()
    server.add_replies(
        reply(["a = 6", "a * 7"], thinking="first"),
        gated(reply(["b = a * 7"], thinking="second"), gate, reached),
        reply([], "{{b}}", thinking="done"),
    )
    async with Conversations.open(
        local_settings(tmp_path), llm_factory=scripted_factory([])
    ) as convs:
        conv = await convs.create()
        async with convs.watch(conv.id) as stream:
            process = await start_run(env_for(tmp_path, server), conv.id, "count")
            try:
                # The other process is held at its second model call: iteration 1 is here.
                first = await until(stream, lambda e: isinstance(e, BlockFinished) and e.index == 2)
                assert reached.wait(30)
                gate.set()
                rest = await until(stream, lambda e: isinstance(e, TurnFinished))
            finally:
                gate.set()
                await process.communicate()
    events = first + rest
    assert process.returncode == 0
    seqs = [e.seq for e in events]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    assert all(e.conversation_id == conv.id for e in events)
    assert isinstance(events[0], TurnStarted) and events[0].request == "count"
    started = [e.iteration for e in events if isinstance(e, IterationStarted)]
    assert started == [1, 2, 3]
    replies = [e for e in events if isinstance(e, ModelReply)]
    assert [r.thinking for r in replies] == ["first", "second", "done"]
    assert replies[0].code == ("a = 6", "a * 7")
    blocks = [
        (e.iteration, e.index, e.block.result_preview)
        for e in events
        if isinstance(e, BlockFinished)
    ]
    assert blocks == [(1, 1, None), (1, 2, "42"), (2, 1, None)]
    changes = [[c.name for c in e.changes] for e in events if isinstance(e, VarsChanged)]
    assert changes == [["a"], ["b"]]
    finished = events[-1]
    assert isinstance(finished, TurnFinished)
    assert (finished.status, finished.answer, finished.iterations) == ("done", "42", 3)


async def test_killing_the_driving_process_ends_the_watch_with_interrupted(
    tmp_path: Path, server: FakeOpenAI
) -> None:
    gate, reached = threading.Event(), threading.Event()
    server.add_replies(
        reply(["a = 1"]),
        gated(reply([], "never"), gate, reached),
    )
    async with Conversations.open(
        local_settings(tmp_path), llm_factory=scripted_factory([])
    ) as convs:
        conv = await convs.create()
        async with convs.watch(conv.id) as stream:
            process = await start_run(env_for(tmp_path, server), conv.id, "hang")
            try:
                await until(stream, lambda e: isinstance(e, IterationStarted) and e.iteration == 2)
                assert reached.wait(30)
                process.send_signal(signal.SIGKILL)
                await process.communicate()  # reaped (its pid is gone) and its pipes closed
                rest = await asyncio.wait_for(
                    until(stream, lambda e: isinstance(e, TurnFinished)), 60
                )
            finally:
                gate.set()
                if process.returncode is None:
                    process.kill()
                    await process.communicate()
        turns = await convs._store.turns(conv.id)
    finished = rest[-1]
    assert isinstance(finished, TurnFinished) and finished.status == "interrupted"
    assert turns[-1].status == "interrupted"


async def test_cove_watch_prints_a_turn_run_elsewhere_as_json_lines(tmp_path: Path) -> None:
    settings = local_settings(tmp_path)
    factory = scripted_factory([reply(["x = 2"], "first"), reply(["y = x + 1"], "{{y}}")])
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path),
        "COVE_DATA_DIR": str(tmp_path / "data"),
        "COVE_SANDBOX_LIBRARIES": "0",
        "COVE_DB": database_for(tmp_path, str(tmp_path / "cove.db")) or "",
    }
    async with Conversations.open(settings, llm_factory=factory) as convs:
        conv = await convs.create()
        earlier = [e async for e in convs.send(conv.id, "one")]
        watcher = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "cove", "watch", conv.id[:12], "--events", "--once",
            env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        assert watcher.stderr is not None
        banner = await asyncio.wait_for(watcher.stderr.readline(), 60)
        assert b"watching" in banner  # attached: what comes next is followed live
        live = [e async for e in convs.send(conv.id, "two")]
        out, err = await asyncio.wait_for(watcher.communicate(), 60)
    assert watcher.returncode == 0, err.decode()
    printed = [json.loads(text) for text in out.decode().splitlines()]
    expected = [e.to_json() for e in durable(live)]
    # The command names a turn by its position in the conversation, never by its row id.
    positions = {e.turn_id: e.position for e in live if isinstance(e, TurnStarted)}
    for item in expected:
        if "turn_id" in item:
            item["turn"] = positions.get(item.pop("turn_id"))
    for item in printed + expected:
        if item["type"] == "turn_finished":
            item["duration_ms"] = 0
    assert printed == expected
    # And --after replays from the store with the numbers the live stream had.
    after = earlier[-1].seq
    replay = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "cove", "watch", conv.id, "--events", "--after", "0", "--once",
        env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, _ = await asyncio.wait_for(replay.communicate(), 60)
    seqs = [json.loads(text)["seq"] for text in out.decode().splitlines()]
    assert seqs == [e.seq for e in durable(earlier)] and seqs[-1] == after


async def test_a_block_running_in_another_process_shows_its_code_when_it_starts(
    tmp_path: Path, server: FakeOpenAI
) -> None:
    spin = "while True:\n    pass"
    server.add_replies(reply(["a = 1", {"code": spin, "timeout_s": 60}]))  # type: ignore[list-item]
    async with Conversations.open(
        local_settings(tmp_path), llm_factory=scripted_factory([])
    ) as convs:
        conv = await convs.create()
        async with convs.watch(conv.id) as stream:
            process = await start_run(env_for(tmp_path, server), conv.id, "spin")
            try:
                seen = await asyncio.wait_for(
                    until(stream, lambda e: isinstance(e, BlockStarted) and e.index == 2), 60
                )
            finally:
                process.send_signal(signal.SIGKILL)
                await process.communicate()
    started = seen[-1]
    assert isinstance(started, BlockStarted) and started.code == spin
    assert not any(isinstance(e, BlockFinished) and e.index == 2 for e in seen)
    assert [type(e).__name__ for e in seen if getattr(e, "index", 0) == 1] == [
        "BlockStarted",
        "BlockFinished",
    ]
