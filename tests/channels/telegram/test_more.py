"""The rest of the bot's surface: the other commands, limits, topics, restarts, retries."""

from __future__ import annotations

import logging

import pytest

from tests.channels.telegram.conftest import ALLOWED, GROUP, BotFactory
from tests.fakes.telegram_server import FakeTelegram
from tests.scripted import reply


def has_text(tg: FakeTelegram, chat: int, fragment: str) -> bool:
    return any(fragment in text for text in tg.texts(chat))


async def test_title_export_replay_and_help(bot: BotFactory) -> None:
    async with bot([reply(["v = [1, 2]"], "a list"), reply(["v = [1, 2]"], "a list")]) as b:
        tg = b.tg
        tg.send_text(ALLOWED, "make a list")
        await tg.wait_for(lambda: has_text(tg, ALLOWED, "a list"))
        tg.send_text(ALLOWED, "/title Lists & such")
        await tg.wait_for(lambda: has_text(tg, ALLOWED, "Renamed: Lists & such"))
        tg.send_text(ALLOWED, "/export")
        await tg.wait_for(lambda: tg.calls_of("sendDocument", ALLOWED))
        name, data = tg.calls_of("sendDocument", ALLOWED)[0].files["document"]
        assert name.endswith(".md") and data.startswith(b"# Lists & such")
        assert b"make a list" in data and b"v = [1, 2]" in data
        tg.send_text(ALLOWED, "/replay")
        await tg.wait_for(lambda: has_text(tg, ALLOWED, "Replay matched the record"))
        tg.send_text(ALLOWED, "/help")
        await tg.wait_for(lambda: has_text(tg, ALLOWED, "/fork N — "))


async def test_a_file_over_the_limit_is_refused_and_nothing_runs(bot: BotFactory) -> None:
    async with bot([], max_file_bytes=1000) as b:
        tg = b.tg
        tg.send_document(ALLOWED, b"x" * 2000, "big.bin")
        await tg.wait_for(lambda: has_text(tg, ALLOWED, "over the"))
        assert not tg.calls_of("getFile")
        assert await b.convs.list() == []  # nothing was stored


async def test_forum_topics_are_separate_conversations(bot: BotFactory) -> None:
    replies = [{"thinking": "", "answer": "in topic 7"}, {"thinking": "", "answer": "in topic 9"}]
    async with bot(replies) as b:
        tg = b.tg
        tg.send_text(GROUP, "/status", chat_type="supergroup", user_id=ALLOWED, thread_id=7)
        await tg.wait_for(lambda: has_text(tg, GROUP, "Conversation"))
        tg.send_text(GROUP, "@cove_test_bot one", chat_type="supergroup", thread_id=7)
        await tg.wait_for(lambda: has_text(tg, GROUP, "in topic 7"))
        tg.send_text(GROUP, "@cove_test_bot two", chat_type="supergroup", thread_id=9)
        await tg.wait_for(lambda: has_text(tg, GROUP, "in topic 9"))
        owners = sorted(c.owner or "" for c in await b.convs.list())
        assert owners == [f"telegram:{GROUP}:7", f"telegram:{GROUP}:9"]
        answers = [c for c in tg.calls_of("sendMessage", GROUP) if "in topic" in c.params["text"]]
        assert [c.params["message_thread_id"] for c in answers] == [7, 9]


async def test_after_a_restart_the_chat_keeps_its_newest_conversation(bot: BotFactory) -> None:
    async with bot([{"thinking": "", "answer": "one"}]) as b:
        tg = b.tg
        tg.send_text(ALLOWED, "first")
        await tg.wait_for(lambda: has_text(tg, ALLOWED, "one"))
        tg.send_text(ALLOWED, "/new")
        await tg.wait_for(lambda: has_text(tg, ALLOWED, "New conversation"))
        newest = max(await b.convs.list(), key=lambda c: c.created_at)
    async with bot([{"thinking": "", "answer": "two"}]) as b:
        tg.send_text(ALLOWED, "second")
        await tg.wait_for(lambda: has_text(tg, ALLOWED, "two"))
        turns = (await b.convs.inspect(newest.id)).turns
        assert [t.request for t in turns] == ["second"]


async def test_network_errors_are_retried(bot: BotFactory) -> None:
    async with bot([{"thinking": "", "answer": "got through"}]) as b:
        tg = b.tg
        tg.fail_next("sendMessage", 502, "Bad Gateway", count=2, when=lambda p: "parse_mode" in p)
        tg.send_text(ALLOWED, "hi")
        await tg.wait_for(lambda: has_text(tg, ALLOWED, "got through"))
        errors = [c.error for c in tg.calls_of("sendMessage", ALLOWED) if "parse_mode" in c.params]
        assert errors == [502, 502, None]


async def test_an_empty_allow_list_refuses_everyone_and_says_so(
    bot: BotFactory, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="cove.telegram"):
        async with bot([], allow=()) as b:
            assert "allow-list is empty" in caplog.text
            b.tg.send_text(ALLOWED, "hello?")
            await b.tg.wait_for(lambda: has_text(b.tg, ALLOWED, "only talks to"))
            assert await b.convs.list() == []


async def test_a_photo_is_saved_in_the_workspace_at_full_size(bot: BotFactory) -> None:
    code = "size = len(read_file(list_files()[0]['path'], binary=True))"
    async with bot([reply([code], "{{size}} bytes")]) as b:
        tg = b.tg
        tg.send_photo(ALLOWED, b"\xff\xd8" + b"p" * 500, caption="how big?")
        await tg.wait_for(lambda: has_text(tg, ALLOWED, "502 bytes"))
        [conv] = await b.convs.list()
        [turn] = (await b.convs.inspect(conv.id)).turns
        assert turn.request.startswith("how big?")


async def test_a_deleted_conversation_is_replaced_on_the_next_message(bot: BotFactory) -> None:
    async with bot([{"thinking": "", "answer": "one"}, {"thinking": "", "answer": "two"}]) as b:
        tg = b.tg
        tg.send_text(ALLOWED, "first")
        await tg.wait_for(lambda: has_text(tg, ALLOWED, "one"))
        [old] = await b.convs.list()
        await b.convs.delete(old.id)
        tg.send_text(ALLOWED, "second")
        await tg.wait_for(lambda: has_text(tg, ALLOWED, "two"))
        [new] = await b.convs.list()
        assert new.id != old.id and new.owner == f"telegram:{ALLOWED}"


async def test_the_token_is_redacted_from_log_lines_while_the_bot_runs(
    bot: BotFactory, tg: FakeTelegram, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO):
        async with bot([]):
            logging.getLogger("somewhere").warning("calling %s/bot%s/getMe", tg.api_url, tg.token)
    assert tg.token not in caplog.text and "/bot<token>/getMe" in caplog.text


async def test_updates_and_failed_api_calls_can_be_observed(
    bot: BotFactory, tg: FakeTelegram
) -> None:
    updates: list[None] = []
    errors: list[str] = []
    async with bot([{"thinking": "", "answer": "*x"}]) as b:
        b.channel.observe_updates(
            on_update=lambda: updates.append(None), on_api_error=errors.append
        )
        tg.fail_next("sendMessage", 400, when=lambda p: p.get("parse_mode") == "HTML")
        tg.send_text(ALLOWED, "hi")
        tg.send_text(4242, "stranger")
        await tg.wait_for(lambda: has_text(tg, ALLOWED, "*x"))
        await tg.wait_for(lambda: tg.calls_of("sendMessage", 4242))
    assert len(updates) == 2 and errors == ["sendMessage"]
