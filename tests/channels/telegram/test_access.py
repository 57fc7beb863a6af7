"""Who the bot answers where: a user on the allow-list in private chats, a group only when the
group itself is on the list (its members all see the answers and files)."""

from __future__ import annotations

import logging

import pytest

from tests.channels.telegram.conftest import ALLOW, ALLOWED, GROUP, BotFactory
from tests.fakes.telegram_server import BOT_USERNAME, FakeTelegram

UNLISTED_GROUP = -100777  # a group the bot was added to, not on the allow-list


def has_text(tg: FakeTelegram, chat: int, fragment: str) -> bool:
    return any(fragment in text for text in tg.texts(chat))


async def test_an_allowed_user_is_not_answered_in_a_group_that_is_not_allowed(
    bot: BotFactory,
) -> None:
    answers = [{"thinking": "", "answer": "the secret is 42"}] * 2
    async with bot(answers) as b:
        tg = b.tg
        group = {"chat_type": "supergroup", "user_id": ALLOWED}
        tg.send_text(UNLISTED_GROUP, f"@{BOT_USERNAME} what is the secret?", **group)
        tg.send_text(UNLISTED_GROUP, "/status", **group)
        tg.send_document(UNLISTED_GROUP, b"a,b\n1,2\n", "data.csv", **group)
        await tg.wait_for(lambda: tg.calls_of("sendMessage", UNLISTED_GROUP))
        [refusal] = tg.calls_of("sendMessage", UNLISTED_GROUP)  # one, for the whole chat
        assert "only talks to" in refusal.params["text"]

        # The same user in a private chat, and a group on the list, are answered.
        tg.send_text(ALLOWED, "what is the secret?")
        await tg.wait_for(lambda: has_text(tg, ALLOWED, "the secret is 42"))
        tg.send_text(GROUP, f"@{BOT_USERNAME} and here?", **{**group, "user_id": 5555})
        await tg.wait_for(lambda: has_text(tg, GROUP, "the secret is 42"))

        assert not has_text(tg, UNLISTED_GROUP, "secret")
        assert not tg.calls_of("getFile")  # the group's file was never fetched
        owners = sorted(c.owner or "" for c in await b.convs.list())
        assert owners == [f"telegram:{GROUP}", f"telegram:{ALLOWED}"]


async def test_username_entries_are_warned_about_at_start(
    bot: BotFactory, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="cove.telegram"):
        async with bot([], allow=(*ALLOW, "@alice")):
            pass
    warning = next(r.getMessage() for r in caplog.records if "@alice" in r.getMessage())
    assert "whoever holds" in warning and "user id" in warning
