"""Readiness checks (cached) and the switch that stops a service from accepting turns."""

from __future__ import annotations

from pathlib import Path

import pytest

from cove.conversation import Conversations
from cove.conversation.service.operations import Readiness
from cove.errors import Busy
from tests.fakes.openai_server import FakeOpenAI
from tests.scripted import settings_for


async def test_readiness_checks_database_sandbox_and_endpoint_and_caches_the_answer(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    settings = settings_for(tmp_path, base_url=fake_openai.base_url, api_key="sk-test")
    async with await Conversations.open(settings) as convs:
        await convs.create()
    now = [0.0]
    readiness = Readiness(settings, cache_s=10, clock=lambda: now[0])

    first = await readiness.check()
    assert first.ok, first.checks
    assert [c.name for c in first.checks] == ["database", "sandbox", "model endpoint"]

    fake_openai.stop()  # the endpoint goes away: the cached answer stands until it expires
    assert (await readiness.check()) is first
    now[0] = 11.0
    later = await readiness.check()
    assert not later.ok
    assert [c.name for c in later.checks if not c.ok] == ["model endpoint"]


async def test_a_database_that_cannot_be_written_is_not_ready(tmp_path: Path) -> None:
    settings = settings_for(tmp_path, db_path=str(tmp_path / "notes.txt"))
    (tmp_path / "notes.txt").write_text("not a database")
    report = await Readiness(settings).check()
    database = report.checks[0]
    assert not report.ok and not database.ok and "not a cove database" in database.detail
    assert (tmp_path / "notes.txt").read_text() == "not a database"


async def test_a_layer_that_stopped_accepting_refuses_new_turns(tmp_path: Path) -> None:
    async with await Conversations.open(settings_for(tmp_path)) as convs:
        conv = await convs.create()
        convs.accepting = False
        with pytest.raises(Busy, match="shutting down"):
            convs.send(conv.id, "hello")
        assert await convs._store.turns(conv.id) == []
