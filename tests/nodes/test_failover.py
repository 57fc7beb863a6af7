"""Two ``cove serve`` nodes over one PostgreSQL database, one of them lost mid-turn.

Killed (SIGKILL): the turn it ran is recorded ``interrupted``, the other node continues the
conversation with every committed iteration and variable, nothing runs twice, and a page
watching on the other node followed the dead node's turn live. Stalled (SIGSTOP, then SIGCONT
after the other node took over): the late writes of the stalled node are refused by the fence.
"""

from __future__ import annotations

import asyncio
import signal
import threading
from pathlib import Path

import pytest

from tests.fakes.openai_server import FakeOpenAI, Fault
from tests.nodes.cluster import (
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
from tests.scripted import reply

pytestmark = pytest.mark.slow  # two cove serve processes

LEASE_TTL_S = "2"
FIRST = "compute x, then think for long"


def script_first_turn(fake: FakeOpenAI, opened: threading.Event) -> None:
    """The first turn: an iteration that sets ``x``, then a model call held by ``opened``."""
    fake.add_faults(passing(), Fault.gate(opened))
    fake.add_replies(reply(["x = 6 * 7"]))


def refused_on_a(line: str) -> bool:
    """A's log line saying its turn ended on ``Busy``: a write of it was refused (losing the
    lease at renewal only asks the turn to stop; recording that stop is a write, fenced too)."""
    return '"turn refused"' in line and '"Busy"' in line


async def blocks(url: str, code: str) -> int:
    """How many blocks of ``code`` the store holds."""
    return len(await rows(url, "SELECT id FROM block WHERE code = $1", code))


async def test_a_node_killed_mid_turn_loses_nothing_and_its_turn_continues_elsewhere(
    tmp_path: Path, fake_openai: FakeOpenAI, shared_url: str
) -> None:
    opened = threading.Event()  # never opened: the first turn's second model call hangs
    script_first_turn(fake_openai, opened)
    extra = {"COVE_LEASE_TTL_S": LEASE_TTL_S}
    a = start_node(tmp_path, "a", fake_openai, shared_url, **extra)
    b = start_node(tmp_path, "b", fake_openai, shared_url, **extra)
    async with nodes(a, b), client(a.base_url) as on_a, client(b.base_url) as on_b:
        cid = (await on_a.post("/api/conversations", json={})).json()["id"]
        watcher = Watcher(on_b, cid)  # a page on node B
        try:
            assert (await send(on_a, cid, FIRST)).status_code == 202
            await model_calls(fake_openai, 2)  # iteration 1 committed, iteration 2 waits
            # B followed A's turn live: its first iteration's block, while the turn still runs.
            block = await watcher.wait_for("block_finished", iteration=1)
            assert block["block"]["code"] == "x = 6 * 7" and block["block"]["ok"]
            assert (await send(on_b, cid, "too soon")).status_code == 409  # A holds the lease

            await asyncio.to_thread(kill, a)
            ended = await watcher.wait_for("turn_finished")
            assert ended["status"] == "interrupted"
        finally:
            await watcher.aclose()

        fake_openai.add_replies(reply(["y = x + 1"], "y is {{y}}"))
        assert (await send(on_b, cid, "and then?")).status_code == 202
        second = await finished(on_b, cid, "and then?")
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
    assert iterations == [(1, 0, "ok"), (1, 1, "interrupted"), (2, 0, "ok")], iterations
    assert await blocks(shared_url, "x = 6 * 7") == 1  # committed once, never run again
    assert await blocks(shared_url, "y = x + 1") == 1


async def test_a_stalled_node_that_wakes_after_a_takeover_writes_nothing(
    tmp_path: Path, fake_openai: FakeOpenAI, shared_url: str
) -> None:
    opened = threading.Event()
    script_first_turn(fake_openai, opened)
    extra = {"COVE_LEASE_TTL_S": LEASE_TTL_S}
    a = start_node(tmp_path, "a", fake_openai, shared_url, **extra)
    b = start_node(tmp_path, "b", fake_openai, shared_url, **extra)
    async with nodes(a, b), client(a.base_url) as on_a, client(b.base_url) as on_b:
        cid = (await on_a.post("/api/conversations", json={})).json()["id"]
        assert (await send(on_a, cid, FIRST)).status_code == 202
        await model_calls(fake_openai, 2)
        a.proc.send_signal(signal.SIGSTOP)  # alive, but silent: its lease lapses
        try:
            fake_openai.add_replies(reply(["y = x + 1"], "y is {{y}}"))
            while (sent := await send(on_b, cid, "and then?")).status_code == 409:  # noqa: ASYNC110
                await asyncio.sleep(0.2)  # A's lease has not lapsed yet (another process's)
            assert sent.status_code == 202
            second = await finished(on_b, cid, "and then?")
            assert second["status"] == "done" and second["answer"] == "y is 43"

            # A wakes up and its model call returns: everything it tries to write is refused.
            fake_openai.add_replies(reply(["late = 1"], "too late"))
            opened.set()
        finally:
            a.proc.send_signal(signal.SIGCONT)
        # Its turn ends on a refused write, and nothing of it reaches the store.
        await asyncio.to_thread(a.wait_for, refused_on_a, 60)
        assert (await on_a.get("/healthz")).status_code == 200  # A itself carries on

    turns = await rows(
        shared_url,
        "SELECT request, status, answer FROM turn WHERE conversation_id = $1 ORDER BY position",
        cid,
    )
    assert turns == [(FIRST, "interrupted", None), ("and then?", "done", "y is 43")]
    assert await blocks(shared_url, "late = 1") == 0
    names = await rows(
        shared_url,
        "SELECT DISTINCT name FROM var_version WHERE conversation_id = $1 ORDER BY name",
        cid,
    )
    assert names == [("x",), ("y",)]
