"""Variables panel, version diff, the inspector, and palette commands (fork, replay, export)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from textual.widgets import Input, Markdown, OptionList, Static

from cove.channels.tui import CoveApp
from cove.channels.tui.screens.dialogs import AskText
from cove.channels.tui.screens.inspector import InspectorScreen
from cove.channels.tui.screens.text import TextScreen
from cove.channels.tui.screens.variable import VariableScreen
from cove.channels.tui.widgets.prompt import PromptArea
from cove.channels.tui.widgets.variables import VariablesPanel
from cove.config import Settings
from cove.conversation import Conversations, scripted_factory
from tests.channels.tui.helpers import SIZE, last_turn_done, turns, type_text, until
from tests.fakes.openai_server import FakeOpenAI
from tests.scripted import settings_for

pytestmark = pytest.mark.slow  # an app driving real turns in sandbox workers

REPLIES = [
    json.dumps({"thinking": "t", "code": ["total = 1"], "answer": "{{total}}"}),
    json.dumps({"thinking": "t", "code": ["total = total + 41"], "answer": "{{total}}"}),
]


async def two_turns(convs: Conversations) -> str:
    conv = await convs.create(channel="tui", title="totals")
    for text in ("start", "add"):
        await convs.send(conv.id, text).finished()
    return conv.id


async def test_variables_panel_versions_and_diff(tmp_path: Path) -> None:
    factory = scripted_factory(REPLIES)
    async with await Conversations.open(settings_for(tmp_path), llm_factory=factory) as convs:
        cid = await two_turns(convs)
        app = CoveApp(convs, cid)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: last_turn_done(app, 2), "the transcript")
            await pilot.press("f3")
            panel = app.query_one(VariablesPanel)
            await until(pilot, lambda: "total" in panel.rows, "the variables")
            assert panel.rows["total"][0] == 2
            panel.query_one(OptionList).focus()
            await pilot.press("enter")
            await until(pilot, lambda: isinstance(app.screen, VariableScreen), "the versions")
            screen = app.screen
            assert isinstance(screen, VariableScreen)
            assert [v.version for v in screen.versions] == [1, 2]
            assert "\n-1\n+42" in screen.diff_text
            # Enter picks side A, then side B: v2 against itself shows no change
            await pilot.press("down", "enter", "enter")
            assert screen.diff_text == "(the two versions look the same)"
            await pilot.press("escape")
            await pilot.press("f3")
            assert panel.has_class("hidden")


async def test_inspector_shows_the_stored_prompt(tmp_path: Path) -> None:
    factory = scripted_factory(REPLIES)
    async with await Conversations.open(settings_for(tmp_path), llm_factory=factory) as convs:
        cid = await two_turns(convs)
        stored = (await convs.inspect(cid)).turns[1].iterations[0]
        system = await convs.system_prompt(stored.system_prompt_hash)
        app = CoveApp(convs, cid)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: last_turn_done(app, 2), "the transcript")
            turns(app)[1].iterations[1].focus()
            await pilot.press("i")
            await until(pilot, lambda: isinstance(app.screen, InspectorScreen), "the inspector")
            head = str(app.screen.query_one(".inspector-head", Static).content)
            tokens = f"tokens {stored.usage.tokens_in:,} in / {stored.usage.tokens_out:,} out"
            assert tokens in head and "cost unknown" in head  # "scripted" has no price
            bodies = [str(s.content) for s in app.screen.query(Static).filter(".inspector-body")]
            assert bodies == [
                system,
                stored.request_message,
                stored.context_message,
                stored.raw_reply,
            ]
            await pilot.press("escape")
            assert not isinstance(app.screen, InspectorScreen)


async def palette(pilot: object, app: CoveApp, command: str) -> None:
    from textual.pilot import Pilot

    assert isinstance(pilot, Pilot)
    await pilot.press("ctrl+p")
    await until(pilot, lambda: app.screen.id == "--command-palette", "the palette")
    await type_text(pilot, command)
    await pilot.pause(0.3)  # the palette searches in a worker; its first hit is highlighted
    await pilot.press("enter")


async def test_fork_replay_and_export_from_the_palette(tmp_path: Path) -> None:
    factory = scripted_factory(REPLIES)
    async with await Conversations.open(settings_for(tmp_path), llm_factory=factory) as convs:
        cid = await two_turns(convs)
        app = CoveApp(convs, cid, export_dir=tmp_path)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: last_turn_done(app, 2), "the transcript")

            await palette(pilot, app, "Replay conversation")
            await until(pilot, lambda: app.screen.id == "replay-report", "the replay report")
            assert isinstance(app.screen, TextScreen)

            def report() -> str:  # the report's text, once its Markdown is mounted and set
                found = app.screen.query(Markdown)
                return found.first().source if found else ""

            await until(pilot, report, "the report's text")
            assert "matches the record" in report()
            await pilot.press("escape")

            await palette(pilot, app, "Export Markdown")
            exported = tmp_path / f"cove-{cid[:12]}.md"
            await until(pilot, exported.exists, "the Markdown export")
            assert "# totals" in exported.read_text()
            await palette(pilot, app, "Export JSON")
            exported_json = tmp_path / f"cove-{cid[:12]}.json"
            await until(pilot, exported_json.exists, "the JSON export")
            assert len(json.loads(exported_json.read_text())["turns"]) == 2

            await palette(pilot, app, "Fork at turn")
            await until(pilot, lambda: isinstance(app.screen, AskText), "the turn question")
            for _ in range(3):
                await pilot.press("backspace")
            await type_text(pilot, "1")
            await pilot.press("enter")
            await until(pilot, lambda: app.current not in (None, cid), "the fork")
            assert app.current is not None
            fork = await convs.get(app.current)
            assert fork.parent_id == cid and fork.fork_turn == 1


async def test_switch_model_and_toggle_panels_from_the_palette(
    fake_openai: FakeOpenAI, openai_settings: Settings
) -> None:
    fake_openai.listed = ["fake-model", "other-model"]
    fake_openai.add_replies(REPLIES[0])
    async with await Conversations.open(openai_settings) as convs:
        conv = await convs.create(channel="tui", title="totals")
        app = CoveApp(convs, conv.id)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: app.current == conv.id, "the conversation")
            await palette(pilot, app, "Switch model")
            await until(pilot, lambda: isinstance(app.screen, AskText), "the model question")
            app.screen.query_one(Input).value = ""
            await type_text(pilot, "other-model")
            await pilot.press("enter")
            await until(pilot, lambda: app.model == "other-model", "the new model")
            assert app.status.model == "other-model" and "other-model" in str(app.status.content)
            assert "next turns use other-model" in app.notices
            app.query_one(PromptArea).text = "start"
            await pilot.press("enter")
            await until(pilot, lambda: last_turn_done(app), "the turn")
            assert fake_openai.requests[-1]["model"] == "other-model"  # what the endpoint got

            panel, sidebar = app.query_one(VariablesPanel), app.sidebar
            assert panel.has_class("hidden") and not sidebar.has_class("hidden")
            await palette(pilot, app, "Toggle variables panel")
            await until(pilot, lambda: not panel.has_class("hidden"), "the variables panel")
            await until(pilot, lambda: "total" in panel.rows, "its variables")
            await palette(pilot, app, "Toggle conversation list")
            await until(pilot, lambda: sidebar.has_class("hidden"), "the list to hide")
            assert not sidebar.display or sidebar.size.width == 0
            await palette(pilot, app, "Toggle conversation list")
            await until(pilot, lambda: not sidebar.has_class("hidden"), "the list again")
            await palette(pilot, app, "Toggle variables panel")
            await until(pilot, lambda: panel.has_class("hidden"), "the panel to hide")
