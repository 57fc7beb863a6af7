"""Approval in Telegram, on the fake Bot API wire: a call of the example plugin (``notes_add``,
effect ``write``, asked about by default) sends an inline keyboard to the chat; a press answers
it, only from the person who sent the message (or a user the allow-list names); no answer in
time is a denial the message then says."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.channels.telegram.conftest import ALLOWED, GROUP, BotFactory
from tests.fakes.telegram_server import BOT_USERNAME, FakeTelegram
from tests.plugins.conftest import notes_file, notes_site  # noqa: F401 (the example plugin)
from tests.plugins.test_example_plugin import notes
from tests.scripted import reply, settings_for

pytestmark = pytest.mark.slow  # a sandbox worker

STRANGER = 4242  # a member of the group who is not on the allow-list


def question(tg: FakeTelegram, chat: int, nth: int = 0) -> int:
    """The id of the ``nth`` approval question the bot sent to ``chat``."""
    asked = [
        i for i, m in sorted(tg.messages.get(chat, {}).items())
        if (m.get("text") or "").startswith("Approval needed")
    ]  # fmt: skip
    return asked[nth]


def asked(tg: FakeTelegram, chat: int, count: int = 1) -> bool:
    return sum((t.startswith("Approval needed")) for t in tg.texts(chat)) >= count


def toasts(tg: FakeTelegram) -> list[str]:
    return [c.params.get("text", "") for c in tg.calls_of("answerCallbackQuery")]


async def test_only_the_sender_answers_and_always_is_remembered(
    bot: BotFactory,
    notes_file: Path,  # noqa: F811
) -> None:
    replies = [
        reply(['notes_add("<b>not markup</b>")']),
        reply(answer="noted"),
        reply(['notes_add("again")'], "noted again"),
    ]
    async with bot(replies) as b:
        tg = b.tg
        mention = f"@{BOT_USERNAME} note it"
        tg.send_text(GROUP, mention, user_id=ALLOWED, chat_type="supergroup")
        await tg.wait_for(lambda: asked(tg, GROUP))
        message = question(tg, GROUP)
        text = tg.messages[GROUP][message]["text"]
        assert text == (
            "Approval needed: notes_add (from notes_add) wants to write:\n\n"
            "notes_add('<b>not markup</b>')"
        )
        [ask] = [c for c in tg.calls_of("sendMessage", GROUP) if "reply_markup" in c.params]
        assert "parse_mode" not in ask.params  # the sandbox's text is never parsed
        buttons = tg.keyboard(GROUP, message)
        assert [text for text, _ in buttons] == ["Approve", "Deny", "Always"]
        always = buttons[2][1]

        # A member of the group who is not on the allow-list is refused; nothing is decided.
        tg.press(GROUP, message, always, user_id=STRANGER)
        await tg.wait_for(lambda: len(toasts(tg)) == 1)
        assert "Only the person who sent the message" in toasts(tg)[0]
        assert tg.keyboard(GROUP, message) == buttons
        assert notes(notes_file) == []

        tg.press(GROUP, message, always, user_id=ALLOWED)
        approved = text + "\n\n✅ Approved, and always in this conversation."
        # The turn goes on at once; the question is edited beside it.
        await tg.wait_for(lambda: tg.messages[GROUP][message]["text"] == approved)
        await tg.wait_for(lambda: "noted" in tg.texts(GROUP))
        assert tg.keyboard(GROUP, message) == []  # decided: the buttons are gone
        assert toasts(tg)[1] == "✅ Approved, and always in this conversation."

        # A second press of the old button changes nothing.
        tg.press(GROUP, message, buttons[1][1], user_id=ALLOWED)
        await tg.wait_for(lambda: len(toasts(tg)) == 3)
        assert toasts(tg)[2] == "This request is no longer waiting for an answer."

        # Remembered: the next call runs without asking.
        tg.send_text(GROUP, f"@{BOT_USERNAME} again", user_id=ALLOWED, chat_type="supergroup")
        await tg.wait_for(lambda: "noted again" in tg.texts(GROUP))
        assert not asked(tg, GROUP, 2)
        [conv] = await b.convs.list()
        decided = await b.convs.approvals(conv.id)
    assert notes(notes_file) == ["<b>not markup</b>", "again"]
    assert [(a.approved, a.reason, a.remember, a.turn_position) for a in decided] == [
        (True, "person", True, 1),
        (True, "remembered", False, 2),
    ]


async def test_deny_refuses_the_call_and_the_model_is_told(
    bot: BotFactory,
    notes_file: Path,  # noqa: F811
) -> None:
    replies = [reply(['notes_add("no")']), reply(answer="it was refused")]
    async with bot(replies) as b:
        tg = b.tg
        tg.send_text(ALLOWED, "note it")
        await tg.wait_for(lambda: asked(tg, ALLOWED))
        message = question(tg, ALLOWED)
        tg.press(ALLOWED, message, tg.keyboard(ALLOWED, message)[1][1])
        await tg.wait_for(lambda: tg.messages[ALLOWED][message]["text"].endswith("\n\n🚫 Denied."))
        await tg.wait_for(lambda: "it was refused" in tg.texts(ALLOWED))
        [conv] = await b.convs.list()
        decided = await b.convs.approvals(conv.id)
        transcript = await b.convs.inspect(conv.id)
    assert notes(notes_file) == []
    assert [(a.approved, a.reason) for a in decided] == [(False, "person")]
    block = transcript.turns[0].iterations[0].blocks[0]
    assert "the person denied it" in (block.error or "")


async def test_no_answer_in_time_is_a_denial_and_the_message_says_so(
    bot: BotFactory,
    tmp_path: Path,
    notes_file: Path,  # noqa: F811
) -> None:
    replies = [reply(['notes_add("late")']), reply(answer="nobody answered")]
    settings = settings_for(tmp_path, approval_timeout_s=3.0)
    async with bot(replies, settings=settings) as b:
        tg = b.tg
        tg.send_text(ALLOWED, "note it")
        await tg.wait_for(lambda: asked(tg, ALLOWED))
        message = question(tg, ALLOWED)
        approve = tg.keyboard(ALLOWED, message)[0][1]
        said = "\n\n⌛ Nobody answered in time: denied."
        await tg.wait_for(lambda: tg.messages[ALLOWED][message]["text"].endswith(said))
        await tg.wait_for(lambda: "nobody answered" in tg.texts(ALLOWED))
        assert tg.keyboard(ALLOWED, message) == []
        tg.press(ALLOWED, message, approve)  # a late press, from an old client
        await tg.wait_for(lambda: toasts(tg))
        [conv] = await b.convs.list()
        decided = await b.convs.approvals(conv.id)
    assert toasts(tg) == ["This request is no longer waiting for an answer."]
    assert notes(notes_file) == []
    assert [(a.approved, a.reason) for a in decided] == [(False, "timeout")]


async def test_a_question_telegram_refuses_to_deliver_is_a_denial(
    bot: BotFactory,
    notes_file: Path,  # noqa: F811
) -> None:
    replies = [reply(['notes_add("unasked")']), reply(answer="could not ask")]
    async with bot(replies) as b:
        tg = b.tg
        tg.fail_next(
            "sendMessage",
            403,
            "Forbidden: bot can't send messages with buttons here",
            when=lambda params: "reply_markup" in params,
        )
        tg.send_text(ALLOWED, "note it")
        await tg.wait_for(lambda: "could not ask" in tg.texts(ALLOWED))
        [conv] = await b.convs.list()
        decided = await b.convs.approvals(conv.id)
    assert not asked(tg, ALLOWED)
    assert notes(notes_file) == []
    assert [(a.approved, a.reason) for a in decided] == [(False, "nobody")]
