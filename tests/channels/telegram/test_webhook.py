"""Webhook mode: updates arrive by HTTP POST and count only with the secret token."""

from __future__ import annotations

import httpx

from tests.channels.telegram.conftest import ALLOWED, BotFactory
from tests.fakes.telegram_server import FakeTelegram


async def test_webhook_updates_need_the_secret_token(bot: BotFactory, tg: FakeTelegram) -> None:
    hook = "https://bot.example.org/telegram/hook"
    async with bot(
        [{"thinking": "", "answer": "via webhook"}], webhook_url=hook, webhook_port=0
    ) as b:
        assert tg.webhook is not None and tg.webhook["url"] == hook
        secret = tg.webhook["secret_token"]
        assert len(secret) >= 32 and not tg.calls_of("getUpdates")
        url = f"http://127.0.0.1:{b.channel.webhook_port}/telegram/hook"
        update = tg.text_update(ALLOWED, "hello over http")
        async with httpx.AsyncClient() as client:
            missing = await client.post(url, json=update)
            wrong = await client.post(
                url, json=update, headers={"X-Telegram-Bot-Api-Secret-Token": "guess"}
            )
            garbage = await client.post(
                url, content=b"{not json", headers={"X-Telegram-Bot-Api-Secret-Token": secret}
            )
            assert (missing.status_code, wrong.status_code, garbage.status_code) == (403, 403, 400)
            assert not tg.calls_of("sendMessage")  # nothing ran
            ok = await client.post(
                url, json=update, headers={"X-Telegram-Bot-Api-Secret-Token": secret}
            )
            assert ok.status_code == 200
        await tg.wait_for(lambda: "via webhook" in tg.texts(ALLOWED))
    # Stopping leaves the webhook to the other nodes behind its URL.
    assert tg.webhook is not None and not tg.calls_of("deleteWebhook")
