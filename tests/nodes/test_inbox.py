"""Telegram updates a node acknowledged are never lost: kept in the store before the webhook's
200, they are run once by another node when the one that took them dies (``kill -9``) or
stops (SIGTERM), or by the same node restarted.

The seams are held calls, not sleeps: a model call the fake endpoint holds keeps the first
turn running (so the second message waits behind it), and a ``getFile`` the fake Bot API holds
keeps a document's download, before its turn, from ending.
"""

from __future__ import annotations

import asyncio
import signal
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from cove.channels.telegram.handlers import ELSEWHERE
from tests.fakes.openai_server import FakeOpenAI, Fault
from tests.fakes.telegram_server import FakeTelegram
from tests.nodes.cluster import kill, model_calls, rows
from tests.nodes.proxy import Proxy, require_haproxy
from tests.nodes.telegram import BotNode, answer_by_mark, post_update

pytestmark = pytest.mark.slow  # two cove serve processes

CHAT = 7201


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        server.respond_with(answer_by_mark)
        yield server


@pytest.fixture
def tg() -> Iterator[FakeTelegram]:
    with FakeTelegram() as server:
        yield server


def count(texts: list[str], text: str) -> int:
    return sum(1 for shown in texts if shown == text)


async def turns_of(url: str) -> list[tuple[str, str]]:
    return [
        (str(request), str(status))
        for request, status in await rows(url, "SELECT request, status FROM turn ORDER BY position")
    ]


async def test_a_message_acknowledged_by_a_node_killed_before_its_turn_is_answered_once(
    tmp_path: Path, fake: FakeOpenAI, tg: FakeTelegram, shared_url: str
) -> None:
    opened = threading.Event()  # msg-1's model call lasts until its node is dead
    fake.add_faults(Fault.gate(opened))
    extra = {"COVE_LEASE_TTL_S": "2"}
    a = BotNode(tmp_path, "a", fake, tg, shared_url, [CHAT], **extra)
    try:
        b = BotNode(tmp_path, "b", fake, tg, shared_url, [CHAT], **extra)
        try:
            await a.deliver(tg.text_update(CHAT, "msg-1"))
            await model_calls(fake, 1)  # a runs msg-1's turn
            # Acknowledged (200): from here on Telegram never posts it again. It cannot run
            # before msg-1's turn ends, and a dies first.
            await a.deliver(tg.text_update(CHAT, "msg-2"))
            await asyncio.to_thread(kill, a.process)
            await tg.wait_for(lambda: "answer msg-2" in tg.texts(CHAT), timeout=90)
        finally:
            b.stop()
    finally:
        a.stop()
        opened.set()

    texts = tg.texts(CHAT)
    assert [count(texts, f"answer msg-{n}") for n in (1, 2)] == [0, 1]
    assert await turns_of(shared_url) == [("msg-1", "interrupted"), ("msg-2", "done")]
    assert len(fake.requests) == 2  # msg-1's one call, msg-2's one: nothing ran twice
    assert await rows(shared_url, "SELECT key FROM inbox") == []


async def test_an_update_the_proxy_gave_a_node_killed_after_its_200_is_answered_once(
    tmp_path: Path, fake: FakeOpenAI, tg: FakeTelegram, shared_url: str
) -> None:
    # Telegram posts to one URL; HAProxy picks the node. Whichever node acknowledged msg-2 is
    # killed while msg-1's turn still runs; the other node answers msg-2, once.
    binary = require_haproxy()
    opened = threading.Event()
    fake.add_faults(Fault.gate(opened))
    extra = {"COVE_LEASE_TTL_S": "2"}
    a = BotNode(tmp_path, "a", fake, tg, shared_url, [CHAT], **extra)
    try:
        b = BotNode(tmp_path, "b", fake, tg, shared_url, [CHAT], **extra)
        try:
            by_name = {"hook1": a, "hook2": b}
            ports = (a.process.port, b.process.port)
            with Proxy(binary, ports, (a.hook_port, b.hook_port)) as proxy:
                await asyncio.to_thread(proxy.wait_until_up)
                first = await post_update(proxy.telegram_url, tg.text_update(CHAT, "msg-1"))
                assert first.status_code == 200
                await model_calls(fake, 1)
                second = await post_update(proxy.telegram_url, tg.text_update(CHAT, "msg-2"))
                assert second.status_code == 200
                running, taker = first.headers["x-cove-node"], second.headers["x-cove-node"]
                await asyncio.to_thread(kill, by_name[taker].process)
                opened.set()  # msg-1 may finish, where its node lives
                await tg.wait_for(lambda: "answer msg-2" in tg.texts(CHAT), timeout=90)
        finally:
            b.stop()
    finally:
        opened.set()
        a.stop()

    texts = tg.texts(CHAT)
    assert count(texts, "answer msg-2") == 1
    # msg-1 ran where the proxy sent it: cut short when that node was the one killed.
    first_status = "interrupted" if running == taker else "done"
    assert count(texts, "answer msg-1") == (first_status == "done")
    assert await turns_of(shared_url) == [("msg-1", first_status), ("msg-2", "done")]
    assert len(fake.requests) == 2


async def test_a_node_killed_while_a_document_downloads_answers_it_once_when_restarted(
    tmp_path: Path, fake: FakeOpenAI, tg: FakeTelegram, shared_url: str
) -> None:
    # A lease (and claim) far longer than the test: only seeing that the holder's process is
    # gone lets the restarted node take the update over.
    extra = {"COVE_LEASE_TTL_S": "600"}
    held = tg.hold("getFile")
    update = tg.document_update(CHAT, b"a,b\n1,2\n", "data.csv", caption="msg-1 read it")
    a = BotNode(tmp_path, "a", fake, tg, shared_url, [CHAT], **extra)
    try:
        await a.deliver(update)
        await tg.wait_for(lambda: tg.calls_of("getFile"))  # downloading: no turn yet
        await asyncio.to_thread(kill, a.process)
    finally:
        held.set()
        a.stop()
    assert await turns_of(shared_url) == []

    again = BotNode(tmp_path, "a", fake, tg, shared_url, [CHAT], **extra)
    try:
        await tg.wait_for(lambda: "answer msg-1" in tg.texts(CHAT), timeout=90)
    finally:
        again.stop()

    assert count(tg.texts(CHAT), "answer msg-1") == 1
    assert await turns_of(shared_url) == [("msg-1 read it", "done")]
    assert len(tg.calls_of("getFile")) == 2 and len(fake.requests) == 1


async def test_what_a_draining_node_holds_or_receives_runs_on_the_other_node_in_order(
    tmp_path: Path, fake: FakeOpenAI, tg: FakeTelegram, shared_url: str
) -> None:
    opened = threading.Event()  # msg-1's model call waits until opened
    fake.add_faults(Fault.gate(opened))
    extra = {"COVE_SHUTDOWN_GRACE_S": "120"}
    a = BotNode(tmp_path, "a", fake, tg, shared_url, [CHAT], **extra)
    try:
        b = BotNode(tmp_path, "b", fake, tg, shared_url, [CHAT], **extra)
        try:
            await a.deliver(tg.text_update(CHAT, "msg-1"))
            await model_calls(fake, 1)
            await a.deliver(tg.text_update(CHAT, "msg-2"))  # queued behind msg-1 on a
            a.process.proc.send_signal(signal.SIGTERM)  # a drains: msg-1 may finish
            # a gave msg-2 back; b took it and waits for a's turn to end.
            await tg.wait_for(lambda: ELSEWHERE in tg.texts(CHAT), timeout=60)
            await a.deliver(tg.text_update(CHAT, "msg-3"))  # still listening, taking no turn
            opened.set()
            assert await asyncio.to_thread(a.process.proc.wait, 90) == 0
            await tg.wait_for(lambda: "answer msg-3" in tg.texts(CHAT), timeout=90)
        finally:
            b.stop()
    finally:
        opened.set()
        a.stop()

    texts = tg.texts(CHAT)
    said = f"chat: {texts}\nnode a: {a.process.lines[-40:]}\nnode b: {b.process.lines[-40:]}"
    assert [count(texts, f"answer msg-{n}") for n in (1, 2, 3)] == [1, 1, 1], said
    assert texts.index("answer msg-1") < texts.index("answer msg-2") < texts.index("answer msg-3")
    assert not [text for text in texts if "send it again" in text]
    assert await turns_of(shared_url) == [("msg-1", "done"), ("msg-2", "done"), ("msg-3", "done")]
    assert len(fake.requests) == 3
