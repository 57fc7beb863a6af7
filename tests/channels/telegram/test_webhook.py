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


async def test_an_update_posted_twice_is_answered_once(bot: BotFactory, tg: FakeTelegram) -> None:
    # Telegram posts an update again when its first post was not acknowledged in time.
    hook = "https://bot.example.org/telegram/hook"
    replies = [{"thinking": "", "answer": "first answer"}, {"thinking": "", "answer": "second"}]
    async with bot(replies, webhook_url=hook, webhook_port=0) as b:
        assert tg.webhook is not None
        headers = {"X-Telegram-Bot-Api-Secret-Token": tg.webhook["secret_token"]}
        url = f"http://127.0.0.1:{b.channel.webhook_port}/telegram/hook"
        update = tg.text_update(ALLOWED, "only once")
        async with httpx.AsyncClient() as client:
            posts = [await client.post(url, json=update, headers=headers) for _ in range(2)]
            assert [post.status_code for post in posts] == [200, 200]  # both acknowledged
            await tg.wait_for(lambda: "first answer" in tg.texts(ALLOWED))
            later = tg.text_update(ALLOWED, "a new message")
            assert (await client.post(url, json=later, headers=headers)).status_code == 200
        await tg.wait_for(lambda: "second" in tg.texts(ALLOWED))
        [conv] = await b.convs.list()
        turns = (await b.convs.inspect(conv.id)).turns
    assert [turn.request for turn in turns] == ["only once", "a new message"]
    assert tg.texts(ALLOWED).count("first answer") == 1


async def test_an_update_that_cannot_be_recorded_is_refused_to_come_again(
    bot: BotFactory, tg: FakeTelegram
) -> None:
    # Without its record an update could run twice (or, taken and then lost, never): it is
    # refused with 503, which Telegram answers by posting it again later.
    hook = "https://bot.example.org/telegram/hook"
    async with bot([{"thinking": "", "answer": "never"}], webhook_url=hook, webhook_port=0) as b:
        assert tg.webhook is not None
        headers = {"X-Telegram-Bot-Api-Secret-Token": tg.webhook["secret_token"]}
        url = f"http://127.0.0.1:{b.channel.webhook_port}/telegram/hook"
        await b.convs.aclose()  # the store is gone
        async with httpx.AsyncClient() as client:
            answer = await client.post(url, json=tg.text_update(ALLOWED, "hi"), headers=headers)
        assert answer.status_code == 503
    assert "never" not in tg.texts(ALLOWED)
