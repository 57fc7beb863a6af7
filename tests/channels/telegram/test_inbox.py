"""Webhook updates kept in the store's inbox (``channels/telegram/inbox.py``): what a node that
died left there is run by the bot once — never a second time when it had begun — and a chat's
updates run in the order they came whichever node holds them.

A node that died is stood for by rows written with the store alone, held by a lease owner id
naming a process of this host that no longer exists (the bot takes those over at once) or by a
node elsewhere whose claim is about to end."""

from __future__ import annotations

import json
import socket
import subprocess
from pathlib import Path
from typing import Any

import httpx

from cove.channels.telegram.handlers import COMMAND_CUT_SHORT, CUT_SHORT
from cove.channels.telegram.inbox import REDELIVERY_WINDOW_S
from cove.persistence.fence import Fence, fenced
from cove.persistence.store import Store
from tests.channels.telegram.conftest import ALLOWED, BotFactory
from tests.fakes.telegram_server import BOT_ID, FakeTelegram
from tests.scripted import reply, settings_for

HOOK = "https://bot.example.org/telegram/hook"
SENDER = f"telegram:{BOT_ID}"


def dead_owner() -> str:
    """A lease owner id naming a process of this host that has ended."""
    process = subprocess.Popen(["true"])
    process.wait()
    return f"{socket.gethostname()}:{process.pid}:deadbeef"


async def kept(store: Store, update: dict[str, Any], holder: str, claim_s: float = 600.0) -> str:
    """Keep ``update`` (a message of chat ALLOWED) in the inbox as ``holder`` would have; its
    key."""
    key = f"{SENDER}:{update['update_id']}"
    assert await store.receive_delivery(
        key,
        sender=SENDER,
        lane=str(ALLOWED),
        seq=update["update_id"],
        body=json.dumps(update),
        holder=holder,
        claim_s=claim_s,
        keep_s=REDELIVERY_WINDOW_S,
    )
    return key


async def post(port: int, tg: FakeTelegram, update: dict[str, Any]) -> None:
    """Post an update to the bot's webhook, as Telegram does; it must be acknowledged."""
    assert tg.webhook is not None
    headers = {"X-Telegram-Bot-Api-Secret-Token": tg.webhook["secret_token"]}
    async with httpx.AsyncClient() as client:
        answer = await client.post(
            f"http://127.0.0.1:{port}/telegram/hook", json=update, headers=headers
        )
    assert answer.status_code == 200


async def test_a_message_a_dead_node_kept_is_answered_once_here(
    tmp_path: Path, bot: BotFactory, tg: FakeTelegram
) -> None:
    settings = settings_for(tmp_path)
    dead = dead_owner()
    async with Store.open(settings.store.database) as store:
        await kept(store, tg.text_update(ALLOWED, "msg-1"), dead)
        # msg-2's turn was about to start when its node died: its position is recorded, its
        # turn is not.
        conversation = await store.create_conversation(
            channel="telegram", external_id=str(ALLOWED), owner=f"telegram:{ALLOWED}"
        )
        key = await kept(store, tg.text_update(ALLOWED, "msg-2"), dead)
        fence = Fence(conversation.id, dead, await store.acquire_lease(conversation.id, dead, 600))
        with fenced(fence):
            assert await store.start_delivered_turn(key, dead, conversation.id) == "start"
    replies = [reply(answer="answer msg-1"), reply(answer="answer msg-2")]
    async with bot(replies, settings=settings, webhook_url=HOOK, webhook_port=0) as b:
        await tg.wait_for(lambda: "answer msg-2" in tg.texts(ALLOWED))
        turns = (await b.convs.inspect(conversation.id)).turns
    texts = tg.texts(ALLOWED)
    assert [texts.count(f"answer msg-{n}") for n in (1, 2)] == [1, 1]
    assert texts.index("answer msg-1") < texts.index("answer msg-2")
    assert [(turn.request, turn.status) for turn in turns] == [
        ("msg-1", "done"),
        ("msg-2", "done"),
    ]


async def test_a_message_whose_turn_began_on_a_dead_node_is_not_run_again(
    tmp_path: Path, bot: BotFactory, tg: FakeTelegram
) -> None:
    settings = settings_for(tmp_path)
    dead = dead_owner()
    async with Store.open(settings.store.database) as store:
        conversation = await store.create_conversation(
            channel="telegram", external_id=str(ALLOWED), owner=f"telegram:{ALLOWED}"
        )
        key = await kept(store, tg.text_update(ALLOWED, "msg-1"), dead)
        fence = Fence(conversation.id, dead, await store.acquire_lease(conversation.id, dead, 600))
        with fenced(fence):  # its node started the turn and died before finishing the update
            assert await store.start_delivered_turn(key, dead, conversation.id) == "start"
            await store.start_turn(conversation.id, "msg-1", delivery=key)
    replies = [reply(answer="answer msg-2")]  # msg-1 run again would take it
    async with bot(replies, settings=settings, webhook_url=HOOK, webhook_port=0) as b:
        await tg.wait_for(lambda: CUT_SHORT in tg.texts(ALLOWED))
        await post(b.channel.webhook_port, tg, tg.text_update(ALLOWED, "msg-2"))
        await tg.wait_for(lambda: "answer msg-2" in tg.texts(ALLOWED))
        turns = (await b.convs.inspect(conversation.id)).turns
    assert tg.texts(ALLOWED).count(CUT_SHORT) == 1
    assert [(turn.request, turn.status) for turn in turns] == [
        ("msg-1", "interrupted"),  # recorded once, never run a second time
        ("msg-2", "done"),
    ]


async def test_a_command_begun_on_a_dead_node_is_not_run_again(
    tmp_path: Path, bot: BotFactory, tg: FakeTelegram
) -> None:
    settings = settings_for(tmp_path)
    dead = dead_owner()
    async with Store.open(settings.store.database) as store:
        key = await kept(store, tg.text_update(ALLOWED, "/new"), dead)
        assert await store.start_delivery(key, dead) == "start"  # then its node died
    async with bot([], settings=settings, webhook_url=HOOK, webhook_port=0) as b:
        await tg.wait_for(lambda: COMMAND_CUT_SHORT in tg.texts(ALLOWED))
        await post(b.channel.webhook_port, tg, tg.text_update(ALLOWED, "/new"))
        await tg.wait_for(lambda: len(tg.texts(ALLOWED)) == 2)
        made = await b.convs.list()
    # The second /new made the chat's first conversation and a new one; the first /new, run
    # again, would have made a third.
    assert len(made) == 2
    assert sum("New conversation" in text for text in tg.texts(ALLOWED)) == 1


async def test_a_chats_update_waits_for_an_earlier_one_another_node_holds(
    tmp_path: Path, bot: BotFactory, tg: FakeTelegram
) -> None:
    # msg-1 is held by a node elsewhere (not on this host, so not seen dead) whose claim ends
    # in 2 s without being renewed; msg-2 reaches this bot meanwhile: it runs msg-1 first.
    settings = settings_for(tmp_path)
    async with Store.open(settings.store.database) as store:
        await kept(store, tg.text_update(ALLOWED, "msg-1"), "elsewhere:1:gone", claim_s=2.0)
    replies = [reply(answer="answer msg-1"), reply(answer="answer msg-2")]
    async with bot(replies, settings=settings, webhook_url=HOOK, webhook_port=0) as b:
        await post(b.channel.webhook_port, tg, tg.text_update(ALLOWED, "msg-2"))
        await tg.wait_for(lambda: "answer msg-2" in tg.texts(ALLOWED))
        [conversation] = await b.convs.list()
        turns = (await b.convs.inspect(conversation.id)).turns
    assert [turn.request for turn in turns] == ["msg-1", "msg-2"]
    texts = tg.texts(ALLOWED)
    assert texts.index("answer msg-1") < texts.index("answer msg-2")
