"""The real python-telegram-bot ``Application`` against the fake Bot API, with a scripted model."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest

from cove.engine.llm import Message
from cove.errors import ModelError
from tests.channels.telegram.conftest import ALLOWED, GROUP, OTHER, Bot, BotFactory
from tests.fakes.telegram_server import BOT_USERNAME, FakeTelegram
from tests.scripted import GatedModel, reply

STRANGER = 4242


def has_text(tg: FakeTelegram, chat: int, fragment: str) -> bool:
    return any(fragment in text for text in tg.texts(chat))


def html_sends(tg: FakeTelegram, chat: int) -> list[dict[str, Any]]:
    return [c.params for c in tg.calls_of("sendMessage", chat) if c.params.get("parse_mode")]


async def test_allowed_user_gets_an_answer_and_a_stranger_one_refusal(bot: BotFactory) -> None:
    async with bot([reply(["x = 6 * 7"], "It is {{x}}.")]) as b:
        tg = b.tg
        assert [c.params["commands"][0]["command"] for c in tg.calls_of("setMyCommands")] == [
            "start"
        ]
        tg.send_text(STRANGER, "run something")
        tg.send_text(STRANGER, "and again")
        tg.send_text(ALLOWED, "what is six times seven?")
        await tg.wait_for(lambda: has_text(tg, ALLOWED, "It is 42."))
        await tg.wait_for(lambda: tg.calls_of("sendMessage", STRANGER))
        refusals = tg.calls_of("sendMessage", STRANGER)
        assert len(refusals) == 1 and "only talks to" in refusals[0].params["text"]
        assert await b.convs.list(owner=f"telegram:{STRANGER}") == []
        [mine] = await b.convs.list()
        assert mine.owner == f"telegram:{ALLOWED}" and mine.channel == "telegram"


async def test_a_turn_shows_typing_progress_edits_and_then_the_answer(bot: BotFactory) -> None:
    model = GatedModel(
        [reply(["rows = [1, 2, 3]", "print(sum(rows))"]), reply(answer="The sum is **6**.")]
    )
    async with bot(model.factory()) as b:
        tg = b.tg
        tg.send_text(ALLOWED, "sum 1, 2, 3")
        # The second model call waits: the status shows iteration 2 and the first block's output.
        await tg.wait_for(
            lambda: any(
                t.startswith("⚙️ Working · iteration 2/10") and "↳ 6" in t for t in tg.texts(ALLOWED)
            )
        )
        model.gate.set()
        await tg.wait_for(lambda: has_text(tg, ALLOWED, "The sum is 6."))
        assert tg.calls_of("sendChatAction", ALLOWED)[0].params["action"] == "typing"
        status, answer = tg.calls_of("sendMessage", ALLOWED)
        assert status.params["text"].startswith("⚙️ Working")
        assert "parse_mode" not in status.params  # hostile previews are never parsed
        edits = tg.calls_of("editMessageText", ALLOWED)
        assert len(edits) >= 2
        assert all(e.params["message_id"] == edits[0].params["message_id"] for e in edits)
        assert edits[-1].params["text"].startswith("✅ Done · 2 iterations")
        assert answer.params["parse_mode"] == "HTML"
        assert answer.params["text"] == "The sum is <b>6</b>."
        assert edits[-1].at < answer.at  # the answer is a new message after the final status


async def test_cancel_stops_the_running_turn(bot: BotFactory) -> None:
    async with bot([reply(answer="too late")], delay_s=60) as b:
        tg = b.tg
        tg.send_text(ALLOWED, "take your time")
        await tg.wait_for(lambda: has_text(tg, ALLOWED, "Working"))
        tg.send_text(ALLOWED, "/cancel")
        await tg.wait_for(lambda: has_text(tg, ALLOWED, "⏹ Cancelled"))
        assert has_text(tg, ALLOWED, "Cancelling the running turn")
        assert not has_text(tg, ALLOWED, "too late")
        [conv] = await b.convs.list()
        transcript = await b.convs.inspect(conv.id)
        assert [t.status for t in transcript.turns] == ["cancelled"]


async def test_a_message_during_a_turn_is_queued_and_said_so(bot: BotFactory) -> None:
    model = GatedModel([reply(answer="first"), reply(answer="second")], gated_call=1)
    async with bot(model.factory()) as b:
        tg = b.tg
        await queue_behind_the_first(tg, model)
        await tg.wait_for(lambda: has_text(tg, ALLOWED, "second"))
        texts = tg.texts(ALLOWED)
        assert texts.index("first") < texts.index("second")


async def test_a_queued_turn_answers_after_the_turn_before_said_everything(
    bot: BotFactory,
) -> None:
    # The first answer takes long to send (the Bot API holds it); the second turn, quick, ends
    # meanwhile: its answer still comes second, and nothing of it shows before.
    model = GatedModel([reply(answer="first"), reply(answer="second")], gated_call=1)
    async with bot(model.factory()) as b:
        tg = b.tg
        held = tg.hold("sendMessage", when=first_answer)
        try:
            await queue_behind_the_first(tg, model)
            await tg.wait_for(
                lambda: [c for c in tg.calls_of("sendMessage") if first_answer(c.params)]
            )
            [conv] = await b.convs.list()
            await until_turns_ended(b, conv.id, 2)
            shown = len(tg.texts(ALLOWED))
            with pytest.raises(TimeoutError):  # the second turn shows nothing meanwhile
                await tg.wait_for(lambda: len(tg.texts(ALLOWED)) > shown, timeout=2)
        finally:
            held.set()
        await tg.wait_for(lambda: has_text(tg, ALLOWED, "second"))
        texts = tg.texts(ALLOWED)
        assert texts.index("first") < texts.index("second")


async def test_a_turn_queued_behind_a_failed_one_still_answers_after_it(bot: BotFactory) -> None:
    # The endpoint drops the first turn's model call: the chat is told, and the queued turn,
    # which waited for the first to say everything, answers after it.
    dropped = ModelError("the model endpoint closed the connection")
    model = GatedModel([dropped, reply(answer="second")], gated_call=1)
    async with bot(model.factory()) as b:
        tg = b.tg
        await queue_behind_the_first(tg, model)
        await tg.wait_for(lambda: has_text(tg, ALLOWED, "second"))
        texts = tg.texts(ALLOWED)
        told = [i for i, text in enumerate(texts) if "closed the connection" in text]
        assert told and told[0] < texts.index("second"), texts
        [conv] = await b.convs.list()
        statuses = [t.status for t in (await b.convs.inspect(conv.id)).turns]
        assert statuses == ["failed", "done"]


async def queue_behind_the_first(tg: FakeTelegram, model: GatedModel) -> None:
    """Send "one" (its model call held), then "two", queued behind it; then let "one" go on."""
    tg.send_text(ALLOWED, "one")
    await tg.wait_for(lambda: has_text(tg, ALLOWED, "Working"))
    tg.send_text(ALLOWED, "two")
    await tg.wait_for(lambda: has_text(tg, ALLOWED, "queued"))
    model.gate.set()


def first_answer(params: dict[str, Any]) -> bool:
    return params.get("text") == "first"


async def until_turns_ended(b: Bot, conversation_id: str, count: int) -> None:
    """Wait until the conversation has ``count`` turns that ended (recorded in the store)."""
    for _ in range(600):
        turns = (await b.convs.inspect(conversation_id)).turns
        if len([t for t in turns if t.status != "running"]) >= count:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"fewer than {count} turns ended")


async def test_new_starts_a_fresh_conversation_and_keeps_the_old(bot: BotFactory) -> None:
    async with bot([reply(["a = 1"], "one"), reply(["b = 2"], "two")]) as b:
        tg = b.tg
        tg.send_text(ALLOWED, "first")
        await tg.wait_for(lambda: has_text(tg, ALLOWED, "one"))
        [old] = await b.convs.list()
        tg.send_text(ALLOWED, "/new")
        await tg.wait_for(lambda: has_text(tg, ALLOWED, "New conversation"))
        tg.send_text(ALLOWED, "second")
        await tg.wait_for(lambda: has_text(tg, ALLOWED, "two"))
        convs = await b.convs.list()
        assert len(convs) == 2
        new = next(c for c in convs if c.id != old.id)
        assert set(await b.convs.variables(old.id)) == {"a"}
        assert set(await b.convs.variables(new.id)) == {"b"}
        [started] = [t for t in tg.texts(ALLOWED) if "New conversation" in t]
        assert old.id in started  # the /new reply names the kept one


async def test_vars_var_history_and_status(bot: BotFactory) -> None:
    async with bot(
        [reply(["total = 40 + 2", "name = '<b>x</b>'"], "done"), reply(["total += 1"], "again")]
    ) as b:
        tg = b.tg
        tg.send_text(ALLOWED, "set some")
        await tg.wait_for(lambda: has_text(tg, ALLOWED, "done"))
        tg.send_text(ALLOWED, "more")
        await tg.wait_for(lambda: has_text(tg, ALLOWED, "again"))
        tg.send_text(ALLOWED, "/vars")
        await tg.wait_for(lambda: has_text(tg, ALLOWED, "Variables"))
        shown = tg.texts(ALLOWED)[-1]
        assert "total · int · v2" in shown and "43" in shown
        assert "<b>x</b>" in shown  # the value is shown as text, never as markup
        tg.send_text(ALLOWED, "/var total")
        await tg.wait_for(lambda: has_text(tg, ALLOWED, "total versions"))
        versions = tg.texts(ALLOWED)[-1]
        assert versions.index("v2") < versions.index("v1") and "42" in versions
        tg.send_text(ALLOWED, "/history")
        await tg.wait_for(lambda: has_text(tg, ALLOWED, "[done] set some"))
        tg.send_text(ALLOWED, "/var nope")
        await tg.wait_for(lambda: has_text(tg, ALLOWED, "no variable matches 'nope'"))
        tg.send_text(ALLOWED, "/status")
        await tg.wait_for(lambda: has_text(tg, ALLOWED, "turns: 2 · idle"))


async def test_fork_continues_from_an_earlier_turn(bot: BotFactory) -> None:
    replies = [reply(["n = 1"], "one"), reply(["n = 2"], "two"), reply(["n = n * 10"], "{{n}}")]
    async with bot(replies) as b:
        tg = b.tg
        tg.send_text(ALLOWED, "first")
        await tg.wait_for(lambda: has_text(tg, ALLOWED, "one"))
        tg.send_text(ALLOWED, "second")
        await tg.wait_for(lambda: has_text(tg, ALLOWED, "two"))
        [parent] = await b.convs.list()
        tg.send_text(ALLOWED, "/fork 1")
        await tg.wait_for(lambda: has_text(tg, ALLOWED, "Forked at turn 1"))
        tg.send_text(ALLOWED, "times ten")
        await tg.wait_for(lambda: has_text(tg, ALLOWED, "10"))
        fork = next(c for c in await b.convs.list() if c.id != parent.id)
        assert fork.parent_id == parent.id and fork.fork_turn == 1
        assert (await b.convs.variables(parent.id))["n"].preview == "2"
        tg.send_text(ALLOWED, "/fork 9")
        await tg.wait_for(lambda: has_text(tg, ALLOWED, "has no turn 9"))


async def test_a_10000_character_answer_arrives_in_pieces_under_the_limit(bot: BotFactory) -> None:
    paragraphs = [f"Part {i}. " + "lorem ipsum " * 60 for i in range(13)]
    code = "```python\n" + "\n".join(f"value_{i} = {i}" for i in range(60)) + "\n```"
    answer = "\n\n".join([*paragraphs[:7], code, *paragraphs[7:]])
    assert len(answer) >= 10_000
    async with bot([{"thinking": "", "answer": answer}]) as b:
        tg = b.tg
        tg.send_text(ALLOWED, "write a lot")
        await tg.wait_for(lambda: has_text(tg, ALLOWED, "Part 12."))
        pieces = html_sends(tg, ALLOWED)
        assert len(pieces) == 3
        shown = tg.texts(ALLOWED)[-3:]
        assert all(len(t) <= 4096 for t in shown)
        assert [t.endswith(f"({i}/3)") for i, t in enumerate(shown, 1)] == [True] * 3
        assert sum("value_0 = 0" in t and "value_59 = 59" in t for t in shown) == 1
        for paragraph in paragraphs:
            assert sum(paragraph.strip() in t for t in shown) == 1


async def test_formatting_telegram_rejects_is_sent_again_as_plain_text(bot: BotFactory) -> None:
    async with bot([{"thinking": "", "answer": "Use *care* with `x`"}]) as b:
        tg = b.tg
        tg.fail_next("sendMessage", 400, when=lambda p: p.get("parse_mode") == "HTML")
        tg.send_text(ALLOWED, "hi")
        await tg.wait_for(lambda: has_text(tg, ALLOWED, "Use *care* with `x`"))
        refused, resent = [c for c in tg.calls_of("sendMessage", ALLOWED)][-2:]
        assert refused.error == 400 and refused.params["parse_mode"] == "HTML"
        assert resent.error is None and "parse_mode" not in resent.params


async def test_flood_control_waits_the_time_telegram_asks_and_loses_nothing(
    bot: BotFactory,
) -> None:
    async with bot([{"thinking": "", "answer": "after the flood"}]) as b:
        tg = b.tg
        tg.fail_next("sendMessage", 429, retry_after=1, when=lambda p: "parse_mode" in p)
        tg.send_text(ALLOWED, "hi")
        await tg.wait_for(lambda: has_text(tg, ALLOWED, "after the flood"))
        refused, sent = tg.calls_of("sendMessage", ALLOWED)[-2:]
        assert refused.error == 429 and sent.error is None
        assert sent.params["text"] == refused.params["text"]
        assert sent.at - refused.at >= 0.9  # it waited as asked (a lower bound, not a speed)
        assert b.channel.outbox.flood_waits == 1


async def test_an_uploaded_csv_is_read_by_the_code(bot: BotFactory) -> None:
    seen: list[str] = []

    def first(messages: Sequence[Message]) -> dict[str, Any]:
        seen.append("\n".join(m["content"] for m in messages))
        code = (
            "rows = [line.split(',') for line in read_file('data.csv').splitlines()]\n"
            "total = sum(int(r[1]) for r in rows[1:])"
        )
        return {"thinking": "", "code": [code], "answer": "The total is {{total}}."}

    async with bot([first]) as b:
        tg = b.tg
        tg.send_document(
            ALLOWED, b"name,amount\na,1\nb,2\nc,39\n", "../data.csv", caption="add it up"
        )
        await tg.wait_for(lambda: has_text(tg, ALLOWED, "The total is 42."))
        assert "data.csv" in seen[0] and "add it up" in seen[0]
        [conv] = await b.convs.list()
        assert (await b.convs.variables(conv.id))["total"].preview == "42"
        assert tg.calls_of("getFile")


async def test_files_the_code_writes_come_back_as_documents(bot: BotFactory) -> None:
    code = "write_file('report.txt', 'all good')"
    async with bot([reply([code], "written")]) as b:
        tg = b.tg
        tg.send_text(ALLOWED, "write a report")
        await tg.wait_for(lambda: tg.calls_of("sendDocument", ALLOWED))
        [sent] = tg.calls_of("sendDocument", ALLOWED)
        assert sent.files["document"] == ("report.txt", b"all good")


async def test_two_chats_run_turns_at_the_same_time_without_mixing(bot: BotFactory) -> None:
    calls = {"A": 0, "B": 0}

    def answer_for(messages: Sequence[Message]) -> dict[str, Any]:
        request = next(m["content"] for m in messages if "question from" in m["content"])
        tag = "A" if "question from A" in request else "B"
        calls[tag] += 1
        if calls[tag] > 1:
            return {"thinking": "", "answer": f"answer for {tag}: {{{{mine}}}}"}
        return {"thinking": "", "code": [f"mine = '{tag}' * 3"]}

    async with bot([answer_for] * 4, delay_s=0.3) as b:
        tg = b.tg
        tg.send_text(ALLOWED, "question from A")
        tg.send_text(OTHER, "question from B")
        await tg.wait_for(
            lambda: has_text(tg, ALLOWED, "answer for") and has_text(tg, OTHER, "answer for")
        )
        assert has_text(tg, ALLOWED, "answer for A: AAA") and not has_text(tg, ALLOWED, "B")
        assert has_text(tg, OTHER, "answer for B: BBB") and not has_text(tg, OTHER, "AAA")
        running = [c.at for c in tg.calls_of("sendMessage") if "Working" in c.params["text"]]
        answers = [c.at for c in tg.calls_of("sendMessage") if "answer for" in c.params["text"]]
        assert max(running) < min(answers)  # both were running before either answered


async def test_in_a_group_the_bot_answers_only_when_addressed(bot: BotFactory) -> None:
    async with bot([{"thinking": "", "answer": "here"}]) as b:
        tg = b.tg
        tg.send_text(
            GROUP, "people talking among themselves", user_id=STRANGER, chat_type="supergroup"
        )
        tg.send_text(
            GROUP, f"@{BOT_USERNAME} are you there?", user_id=STRANGER, chat_type="supergroup"
        )
        await tg.wait_for(lambda: has_text(tg, GROUP, "here"))
        [conv] = await b.convs.list()
        [turn] = (await b.convs.inspect(conv.id)).turns
        assert turn.request == "are you there?"


async def test_a_failing_turn_is_reported_and_the_bot_keeps_running(bot: BotFactory) -> None:
    from cove.errors import ModelError

    async with bot([ModelError("the endpoint is down"), {"thinking": "", "answer": "back"}]) as b:
        tg = b.tg
        tg.send_text(ALLOWED, "one")
        await tg.wait_for(lambda: has_text(tg, ALLOWED, "Failed"))
        tg.send_text(ALLOWED, "two")
        await tg.wait_for(lambda: has_text(tg, ALLOWED, "back"))
