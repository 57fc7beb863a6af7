"""Telegram across two nodes on one PostgreSQL database: whichever node an update reaches, the
chat's conversation lease decides who runs it and every message is answered exactly once (an
update posted twice through the proxy, reaching both nodes, too); the
Bot API's limits (per chat, overall) hold across both nodes: the send slots the nodes took
together keep the pace exactly, and the fake Bot API's record of when each call arrived keeps
it on average."""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cove.channels.telegram.handlers import ELSEWHERE
from tests.fakes.openai_server import FakeOpenAI, Fault
from tests.fakes.telegram_server import FakeTelegram
from tests.nodes.cluster import model_calls, rows
from tests.nodes.proxy import Proxy, require_haproxy
from tests.nodes.telegram import BotNode, answer_by_mark, post_update

pytestmark = pytest.mark.slow  # two cove serve processes

CHAT = 7001


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        server.respond_with(answer_by_mark)
        yield server


@pytest.fixture
def tg() -> Iterator[FakeTelegram]:
    with FakeTelegram() as server:
        yield server


def gaps(times: list[float]) -> list[float]:
    """The time between each two consecutive ``times`` (sorted)."""
    return [later - earlier for earlier, later in itertools.pairwise(times)]


def count(texts: list[str], text: str) -> int:
    return sum(1 for shown in texts if shown == text)


async def test_a_message_reaching_the_other_node_mid_turn_runs_next_and_each_is_answered_once(
    tmp_path: Path, fake: FakeOpenAI, tg: FakeTelegram, shared_url: str
) -> None:
    opened = threading.Event()
    fake.add_faults(Fault.gate(opened))  # the first turn's model call lasts until we open it
    a = BotNode(tmp_path, "a", fake, tg, shared_url, [CHAT])
    try:
        b = BotNode(tmp_path, "b", fake, tg, shared_url, [CHAT])
        try:
            await a.deliver(tg.text_update(CHAT, "msg-1"))
            await model_calls(fake, 1)  # node a holds the conversation's lease, mid-turn
            await b.deliver(tg.text_update(CHAT, "msg-2"))
            await tg.wait_for(lambda: ELSEWHERE in tg.texts(CHAT))  # b waits for a's turn
            opened.set()
            await tg.wait_for(lambda: "answer msg-2" in tg.texts(CHAT), timeout=60)
            await b.deliver(tg.text_update(CHAT, "msg-3"))  # and now b runs it at once
            await tg.wait_for(lambda: "answer msg-3" in tg.texts(CHAT), timeout=60)
        finally:
            b.stop()
    finally:
        a.stop()

    texts = tg.texts(CHAT)
    assert [count(texts, f"answer msg-{n}") for n in (1, 2, 3)] == [1, 1, 1]
    assert texts.index("answer msg-1") < texts.index("answer msg-2") < texts.index("answer msg-3")
    assert count(texts, ELSEWHERE) == 1
    conversations = await rows(shared_url, "SELECT id FROM conversation")
    turns = await rows(shared_url, "SELECT request, status FROM turn ORDER BY position")
    assert len(conversations) == 1
    assert turns == [("msg-1", "done"), ("msg-2", "done"), ("msg-3", "done")]
    assert len(fake.requests) == 3  # no message was run twice


async def test_the_pace_per_chat_and_overall_holds_across_both_nodes(
    tmp_path: Path, fake: FakeOpenAI, tg: FakeTelegram, shared_url: str
) -> None:
    chats = [7101, 7102, 7103]
    pace = {
        "COVE_TELEGRAM_CHAT_RATE_PER_S": "2",  # a call every 0.5 s into one chat
        "COVE_TELEGRAM_RATE_PER_S": "5",  # a call every 0.2 s over all chats
        "COVE_TELEGRAM_EDIT_INTERVAL_S": "0.05",  # status edits as often as the pace allows
    }
    debug = ("--log-level", "DEBUG")  # each node logs the slot of each call it sends
    a = BotNode(tmp_path, "a", fake, tg, shared_url, chats, args=debug, **pace)
    try:
        b = BotNode(tmp_path, "b", fake, tg, shared_url, chats, args=debug, **pace)
        try:
            began = time.monotonic()
            marks = itertools.count(1)
            deliveries = []
            for chat in chats:  # each chat gets a message on each node, all at once
                for node in (a, b):
                    update = tg.text_update(chat, f"msg-{next(marks)}")
                    deliveries.append(node.deliver(update))
            await asyncio.gather(*deliveries)
            expected = {f"answer msg-{n}" for n in range(1, 7)}
            await tg.wait_for(
                lambda: expected <= {t for chat in chats for t in tg.texts(chat)}, timeout=120
            )
        finally:
            b.stop()
    finally:
        a.stop()

    # The pace is the slots the nodes took together (by the store's clock): exact. When a call
    # arrives also depends on how soon its node, sharing two cores with the other and their
    # sandboxes, sends it once its slot comes; so arrivals are judged on average.
    slots = [
        record
        for node in (a, b)
        for record in node.process.records()
        if record["msg"] == "Bot API call in its slot"
    ]
    calls = [c for c in tg.calls if c.at >= began and "chat_id" in c.params]
    in_chat = [c for c in calls if c.method != "sendChatAction"]
    for chat in chats:
        arrived = [c for c in in_chat if c.params["chat_id"] == chat]
        assert len(arrived) >= 4  # a status message and an answer per turn, at least
        taken = sorted(
            s["slot_at"] for s in slots if s["chat"] == chat and s["method"] != "sendChatAction"
        )
        assert len(taken) >= len(arrived)  # every call into the chat took a slot
        assert min(gaps(taken)) >= 1 / 2 - 1e-6, (chat, taken)
    assert min(gaps(sorted(s["slot_at"] for s in slots))) >= 1 / 5 - 1e-6
    times = [c.at for c in calls]
    assert (len(times) - 1) / (max(times) - min(times)) <= 5 * 1.05
    texts = [t for chat in chats for t in tg.texts(chat)]
    assert all(count(texts, answer) == 1 for answer in expected)
    turns = await rows(shared_url, "SELECT request FROM turn")
    assert sorted(request for (request,) in turns) == sorted(f"msg-{n}" for n in range(1, 7))


async def test_an_update_posted_twice_through_the_proxy_reaches_both_nodes_and_runs_once(
    tmp_path: Path, fake: FakeOpenAI, tg: FakeTelegram, shared_url: str
) -> None:
    # Telegram posts an update again when it saw no answer in time; behind the proxy the
    # second post reaches the other node (round robin), which must drop it.
    binary = require_haproxy()
    a = BotNode(tmp_path, "a", fake, tg, shared_url, [CHAT])
    try:
        b = BotNode(tmp_path, "b", fake, tg, shared_url, [CHAT])
        try:
            ports = (a.process.port, b.process.port)
            with Proxy(binary, ports, (a.hook_port, b.hook_port)) as proxy:
                proxy.wait_until_up()
                update = tg.text_update(CHAT, "msg-1")
                posts = []
                while {p.headers["x-cove-node"] for p in posts} != {"hook1", "hook2"}:
                    assert len(posts) < 20, "the proxy never sent a post to both nodes"
                    posts.append(await post_update(proxy.telegram_url, update))
                assert {post.status_code for post in posts} == {200}
                await tg.wait_for(lambda: "answer msg-1" in tg.texts(CHAT), timeout=60)
                answer = await post_update(proxy.telegram_url, tg.text_update(CHAT, "msg-2"))
                assert answer.status_code == 200
                await tg.wait_for(lambda: "answer msg-2" in tg.texts(CHAT), timeout=60)
        finally:
            b.stop()
    finally:
        a.stop()

    texts = tg.texts(CHAT)
    assert [count(texts, f"answer msg-{n}") for n in (1, 2)] == [1, 1]
    turns = await rows(shared_url, "SELECT request, status FROM turn ORDER BY position")
    assert turns == [("msg-1", "done"), ("msg-2", "done")]
    assert len(fake.requests) == 2
