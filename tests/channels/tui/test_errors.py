"""Errors become notifications and the app keeps running: a busy conversation, a dead endpoint,
no endpoint at all, an unknown conversation."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from cove.channels.tui import CoveApp
from cove.channels.tui.widgets.prompt import PromptArea
from cove.conversation import Conversations, scripted_factory
from cove.events import TurnStarted
from tests.channels.tui.helpers import SIZE, last_turn_done, turns, until
from tests.conftest import FAKE_API_KEY
from tests.scripted import reply, settings_for


def dead_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port  # closed again: nothing listens there


@pytest.mark.slow
async def test_a_busy_conversation_is_a_notification(tmp_path: Path) -> None:
    # The other process's turn spins until it is cancelled (its block's limit is far beyond the
    # test, however loaded the machine): the send below meets it running.
    settings = settings_for(tmp_path, block_timeout_s=900, block_timeout_max_s=900)
    spin = scripted_factory([reply(["while True:\n    pass"])])
    async with (
        await Conversations.open(settings, llm_factory=spin) as other,
        await Conversations.open(settings, llm_factory=scripted_factory([])) as convs,
    ):
        conv = await other.create(title="driven elsewhere")
        app = CoveApp(convs, conv.id)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: app._watching and app._watching[1].is_set(), "the watch")
            async with other.watch(conv.id) as stream:
                running = other.send(conv.id, "slow")
                async for event in stream:
                    if isinstance(event, TurnStarted):
                        break
            app.query_one(PromptArea).text = "intrude"
            await pilot.press("enter")
            await until(pilot, lambda: any("busy" in n for n in app.notices), "the busy notice")
            # the other process's turn shows here, and the app still works
            await until(pilot, lambda: turns(app) and turns(app)[-1].iterations, "the other turn")
            assert turns(app)[-1].request == "slow" and not turns(app)[-1].finished, (
                turns(app)[-1].status,
                [(t.status, t.request) for t in await other._store.turns(conv.id)],
                app.notices,
            )
            assert await other.cancel(conv.id)
            await running.finished()
            await until(pilot, lambda: last_turn_done(app), "the other turn to end")
            assert turns(app)[-1].status == "cancelled"
            await pilot.press("ctrl+n")
            await until(pilot, lambda: len(app.sidebar.entries) == 2, "a new conversation")
            assert app.is_running


async def test_a_dead_endpoint_is_a_notification(tmp_path: Path) -> None:
    settings = settings_for(tmp_path).replace(
        base_url=f"http://127.0.0.1:{dead_port()}/v1",
        api_key=FAKE_API_KEY,
        model="fake-model",
        request_timeout_s=2.0,
        max_retries=0,
        retry_base_delay_s=0.01,
    )
    async with await Conversations.open(settings) as convs:
        app = CoveApp(convs)
        async with app.run_test(size=SIZE) as pilot:
            app.query_one(PromptArea).text = "hello"
            await pilot.press("enter")
            await until(pilot, lambda: any("failed" in n for n in app.notices), "the notice")
            notice = next(n for n in app.notices if "failed" in n)
            assert "endpoint" in notice and FAKE_API_KEY not in notice
            assert app.status.endpoint == "endpoint: failing"
            await until(pilot, lambda: last_turn_done(app), "the failed turn")
            assert turns(app)[-1].status == "failed"
            assert app.is_running


async def test_no_endpoint_and_an_unknown_id_are_notifications(tmp_path: Path) -> None:
    async with await Conversations.open(settings_for(tmp_path)) as convs:
        app = CoveApp(convs, "nosuchconversation")
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: len(app.notices) >= 2, "the notices")
            assert any("no model endpoint is configured" in n for n in app.notices)
            assert any("nosuchconversation" in n for n in app.notices)
            assert app.status.endpoint == "endpoint: none"
            # the list still follows changes after the bad id
            await convs.create(title="made elsewhere")
            await until(pilot, lambda: len(app.sidebar.entries) == 1, "the list change")
            await pilot.press("ctrl+n")
            await until(pilot, lambda: len(app.sidebar.entries) == 2, "a new conversation")
            app.query_one(PromptArea).text = "hello"
            await pilot.press("enter")
            await until(pilot, lambda: len(app.notices) >= 3, "the send notice")
            assert "no model endpoint is configured" in app.notices[-1]
            assert app.is_running


async def test_a_database_problem_is_a_notification(tmp_path: Path) -> None:
    settings = settings_for(tmp_path)
    async with await Conversations.open(settings, llm_factory=scripted_factory([])) as convs:
        conv = await convs.create(title="kept")
    # Opened for reading only: browsing works, every write is refused by the database layer.
    async with await Conversations.open(
        settings, llm_factory=scripted_factory([]), read_only=True
    ) as convs:
        app = CoveApp(convs, conv.id)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: app.current == conv.id, "the conversation")
            await pilot.press("ctrl+n")
            await until(pilot, lambda: app.notices, "the notice")
            assert "database problem" in app.notices[-1], app.notices
            assert app.is_running and app.current == conv.id
