"""Esc in the TUI stops a turn that a ``cove run -c`` process runs (Pilot, a real subprocess)."""

from __future__ import annotations

import asyncio
import os
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cove.channels.tui import CoveApp
from cove.conversation import Conversations, scripted_factory
from tests.channels.tui.helpers import SIZE, last_turn_done, turns, until
from tests.fakes.openai_server import FakeOpenAI
from tests.scripted import reply, settings_for

pytestmark = pytest.mark.slow  # an app driving real turns in sandbox workers


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


def held(text: str, gate: threading.Event, reached: threading.Event) -> Any:
    def answer(body: Any) -> str:
        reached.set()
        gate.wait(60)
        return text

    return answer


async def test_escape_stops_a_turn_that_another_process_runs(
    tmp_path: Path, fake: FakeOpenAI
) -> None:
    gate, reached = threading.Event(), threading.Event()
    fake.add_replies(reply(["a = 1"], thinking="first"), held(reply([], "never"), gate, reached))
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path),
        "COVE_DATA_DIR": str(tmp_path),
        "COVE_SANDBOX_LIBRARIES": "0",
        "OPENAI_BASE_URL": fake.base_url,
        "OPENAI_API_KEY": "sk-fake-tui-elsewhere",
        "COVE_MODEL": "fake-model",
        "COVE_REQUEST_TIMEOUT_S": "60",
        "COVE_WORKER_POOL_SIZE": "1",
    }
    settings = settings_for(tmp_path)
    async with await Conversations.open(settings, llm_factory=scripted_factory([])) as convs:
        conv = await convs.create(title="run elsewhere")
        app = CoveApp(convs, conv.id)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: app.current == conv.id, "the conversation")
            process = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "cove", "run", "-c", conv.id, "a long turn",
                env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            )  # fmt: skip
            try:
                await until(pilot, reached.is_set, "the other process at the model")
                await until(
                    pilot, lambda: turns(app) and 2 in turns(app)[-1].iterations, "its turn"
                )
                await pilot.press("escape")
                await until(pilot, lambda: last_turn_done(app), "the cancelled turn")
                assert turns(app)[-1].status == "cancelled"
                assert "cancelling the running turn" in app.notices
            finally:
                gate.set()
                try:
                    await asyncio.wait_for(process.communicate(), 60)
                finally:
                    if process.returncode is None:
                        process.kill()
                        await process.communicate()
    assert process.returncode == 5
