"""The conversation list: filter as you type, new, rename, delete, live changes."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import Input

from cove.channels.tui import CoveApp
from cove.channels.tui.screens.dialogs import AskText, Confirm
from cove.channels.tui.widgets.sidebar import ConversationOptions
from cove.conversation import Conversations, scripted_factory
from tests.channels.tui.helpers import SIZE, type_text, until
from tests.scripted import settings_for

pytestmark = pytest.mark.slow  # an app driving real turns in sandbox workers


async def test_filter_as_you_type(tmp_path: Path) -> None:
    async with await Conversations.open(
        settings_for(tmp_path), llm_factory=scripted_factory([])
    ) as convs:
        for title in ("groceries", "prime numbers", "primes again"):
            await convs.create(channel="tui", title=title)
        app = CoveApp(convs)
        async with app.run_test(size=SIZE) as pilot:
            options = app.query_one(ConversationOptions)
            await until(pilot, lambda: options.option_count == 3, "the list")
            app.query_one("#filter", Input).focus()
            await type_text(pilot, "prim")
            assert options.option_count == 2
            await type_text(pilot, "es")
            assert options.option_count == 1
            for _ in range(6):
                await pilot.press("backspace")
            assert options.option_count == 3


async def test_new_rename_delete_and_changes_from_elsewhere(tmp_path: Path) -> None:
    settings = settings_for(tmp_path)
    async with (
        await Conversations.open(settings, llm_factory=scripted_factory([])) as convs,
        await Conversations.open(settings, llm_factory=scripted_factory([])) as other,
    ):
        app = CoveApp(convs)
        async with app.run_test(size=SIZE) as pilot:
            sidebar = app.sidebar
            await pilot.press("ctrl+n")
            await until(pilot, lambda: len(sidebar.entries) == 1, "the new conversation")
            (cid,) = sidebar.entries
            assert app.current == cid

            await pilot.press("f2")
            await until(pilot, lambda: isinstance(app.screen, AskText), "the rename dialog")
            await type_text(pilot, "my notes")
            await pilot.press("enter")
            await until(pilot, lambda: sidebar.entries[cid].title == "my notes", "the new title")
            assert (await convs.get(cid)).title == "my notes"

            # created in another process: the list follows it
            elsewhere = await other.create(channel="cli", title="from elsewhere")
            await until(pilot, lambda: elsewhere.id in sidebar.entries, "the other conversation")

            app.query_one(ConversationOptions).focus()
            ids = [e.id for e in sidebar.shown_entries()]
            app.query_one(ConversationOptions).highlighted = ids.index(cid)
            await pilot.press("d")
            await until(pilot, lambda: isinstance(app.screen, Confirm), "the confirmation")
            await pilot.press("n")  # declined: nothing happens
            assert cid in sidebar.entries
            await pilot.press("d")
            await until(pilot, lambda: isinstance(app.screen, Confirm), "the confirmation")
            await pilot.press("y")
            await until(pilot, lambda: cid not in sidebar.entries, "the deletion")
            assert [c.id for c in await convs.list()] == [elsewhere.id]
            assert app.current == elsewhere.id
