"""/instructions and /model in Telegram: the real bot on the fake Bot API, the real ``openai``
client against the fake endpoint."""

from __future__ import annotations

from pathlib import Path

import pytest

from cove.config import Settings
from tests.channels.telegram.conftest import ALLOWED, BotFactory, bot, tg  # noqa: F401
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_server import FakeTelegram
from tests.scripted import reply, settings_for

pytestmark = pytest.mark.slow
ONE_BACKEND = True  # the bot's own tests cover both backends; this one is about the commands


def has_text(server: FakeTelegram, fragment: str) -> bool:
    return any(fragment in text for text in server.texts(ALLOWED))


async def test_instructions_and_model_are_shown_set_and_refused_in_the_chat(
    bot: BotFactory,  # noqa: F811
    fake_openai: FakeOpenAI,
    openai_settings: Settings,
    tmp_path: Path,
) -> None:
    fake_openai.listed = ["fake-model", "big-model"]
    fake_openai.add_replies(reply([], "short answer"))
    settings = settings_for(
        tmp_path,
        base_url=fake_openai.base_url,
        api_key="sk-test",
        model="fake-model",
        max_retries=0,
    )
    async with bot(None, settings=settings) as b:
        t = b.tg
        t.send_text(ALLOWED, "/instructions")
        await t.wait_for(lambda: has_text(t, "No instructions"))
        t.send_text(ALLOWED, "/instructions Be brief & polite.")
        await t.wait_for(lambda: has_text(t, "Instructions set for the next turns"))
        t.send_text(ALLOWED, "/instructions " + "x" * 4001)
        await t.wait_for(lambda: has_text(t, "⚠️ the instructions are 4,001 characters long"))
        t.send_text(ALLOWED, "/instructions")
        await t.wait_for(lambda: has_text(t, "Be brief & polite."))
        t.send_text(ALLOWED, "/model")
        await t.wait_for(lambda: has_text(t, "The endpoint offers:"))
        t.send_text(ALLOWED, "/model nope")
        await t.wait_for(lambda: has_text(t, "⚠️ the endpoint does not offer the model 'nope'"))
        t.send_text(ALLOWED, "/model big-model")
        await t.wait_for(lambda: has_text(t, "for the next turns."))
        t.send_text(ALLOWED, "hello")
        await t.wait_for(lambda: has_text(t, "short answer"))
        t.send_text(ALLOWED, "/status")
        await t.wait_for(lambda: has_text(t, "model: big-model"))
        t.send_text(ALLOWED, "/instructions clear")
        await t.wait_for(lambda: has_text(t, "Instructions cleared."))
        fake_openai.models_status = 500
        t.send_text(ALLOWED, "/model")
        await t.wait_for(lambda: has_text(t, "⚠️") and has_text(t, "500"))
        profile = await b.convs.profile((await b.convs.list())[0].id)
    listing = next(text for text in t.texts(ALLOWED) if "The endpoint offers:" in text)
    assert "big-model" in listing and "fake-model" in listing
    (request,) = fake_openai.requests
    assert request["model"] == "big-model"
    assert "Be brief & polite." in request["messages"][0]["content"]
    assert (profile.instructions, profile.model) == (None, "big-model")
