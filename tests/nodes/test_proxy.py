"""HAProxy (``deploy/haproxy.cfg``) in front of two nodes on one PostgreSQL database.

Every request about one conversation reaches one node, and a browser's login through the proxy
serves on every node; when that node is killed in the middle
of a turn, the next message through the proxy lands on the other node, which continues the
conversation with every variable, while a page on the other node saw the dead node's iteration
live and then the turn end ``interrupted``.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import httpx
import pytest

from tests.fakes.openai_server import FakeOpenAI, Fault
from tests.nodes.cluster import (
    TOKEN,
    Watcher,
    client,
    finished,
    kill,
    model_calls,
    nodes,
    passing,
    rows,
    send,
    start_node,
)
from tests.nodes.proxy import Proxy, require_haproxy
from tests.scripted import reply

pytestmark = pytest.mark.slow  # two cove serve processes and HAProxy

FIRST = "compute x, then think for long"


async def a_browser_session_serves_on_every_node(base_url: str) -> None:
    """A person logs in through the proxy once; pages of conversations on either node open."""
    async with httpx.AsyncClient(base_url=base_url, timeout=60) as browser:
        login = await browser.get(f"/login?token={TOKEN}")
        assert login.status_code == 303
        served: set[str] = set()
        while len(served) < 2:  # new conversations until both nodes have served one
            created = await browser.post("/api/conversations", json={})
            cid = created.json()["id"]
            page = await browser.get(f"/c/{cid}")
            assert page.status_code == 200, page.text
            served.add(page.headers["x-cove-node"])
        browser.cookies.clear()
        assert (await browser.get(f"/c/{cid}")).status_code == 401


async def test_the_proxy_keeps_a_conversation_on_one_node_and_fails_over_when_it_dies(
    tmp_path: Path, fake_openai: FakeOpenAI, shared_url: str
) -> None:
    binary = require_haproxy()
    opened = threading.Event()  # never opened: the first turn's second model call hangs
    fake_openai.add_faults(passing(), Fault.gate(opened))
    fake_openai.add_replies(reply(["x = 6 * 7"]))
    extra = {"COVE_LEASE_TTL_S": "2"}
    a = start_node(tmp_path, "a", fake_openai, shared_url, **extra)
    b = start_node(tmp_path, "b", fake_openai, shared_url, **extra)
    by_name = {"node1": a, "node2": b}
    async with nodes(a, b):
        for node in (a, b):  # ready before the proxy's first health check
            async with client(node.base_url) as direct:
                assert (await direct.get("/readyz")).status_code == 200
        with Proxy(binary, (a.port, b.port)) as proxy:
            await asyncio.to_thread(proxy.wait_until_up)
            async with client(proxy.base_url) as front:
                created = await front.post("/api/conversations", json={})
                assert created.status_code == 201, (created.status_code, created.text)
                cid = created.json()["id"]
                sent = await send(front, cid, FIRST)
                assert sent.status_code == 202
                home = sent.headers["x-cove-node"]
                for path in (
                    f"/api/conversations/{cid}",
                    f"/c/{cid}",
                    f"/api/conversations/{cid}/vars",
                ):
                    answer = await front.get(path)
                    assert answer.status_code == 200 and answer.headers["x-cove-node"] == home
                await model_calls(fake_openai, 2)  # iteration 1 committed, iteration 2 waits
                await a_browser_session_serves_on_every_node(proxy.base_url)

                running, other = by_name[home], next(n for k, n in by_name.items() if k != home)
                async with client(other.base_url) as on_other:
                    watcher = Watcher(on_other, cid)
                    try:
                        block = await watcher.wait_for("block_finished", iteration=1)
                        assert block["block"]["code"] == "x = 6 * 7"
                        await asyncio.to_thread(kill, running)
                        ended = await watcher.wait_for("turn_finished")
                        assert ended["status"] == "interrupted"
                    finally:
                        await watcher.aclose()

                fake_openai.add_replies(reply(["y = x + 1"], "y is {{y}}"))
                again = await send(front, cid, "and then?")
                assert again.status_code == 202, again.text
                assert again.headers["x-cove-node"] != home
                second = await finished(front, cid, "and then?")
                assert second["status"] == "done" and second["answer"] == "y is 43"

    turns = await rows(
        shared_url,
        "SELECT request, status FROM turn WHERE conversation_id = $1 ORDER BY position",
        cid,
    )
    assert turns == [(FIRST, "interrupted"), ("and then?", "done")]
    iterations = await rows(
        shared_url,
        "SELECT t.position, i.position, i.status FROM iteration i JOIN turn t ON t.id = i.turn_id"
        " WHERE t.conversation_id = $1 ORDER BY t.position, i.position",
        cid,
    )
    # Every committed iteration once: the dead node's first, its second cut short, B's own.
    assert iterations == [(1, 0, "ok"), (1, 1, "interrupted"), (2, 0, "ok")], iterations
    assert len(await rows(shared_url, "SELECT id FROM block WHERE code = 'x = 6 * 7'")) == 1
    names = await rows(
        shared_url,
        "SELECT DISTINCT name FROM var_version WHERE conversation_id = $1 ORDER BY name",
        cid,
    )
    assert names == [("x",), ("y",)]
