"""What the bot says, on the Bot API wire: unknown commands, the help text, long answers split
without a dangling lead-in, a conversation named by its first request, endpoint retries."""

from __future__ import annotations

import re
import threading
from typing import Any

import pytest

from cove.config import Settings
from tests.channels.telegram.conftest import ALLOWED, GROUP, BotFactory
from tests.fakes.openai_server import FakeOpenAI, Fault
from tests.fakes.telegram_server import BOT_USERNAME, FakeTelegram
from tests.scripted import reply


def has_text(tg: FakeTelegram, chat: int, fragment: str) -> bool:
    return any(fragment in text for text in tg.texts(chat))


async def test_an_unknown_command_is_answered_with_where_to_look(bot: BotFactory) -> None:
    async with bot([]) as b:
        tg = b.tg
        tg.send_text(ALLOWED, "/bogus")
        await tg.wait_for(lambda: has_text(tg, ALLOWED, "Unknown command"))
        [said] = tg.texts(ALLOWED)
        assert said == "Unknown command /bogus, see /help."
        # In a group, a command for another bot is not this bot's to answer.
        for text in ("/bogus@some_other_bot", "/bogus", f"/frob@{BOT_USERNAME}"):
            tg.send_text(GROUP, text, user_id=ALLOWED, chat_type="supergroup")
        await tg.wait_for(lambda: has_text(tg, GROUP, "Unknown command /frob"))
        assert tg.texts(GROUP) == ["Unknown command /frob, see /help."]
        assert await b.convs.list() == []  # no command became a message to the model


async def test_help_puts_each_commands_argument_after_its_name(bot: BotFactory) -> None:
    async with bot([]) as b:
        tg = b.tg
        tg.send_text(ALLOWED, "/help")
        await tg.wait_for(lambda: tg.texts(ALLOWED))
        [help_text] = tg.texts(ALLOWED)
        assert "/var NAME — every version of one variable" in help_text
        assert "/fork N — continue from turn N in a new conversation" in help_text
        assert "/title TEXT — rename this conversation" in help_text
        assert "/vars — the variables of this conversation" in help_text
        assert "— NAME" not in help_text and "— N:" not in help_text


async def test_a_long_answer_never_sends_a_lead_in_alone(bot: BotFactory) -> None:
    digits = "".join(str(i % 10) for i in range(6000))  # one word too long for a message
    async with bot([reply(["v = 1"], "The value is\n" + digits)]) as b:
        tg = b.tg
        tg.send_text(ALLOWED, "a big number")
        await tg.wait_for(lambda: has_text(tg, ALLOWED, "(2/2)"))
        sent = [t for t in tg.texts(ALLOWED) if not t.startswith(("⚙️", "✅"))]
        pieces = [re.sub(r"\n\n\(\d/\d\)$", "", t) for t in sent]
        assert len(pieces) == 2
        assert pieces[0].startswith("The value is\n0123456789")
        assert "".join(pieces).replace("The value is\n", "") == digits


async def test_status_names_the_conversation_by_its_first_request(bot: BotFactory) -> None:
    async with bot([reply(["s = sum(range(10))"], "{{s}}")]) as b:
        tg = b.tg
        tg.send_text(ALLOWED, "add up the numbers below ten for me")
        await tg.wait_for(lambda: has_text(tg, ALLOWED, "45"))
        tg.send_text(ALLOWED, "/status")
        await tg.wait_for(lambda: has_text(tg, ALLOWED, "Conversation"))
        [status] = [t for t in tg.texts(ALLOWED) if t.startswith("Conversation")]
        assert "title: add up the numbers below ten for me" in status
        assert "(none yet)" not in status and "last turn: done" in status


@pytest.mark.slow
async def test_the_status_message_says_when_the_endpoint_is_retried(
    bot: BotFactory, fake_openai: FakeOpenAI, openai_settings: Settings
) -> None:
    opened = threading.Event()

    def late(body: dict[str, Any]) -> str:
        opened.wait(30)
        return reply(answer="made it")

    fake_openai.add_faults(Fault.server_error(503))
    fake_openai.add_replies(late)
    async with bot(None, settings=openai_settings.replace(worker_pool_size=1)) as b:
        tg = b.tg
        tg.send_text(ALLOWED, "hello")
        await tg.wait_for(lambda: has_text(tg, ALLOWED, "retrying (1 of 2)"))
        [status] = [t for t in tg.texts(ALLOWED) if "retrying" in t]
        assert "▶ retrying (1 of 2): server error (HTTP 503)" in status
        opened.set()
        await tg.wait_for(lambda: has_text(tg, ALLOWED, "made it"))
