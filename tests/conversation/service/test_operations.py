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
    readiness = Readiness(settings, cache_s=10, database_cache_s=1, clock=lambda: now[0])

    first = await readiness.check()
    assert first.ok, first.checks
    assert [c.name for c in first.checks] == ["database", "sandbox", "model endpoint"]

    fake_openai.stop()  # the endpoint goes away: the cached answer stands until it expires
    assert (await readiness.check()) is first
    now[0] = 2.0  # the database is checked again, the costly checks are not yet
    again = await readiness.check()
    assert again is not first and again.ok and again.checks[1:] == first.checks[1:]
    now[0] = 11.0
    later = await readiness.check()
    assert not later.ok
    assert later.failing == ("model endpoint",)


async def test_a_database_gone_is_noticed_within_the_database_cache(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    # A file on either backend's run: the PostgreSQL case is tests/nodes/test_readiness.py's.
    db = tmp_path / "node.db"
    settings = settings_for(
        tmp_path, db_path=str(db), base_url=fake_openai.base_url, api_key="sk-test"
    )
    async with await Conversations.open(settings) as convs:
        await convs.create()
    now = [0.0]
    readiness = Readiness(settings, cache_s=60, database_cache_s=1, clock=lambda: now[0])
    assert (await readiness.check()).ok

    db.unlink()
    db.mkdir()  # where the database was, a directory: nothing can be written there
    now[0] = 1.5
    report = await readiness.check()
    assert report.failing == ("database",)
    assert str(db) in report.checks[0].detail


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
