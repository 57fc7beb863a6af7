"""Turns of one conversation taken in turn by two processes: the live sandbox one process keeps
is refreshed when the other ran turns since, so each turn sees the values the last one left and
every variable version is numbered once."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from cove.conversation import Conversations, scripted_factory
from cove.events import TurnFinished
from tests.conversation.watch.test_watch_processes import env_for, local_settings, start_run
from tests.fakes.openai_server import FakeOpenAI
from tests.scripted import reply

pytestmark = pytest.mark.slow  # sandbox workers started per test


@pytest.fixture
async def server() -> AsyncIterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


async def finished(convs: Conversations, cid: str, text: str) -> TurnFinished:
    events = [event async for event in convs.send(cid, text)]
    last = events[-1]
    assert isinstance(last, TurnFinished)
    return last


async def test_a_turn_after_another_process_ran_one_starts_from_its_values(
    tmp_path: Path, server: FakeOpenAI
) -> None:
    here = [reply(["n = 1"], "{{n}}"), reply(["n = n * 10"], "{{n}}")]
    server.add_replies(reply(["n = n + 1"], "{{n}}"))  # the other process's turn
    async with Conversations.open(
        local_settings(tmp_path), llm_factory=scripted_factory(here)
    ) as convs:
        conv = await convs.create()
        first = await finished(convs, conv.id, "one here")
        assert (first.status, first.answer) == ("done", "1")  # this process keeps n live

        process = await start_run(env_for(tmp_path, server), conv.id, "one there")
        out, err = await asyncio.wait_for(process.communicate(), 120)
        assert process.returncode == 0, err.decode()
        assert out.decode().strip() == "2"

        last = await finished(convs, conv.id, "one here again")
        versions = await convs._store.var_history(conv.id, "n")
    assert (last.status, last.answer) == ("done", "20"), last.error
    assert [(v.version, v.preview) for v in versions] == [(1, "1"), (2, "2"), (3, "20")]
