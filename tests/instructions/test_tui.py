"""The TUI's palette sets the shown conversation's instructions and model (Textual Pilot, the
real ``openai`` client against the fake endpoint)."""

from __future__ import annotations

import json

import pytest
from textual.widgets import Input

from cove.channels.tui import CoveApp
from cove.channels.tui.screens.dialogs import AskText
from cove.channels.tui.widgets.prompt import PromptArea
from cove.config import Settings
from cove.conversation import Conversations
from tests.channels.tui.helpers import SIZE, last_turn_done, until
from tests.channels.tui.test_panels import palette
from tests.fakes.openai_server import FakeOpenAI

pytestmark = pytest.mark.slow  # an app driving a real turn in a sandbox worker
ONE_BACKEND = True  # the store's backends are covered by test_instructions.py

REPLY = json.dumps({"thinking": "t", "answer": "done"})


async def answer_dialog(pilot: object, app: CoveApp, text: str) -> None:
    from textual.pilot import Pilot

    assert isinstance(pilot, Pilot)
    await until(pilot, lambda: isinstance(app.screen, AskText), "the question")
    app.screen.query_one(Input).value = text
    await pilot.press("enter")


async def test_the_palette_sets_instructions_and_model_and_shows_a_refusal(
    fake_openai: FakeOpenAI, openai_settings: Settings
) -> None:
    fake_openai.listed = ["fake-model", "big-model"]
    fake_openai.add_replies(REPLY)
    async with await Conversations.open(openai_settings) as convs:
        conv = await convs.create(channel="tui", title="settings")
        await convs.set_profile(conv.id, model="big-model")
        app = CoveApp(convs, conv.id)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: app.current == conv.id, "the conversation")
            # The conversation's own model is what the status line shows.
            await until(pilot, lambda: app.status.model == "big-model", "its model")
            await palette(pilot, app, "Instructions")
            await answer_dialog(pilot, app, "x" * 4001)
            await until(pilot, lambda: any("4,001" in n for n in app.notices), "the refusal")
            await palette(pilot, app, "Instructions")
            await answer_dialog(pilot, app, "Reply in Latin.")
            await until(pilot, lambda: "instructions set" in app.notices, "the instructions")
            await palette(pilot, app, "Switch model")
            await answer_dialog(pilot, app, "nope")
            await until(pilot, lambda: any("does not offer" in n for n in app.notices), "refusal")
            assert app.model == "big-model"
            await palette(pilot, app, "Switch model")
            await answer_dialog(pilot, app, "default")  # back to the configured model
            await until(pilot, lambda: app.status.model == "fake-model", "the configured model")
            app.query_one(PromptArea).text = "salve"
            await pilot.press("enter")
            await until(pilot, lambda: last_turn_done(app), "the turn")
        profile = await convs.profile(conv.id)
    (request,) = fake_openai.requests
    assert request["model"] == "fake-model"
    assert "Reply in Latin." in request["messages"][0]["content"]
    assert (profile.instructions, profile.model) == ("Reply in Latin.", None)
