"""Sending, cancelling, the SSE event stream (with Last-Event-ID resume) and variables."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from pathlib import Path
from typing import Any

import httpx

from cove.channels.web import create_app
from cove.config import Settings
from cove.conversation import scripted_factory
from tests.channels.web.conftest import Web
from tests.channels.web.serve import login, served, sse_events
from tests.conversation.watch.watch_helpers import GatedClient
from tests.scripted import reply, settings_for


async def send_and_finish(client: httpx.AsyncClient, cid: str, text: str) -> list[dict[str, Any]]:
    """Send ``text`` and read the conversation's events until that turn finishes."""
    turns = (await client.get(f"/api/conversations/{cid}")).json()["turn_count"]
    after = (turns + 1) << 32  # just below the seq of the next turn's start
    sent = await client.post(f"/api/conversations/{cid}/messages", json={"text": text})
    assert sent.status_code == 202, sent.text
    url = f"/api/conversations/{cid}/events?after={after - 1}"
    return await sse_events(client, url, until="turn_finished")


async def test_send_streams_every_event_once_and_resumes_after_last_event_id(web: Web) -> None:
    replies = [reply(["a = 1", "a + 1"]), reply(["b = a * 10"]), reply([], "b={{b}}")]
    async with web(replies) as client:
        cid = (await client.post("/api/conversations", json={})).json()["id"]
        events = await send_and_finish(client, cid, "count")
        types = [e["type"] for e in events]
        assert types[0] == "turn_started" and types[-1] == "turn_finished"
        assert events[-1]["answer"] == "b=10"
        assert types.count("iteration_started") == 3 and types.count("block_finished") == 3
        seqs = [e["id"] for e in events]
        assert seqs == sorted(set(seqs)) and all(e["seq"] == e["id"] for e in events)
        assert {e["conversation_id"] for e in events} == {cid}

        # A browser reconnecting sends the last id it saw: it gets exactly the rest.
        middle = events[len(events) // 2]["id"]
        resumed = await sse_events(
            client,
            f"/api/conversations/{cid}/events?after=0",
            until="turn_finished",
            headers={"Last-Event-ID": str(middle)},
        )
        durable = [e["id"] for e in events if e["id"] > middle and e["type"] != "model_delta"]
        assert [e["id"] for e in resumed if e["type"] != "model_delta"] == durable

        bad = await client.get(f"/api/conversations/{cid}/events", headers={"Last-Event-ID": "x"})
        assert bad.status_code == 422
        assert (await client.get("/api/conversations/nope/events")).status_code == 404
        assert (
            await client.post("/api/conversations/nope/messages", json={"text": "hi"})
        ).status_code == 404
        empty = await client.post(f"/api/conversations/{cid}/messages", json={"text": "  "})
        assert empty.status_code == 422


async def test_variables_and_their_history(web: Web) -> None:
    replies = [reply(["n = 1"], "one"), reply(["n = n + 1"], "two")]
    async with web(replies) as client:
        cid = (await client.post("/api/conversations", json={})).json()["id"]
        await send_and_finish(client, cid, "first")
        await send_and_finish(client, cid, "second")
        current = (await client.get(f"/api/conversations/{cid}/vars")).json()["variables"]
        assert [(v["name"], v["version"], v["preview"]) for v in current] == [("n", 2, "2")]
        assert "encoded" not in current[0]
        history = (await client.get(f"/api/conversations/{cid}/vars/n")).json()["versions"]
        assert [(v["version"], v["turn"]) for v in history] == [(1, 1), (2, 2)]
        assert (await client.get(f"/api/conversations/{cid}/vars/zzz")).status_code == 404


async def test_cancel_stops_the_running_turn_and_busy_is_409(web: Web) -> None:
    model = GatedClient([reply(["x = 1"]), reply([], "never")], gates=[1])
    async with web(model.factory()) as client:
        cid = (await client.post("/api/conversations", json={})).json()["id"]
        assert (await client.post(f"/api/conversations/{cid}/cancel")).json() == {
            "cancelled": False
        }
        reading = asyncio.create_task(
            sse_events(client, f"/api/conversations/{cid}/events?after=0", until="turn_finished")
        )
        await client.post(f"/api/conversations/{cid}/messages", json={"text": "go"})
        await model.reached[1].wait()  # the second model call waits: the turn is running

        busy = await client.delete(f"/api/conversations/{cid}")
        assert busy.status_code == 409 and busy.json()["error"] == "Busy"
        running_fork = await client.post(f"/api/conversations/{cid}/fork", json={"turn": 1})
        assert running_fork.status_code == 409

        assert (await client.post(f"/api/conversations/{cid}/cancel")).json() == {"cancelled": True}
        events = await reading
        assert events[-1]["type"] == "turn_finished" and events[-1]["status"] == "cancelled"
        assert (await client.delete(f"/api/conversations/{cid}")).status_code == 204


async def test_list_events_report_a_new_conversation(web: Web) -> None:
    async with web() as client:
        reading = asyncio.create_task(
            sse_events(client, "/api/events", until="conversation_changed")
        )
        await asyncio.sleep(0)  # let the stream start before the change it must see
        created = None
        while not reading.done():  # the list watch starts asynchronously: create until seen
            created = (await client.post("/api/conversations", json={})).json()["id"]
            await asyncio.wait({reading}, timeout=0.5)
        events = await reading
        assert events[-1]["kind"] == "created"
        assert events[-1]["conversation_id"] in {created} | {
            c["id"] for c in (await client.get("/api/conversations")).json()["conversations"]
        }


async def test_send_without_a_model_endpoint_is_503_with_the_reason(tmp_path: Path) -> None:
    app = create_app(settings_for(tmp_path))  # the real OpenAI factory, no key, no base URL
    async with served(app) as url, httpx.AsyncClient(base_url=url) as client:
        await login(client)
        cid = (await client.post("/api/conversations", json={})).json()["id"]
        sent = await client.post(f"/api/conversations/{cid}/messages", json={"text": "hi"})
        assert sent.status_code == 503
        assert sent.json()["error"] == "ConfigError"
        assert "OPENAI_API_KEY" in sent.json()["message"]
        assert (await client.get(f"/api/conversations/{cid}")).json()["turn_count"] == 0


def take_lease_elsewhere(settings: Settings, cid: str) -> None:
    """What another process running a turn of ``cid`` looks like in the database."""
    with sqlite3.connect(settings.store.database) as db:
        db.execute(
            "UPDATE conversation SET lease_owner = 'elsewhere', lease_until = ? WHERE id = ?",
            (time.time() + 60, cid),
        )


async def test_a_send_refused_before_its_turn_starts_is_409(tmp_path: Path) -> None:
    settings = settings_for(tmp_path)
    app = create_app(settings, llm_factory=scripted_factory([reply([], "never")]))
    async with served(app) as url, httpx.AsyncClient(base_url=url) as client:
        await login(client)
        cid = (await client.post("/api/conversations", json={})).json()["id"]
        take_lease_elsewhere(settings, cid)
        sent = await client.post(f"/api/conversations/{cid}/messages", json={"text": "hi"})
        assert sent.status_code == 409, sent.text
        assert sent.json()["error"] == "Busy"
        message = sent.json()["message"]  # what a person reads: not the lease's internals
        assert "running a turn in this conversation" in message and "lease" not in message
        assert (await client.get(f"/api/conversations/{cid}")).json()["turn_count"] == 0


async def test_a_queued_send_refused_later_reaches_the_pages_as_a_notice(tmp_path: Path) -> None:
    settings = settings_for(tmp_path, lease_ttl_s=0.3)
    model = GatedClient([reply(["x = 1"]), reply([], "never")], gates=[1])
    app = create_app(settings, llm_factory=model.factory())
    async with served(app) as url, httpx.AsyncClient(base_url=url, timeout=30) as client:
        await login(client)
        cid = (await client.post("/api/conversations", json={})).json()["id"]
        reading = asyncio.create_task(
            sse_events(client, f"/api/conversations/{cid}/events?after=0", until="send_refused")
        )
        first = await client.post(f"/api/conversations/{cid}/messages", json={"text": "one"})
        assert first.status_code == 202 and first.json()["queued"] is False
        await model.reached[1].wait()
        second = await client.post(f"/api/conversations/{cid}/messages", json={"text": "two"})
        assert second.status_code == 202 and second.json()["queued"] is True
        # Another process takes the conversation: the running turn stops, the queued one is
        # refused when its time comes, long after its request was answered.
        take_lease_elsewhere(settings, cid)
        events = await asyncio.wait_for(reading, timeout=20)
        model.release(1)
    assert [e["request"] for e in events if e["type"] == "turn_started"] == ["one"]
    notice = events[-1]
    assert notice["request"] == "two" and notice["error"] == "Busy"
    assert "id" not in notice  # not an event of the conversation: no Last-Event-ID
