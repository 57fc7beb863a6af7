"""Flood control: python-telegram-bot's rate limiter waits out a 429 and sends again.

The fake answers the chosen calls with ``429 Too Many Requests`` and a ``retry_after``; the
bot's limiter, not the code that made the call, waits and repeats it.
"""

from __future__ import annotations

import asyncio

from tests.channels.telegram.conftest import ALLOWED, OTHER, BotFactory
from tests.fakes.telegram_server import FakeTelegram


async def test_a_bot_api_call_is_sent_again_after_each_flood_wait(
    bot: BotFactory, tg: FakeTelegram
) -> None:
    floods: list[str] = []
    async with bot([]) as b:
        b.channel.observe_updates(on_api_error=floods.append)
        tg.fail_next("sendMessage", 429, retry_after=1, count=2)
        # The bot itself, past the outbox: only the limiter stands between it and the 429s.
        sent = await b.channel.app.bot.send_message(ALLOWED, "sent in the end")
        calls = tg.calls_of("sendMessage", ALLOWED)
        assert [call.error for call in calls] == [429, 429, None]
        assert {call.params["text"] for call in calls} == {"sent in the end"}
        assert sent.text == "sent in the end" and tg.texts(ALLOWED) == ["sent in the end"]
        assert b.channel.outbox.flood_waits == 2 and floods == ["sendMessage", "sendMessage"]


async def test_a_flood_wait_holds_every_chat_until_it_is_over(
    bot: BotFactory, tg: FakeTelegram
) -> None:
    flooded = asyncio.Event()
    async with bot([]) as b:
        b.channel.observe_updates(on_api_error=lambda method: flooded.set())
        api = b.channel.app.bot
        tg.fail_next("sendMessage", 429, retry_after=1)
        first = asyncio.create_task(api.send_message(ALLOWED, "flooded"))
        await flooded.wait()  # the bot has the 429 in hand
        await api.send_message(OTHER, "another chat")
        await first
        [refused, resent] = tg.calls_of("sendMessage", ALLOWED)
        [other] = tg.calls_of("sendMessage", OTHER)
        assert refused.error == 429 and resent.error is None and other.error is None
        assert other.at - refused.at >= 0.9  # it waited with the flooded chat (a lower bound)
