"""A rolling restart loses no turn: a node told to stop (SIGTERM) leaves the rotation
(``/readyz`` 503), refuses new turns with a clear 503, lets its running turn finish, exits 0 and
gives the conversation back, which the other node continues. A turn that outlasts the grace
period is cancelled and its lease handed back at once."""

from __future__ import annotations

import asyncio
import signal
import threading
from pathlib import Path

import pytest

from tests.fakes.openai_server import FakeOpenAI, Fault
from tests.nodes.cluster import (
    client,
    finished,
    model_calls,
    nodes,
    passing,
    rows,
    send,
    start_node,
)
from tests.scripted import reply

pytestmark = pytest.mark.slow  # two cove serve processes

FIRST = "compute x, then answer"


async def test_a_draining_node_finishes_its_turn_refuses_new_ones_and_exits_0(
    tmp_path: Path, fake_openai: FakeOpenAI, shared_url: str
) -> None:
    opened = threading.Event()
    fake_openai.add_faults(passing(), Fault.gate(opened))
    fake_openai.add_replies(reply(["x = 6 * 7"]), reply(None, "x is {{x}}"))
    a = start_node(tmp_path, "a", fake_openai, shared_url)
    b = start_node(tmp_path, "b", fake_openai, shared_url)
    async with nodes(a, b), client(a.base_url) as on_a, client(b.base_url) as on_b:
        cid = (await on_a.post("/api/conversations", json={})).json()["id"]
        assert (await send(on_a, cid, FIRST)).status_code == 202
        await model_calls(fake_openai, 2)  # the turn is in its second iteration

        a.proc.send_signal(signal.SIGTERM)
        while (ready := await on_a.get("/readyz")).status_code == 200:  # noqa: ASYNC110
            await asyncio.sleep(0.05)
        assert ready.status_code == 503 and ready.json()["status"] == "stopping"
        refused = await send(on_a, cid, "one more")
        assert refused.status_code == 503 and refused.headers["retry-after"]
        assert "shutting down" in refused.json()["error"]
        busy = await send(on_b, cid, "elsewhere")  # A still runs the conversation's turn
        assert busy.status_code == 409

        opened.set()  # the model answers: the turn ends within the grace period
        assert await asyncio.to_thread(a.proc.wait, 60) == 0

        fake_openai.add_replies(reply(["y = x + 1"], "y is {{y}}"))
        assert (await send(on_b, cid, "and then?")).status_code == 202
        assert (await finished(on_b, cid, "and then?"))["answer"] == "y is 43"

    turns = await rows(
        shared_url,
        "SELECT request, status, answer FROM turn WHERE conversation_id = $1 ORDER BY position",
        cid,
    )
    assert turns == [(FIRST, "done", "x is 42"), ("and then?", "done", "y is 43")]


async def test_a_turn_that_outlasts_the_grace_is_cancelled_and_its_lease_handed_back(
    tmp_path: Path, fake_openai: FakeOpenAI, shared_url: str
) -> None:
    opened = threading.Event()  # never opened
    fake_openai.add_faults(passing(), Fault.gate(opened))
    fake_openai.add_replies(reply(["x = 6 * 7"]))
    # A lease far longer than the test: only its hand-back lets B take the conversation.
    extra = {"COVE_LEASE_TTL_S": "600", "COVE_SHUTDOWN_GRACE_S": "1"}
    a = start_node(tmp_path, "a", fake_openai, shared_url, **extra)
    b = start_node(tmp_path, "b", fake_openai, shared_url, **extra)
    async with nodes(a, b), client(a.base_url) as on_a, client(b.base_url) as on_b:
        cid = (await on_a.post("/api/conversations", json={})).json()["id"]
        assert (await send(on_a, cid, FIRST)).status_code == 202
        await model_calls(fake_openai, 2)
        a.proc.send_signal(signal.SIGTERM)
        assert await asyncio.to_thread(a.proc.wait, 60) == 0

        fake_openai.add_replies(reply(["y = x + 1"], "y is {{y}}"))
        assert (await send(on_b, cid, "and then?")).status_code == 202
        assert (await finished(on_b, cid, "and then?"))["answer"] == "y is 43"

    turns = await rows(
        shared_url,
        "SELECT request, status FROM turn WHERE conversation_id = $1 ORDER BY position",
        cid,
    )
    assert turns == [(FIRST, "cancelled"), ("and then?", "done")]
