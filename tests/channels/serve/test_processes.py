"""``cove serve --processes 2`` as real processes: each conversation's turns run in its home
process (its sandbox stays warm), watchers follow a turn from either process, a killed process
is restarted and its conversation goes on, SIGTERM drains both, and the private sockets let
no one in without the login.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import stat
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import httpx
import pytest

from cove.channels.serve.affinity import MAX_FORWARD_BYTES, home_of
from tests.channels.serve.process import ServeProcess, serve_env
from tests.channels.serve.test_serve_process import metric, sse
from tests.fakes.openai_server import FakeOpenAI

pytestmark = pytest.mark.slow  # cove serve and its processes

_CODE = re.compile(r"<<(.+?)>>", re.S)


def _run_the_code(body: dict[str, Any]) -> Mapping[str, Any]:
    """The model's reply: run the code the request carries between ``<<`` and ``>>``, answer
    with ``p`` (the worker's pid in most turns)."""
    code = _CODE.findall(body["messages"][1]["content"])[-1]
    return {"thinking": "t", "code": [code], "answer": "p={{p}}"}


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        server.respond_with(_run_the_code)
        yield server


def start(tmp_path: Path, fake: FakeOpenAI, *args: str) -> ServeProcess:
    env = serve_env(tmp_path, fake) | {"COVE_SERVE_PROCESSES": "2"}
    return ServeProcess(env, "--web", *args)


#: A generator cannot be stored: only the live worker that made it can advance it.
LIVE = "<<g = (i for i in range(100)); p = next(g)>>"
STILL_LIVE = "<<p = next(g)>>"


async def conversations_at_each_home(service: ServeProcess, each: int) -> list[str]:
    """New conversations, ``each`` of them at home in each of the two processes (a process
    makes its conversations at home in it: each is made on a new connection, which either
    process may take)."""
    homes: dict[int, list[str]] = {0: [], 1: []}
    for _ in range(200):
        if min(len(ids) for ids in homes.values()) >= each:
            return homes[0] + homes[1]
        async with service.client(timeout=60) as client:
            cid = (await client.post("/api/conversations", json={})).json()["id"]
        if len(homes[home_of(cid, 2)]) < each:
            homes[home_of(cid, 2)].append(cid)
    raise AssertionError(f"200 connections did not reach both processes: {homes}")


async def turn(service: ServeProcess, cid: str, text: str, after: int | None = None) -> Any:
    """Send ``text`` on a connection of its own and watch the turn to its end on another;
    returns the ``turn_finished`` event."""
    async with service.client(timeout=120) as watcher, service.client(timeout=120) as sender:
        watching = asyncio.create_task(sse(watcher, cid, after, "turn_finished"))
        sent = await sender.post(f"/api/conversations/{cid}/messages", json={"text": text})
        assert sent.status_code == 202, sent.text
        assert sent.headers["x-cove-process"] == str(home_of(cid, 2))  # who answered
        return (await watching)[-1]


def started_in(service: ServeProcess) -> list[tuple[str, int, int]]:
    """(conversation, turn, process) of every ``turn started`` record."""
    records = [json.loads(line) for line in service.lines if line.startswith("{")]
    return [
        (r["conversation_id"], r["turn"], r["process"])
        for r in records
        if r["msg"] == "turn started"
    ]


async def test_turns_run_in_their_home_process_with_their_sandbox_warm(
    tmp_path: Path, fake: FakeOpenAI
) -> None:
    service = start(tmp_path, fake)
    try:
        ids = await conversations_at_each_home(service, 2)
        firsts = await asyncio.gather(*(turn(service, cid, LIVE) for cid in ids))
        seconds = await asyncio.gather(
            *(turn(service, cid, STILL_LIVE, f["seq"]) for cid, f in zip(ids, firsts, strict=True))
        )
    finally:
        service.proc.send_signal(signal.SIGTERM)
        code = await asyncio.to_thread(service.proc.wait, 60)
        service.stop()
    assert code == 0
    assert all(f["status"] == "done" for f in [*firsts, *seconds]), [*firsts, *seconds]
    # The second turn advanced the first one's generator: the same live worker, not a new
    # worker restored from the store.
    assert [f["answer"] for f in firsts] == ["p=0"] * len(ids)
    assert [s["answer"] for s in seconds] == ["p=1"] * len(ids)
    expected = {(cid, position, home_of(cid, 2)) for cid in ids for position in (1, 2)}
    assert set(started_in(service)) == expected


async def test_a_conversation_created_with_its_first_message_runs_it_where_it_was_made(
    tmp_path: Path, fake: FakeOpenAI
) -> None:
    """The web's first message creates its conversation and starts its turn in one request,
    which goes to whichever process the kernel gives the connection: that process gives the
    conversation an id at home there, so its turns (and the page's notices) stay there."""
    service = start(tmp_path, fake)
    made: dict[str, int] = {}  # conversation -> the process that created it
    try:
        for _ in range(60):
            async with service.client(timeout=60) as client:  # a new connection each time
                created = await client.post("/api/conversations", json={"text": "<<p = 1>>"})
            assert created.status_code in (200, 201), created.text
            made[created.json()["id"]] = int(created.headers["x-cove-process"])
            if sorted(made.values()).count(0) >= 2 and sorted(made.values()).count(1) >= 2:
                break
        assert set(made.values()) == {0, 1}  # both processes created some
        for cid in made:
            async with service.client(timeout=120) as watcher:
                await sse(watcher, cid, 0, "turn_finished")
    finally:
        service.proc.send_signal(signal.SIGTERM)
        await asyncio.to_thread(service.proc.wait, 60)
        service.stop()
    assert all(home_of(cid, 2) == process for cid, process in made.items()), made
    assert set(started_in(service)) == {(cid, 1, process) for cid, process in made.items()}


async def stream_on(
    stack: contextlib.AsyncExitStack,
    service: ServeProcess,
    cid: str,
    process: int,
    after: int | None = None,
) -> httpx.Response:
    """The conversation's event stream on a connection ``process`` accepted (new connections
    until the kernel hands one to it), closed with ``stack``; the home process feeds it,
    relayed by any other."""
    query = f"?after={after}" if after is not None else ""
    for _ in range(100):
        attempt = contextlib.AsyncExitStack()
        client = await attempt.enter_async_context(service.client(timeout=120))
        url = f"/api/conversations/{cid}/events{query}"
        response = await attempt.enter_async_context(client.stream("GET", url))
        assert response.headers["x-cove-process"] == str(home_of(cid, 2))
        if response.headers.get("x-cove-via", str(home_of(cid, 2))) == str(process):
            stack.push_async_exit(attempt)
            return response
        await attempt.aclose()
    raise AssertionError(f"no connection reached process {process}")


async def follow(response: httpx.Response) -> list[dict[str, Any]]:
    """The stream's events up to the first ``turn_finished``."""
    seen: list[dict[str, Any]] = []
    async for line in response.aiter_lines():
        if line.startswith("data: "):
            seen.append(json.loads(line[6:]))
            if seen[-1]["type"] == "turn_finished":
                return seen
    raise AssertionError(f"the stream ended: {seen}")


async def events_until_the_end(response: httpx.Response) -> list[dict[str, Any]]:
    """The stream's events until it ends."""
    seen: list[dict[str, Any]] = []
    async for line in response.aiter_lines():
        if line.startswith("data: "):
            seen.append(json.loads(line[6:]))
    return seen


async def test_a_watcher_on_either_process_follows_a_turn(tmp_path: Path, fake: FakeOpenAI) -> None:
    service = start(tmp_path, fake)
    try:
        async with service.client(timeout=60) as client:
            cid = (await client.post("/api/conversations", json={})).json()["id"]
        async with contextlib.AsyncExitStack() as stack:
            streams = [await stream_on(stack, service, cid, process) for process in (0, 1)]
            following = [asyncio.create_task(follow(response)) for response in streams]
            finished = await turn(service, cid, "<<p = 7>>")
            assert finished["answer"] == "p=7"
            for seen in await asyncio.gather(*following):
                assert seen[0]["type"] == "turn_started"
                assert "block_finished" in [event["type"] for event in seen]
                assert seen[-1]["status"] == "done" and seen[-1]["answer"] == "p=7"
        # The home lets go of the relayed watcher once its client left (read on its socket).
        home_socket = owner_only(socket_folder(service))[home_of(cid, 2)]
        transport = httpx.AsyncHTTPTransport(uds=str(home_socket))
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as home:
            while metric((await home.get("/metrics")).text, "cove_watchers") != 0:  # noqa: ASYNC110
                await asyncio.sleep(0.1)  # bounded by the test's timeout
    finally:
        service.proc.send_signal(signal.SIGTERM)
        await asyncio.to_thread(service.proc.wait, 60)
        service.stop()


def process_pid(service: ServeProcess, index: int, after: int = 0) -> int:
    """The pid the supervisor logged for process ``index`` (its ``after``-th start)."""
    starts = [
        r["pid"]
        for r in service.records()
        if r["msg"] == "process started" and r["process"] == index
    ]
    return int(starts[after])


async def test_a_killed_process_is_restarted_and_its_conversation_goes_on(
    tmp_path: Path, fake: FakeOpenAI
) -> None:
    service = start(tmp_path, fake)
    try:
        async with service.client(timeout=60) as client:
            cid = (await client.post("/api/conversations", json={})).json()["id"]
        home = home_of(cid, 2)
        first = await turn(service, cid, "<<p = 41>>")
        assert first["answer"] == "p=41"

        # The home process dies in the middle of a turn's block. A watcher on the other process
        # (its stream relayed from the home) sees the stream end, reconnects after the last
        # event it saw, as a browser does, and sees the turn end interrupted.
        async with contextlib.AsyncExitStack() as stack:
            stream = await stream_on(stack, service, cid, 1 - home, first["seq"])
            watching = asyncio.create_task(events_until_the_end(stream))
            async with service.client(timeout=60) as sender:
                await sender.post(
                    f"/api/conversations/{cid}/messages",
                    json={"text": "<<import time; time.sleep(120); p = 0>>"},
                )
            await asyncio.to_thread(
                service.wait_for,
                lambda line: '"turn started"' in line and cid in line and '"turn": 2' in line,
                60,
            )
            killed = process_pid(service, home)
            os.kill(killed, signal.SIGKILL)
            seen = await watching
        last = max([first["seq"], *(event["seq"] for event in seen)])
        async with service.client(timeout=120) as watcher:
            cut = await sse(watcher, cid, last, "turn_finished")
        assert cut[-1]["type"] == "turn_finished" and cut[-1]["status"] == "interrupted"

        def restarted(line: str) -> bool:
            if '"process started"' not in line:
                return False
            record = json.loads(line)
            return bool(record["process"] == home and record["pid"] != killed)

        await asyncio.to_thread(service.wait_for, restarted, 60)
        third = await turn(service, cid, "<<p = p + 1>>", cut[-1]["seq"])
        assert third["status"] == "done" and third["answer"] == "p=42"
    finally:
        service.proc.send_signal(signal.SIGTERM)
        code = await asyncio.to_thread(service.proc.wait, 60)
        service.stop()
    assert code == 0
    assert (cid, 3, home) in started_in(service)


async def test_sigterm_drains_every_process(tmp_path: Path, fake: FakeOpenAI) -> None:
    service = start(tmp_path, fake, "--grace", "60")
    try:
        ids = await conversations_at_each_home(service, 1)
        async with service.client(timeout=60) as client:
            for cid in ids:
                sent = await client.post(
                    f"/api/conversations/{cid}/messages",
                    json={"text": "<<import time; time.sleep(2); p = 1>>"},
                )
                assert sent.status_code == 202
            for cid in ids:
                await asyncio.to_thread(
                    service.wait_for, lambda line, c=cid: '"turn started"' in line and c in line, 60
                )
            service.proc.send_signal(signal.SIGTERM)
            code = await asyncio.to_thread(service.proc.wait, 90)
    finally:
        service.stop()
    assert code == 0
    records = service.records()
    finished = {r["conversation_id"]: r["status"] for r in records if r["msg"] == "turn finished"}
    assert finished == dict.fromkeys(ids, "done")  # both ran to their end within the grace
    stopped = [r.get("process") for r in records if r["msg"] == "stopped"]
    assert sorted(stopped, key=str) == [0, 1, None]  # each process, then the supervisor
    assert records[-1]["msg"] == "stopped" and "process" not in records[-1]


def socket_folder(service: ServeProcess) -> Path:
    """The folder of the processes' unix sockets, as the supervisor logged it."""
    starting = [r for r in service.records() if r["msg"] == "starting processes"]
    return Path(starting[0]["sockets"])


def owner_only(folder: Path) -> list[Path]:
    """The processes' sockets in ``folder``, checked to be reachable by their owner only."""
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    sockets = sorted(folder.iterdir())
    assert [s.name for s in sockets] == ["0.sock", "1.sock"]
    assert all(stat.S_IMODE(s.stat().st_mode) == 0o600 for s in sockets)
    return sockets


async def test_a_forwarded_request_needs_the_login_its_own_host_and_a_bounded_body(
    tmp_path: Path, fake: FakeOpenAI
) -> None:
    token = "processes-test-token-0123456789"
    env = serve_env(tmp_path, fake) | {"COVE_SERVE_PROCESSES": "2", "COVE_WEB_TOKEN": token}
    service = ServeProcess(env, "--web")
    try:
        folder = socket_folder(service)
        sockets = owner_only(folder)

        good = {"authorization": f"Bearer {token}"}
        async with httpx.AsyncClient(base_url=service.base_url, timeout=60) as client:
            cids = [
                (await client.post("/api/conversations", json={}, headers=good)).json()["id"]
                for _ in range(6)
            ]
            bad = {"authorization": "Bearer not-the-token-at-all-000000"}
            for cid in cids:  # some of them are forwarded: the home process refuses them
                refused = await client.post(
                    f"/api/conversations/{cid}/messages", json={"text": "<<p = 1>>"}, headers=bad
                )
                assert refused.status_code == 401
                assert refused.headers["x-cove-process"] == str(home_of(cid, 2))
            foreign = ({"host": "127.0.0.1.evil.example"}, {"origin": "http://evil.example"})
            for cid in cids:  # and a foreign Host or Origin, even with the login
                for headers in foreign:
                    refused = await client.post(
                        f"/api/conversations/{cid}/messages",
                        json={"text": "<<p = 1>>"},
                        headers=good | headers,
                    )
                    assert refused.status_code == 403, (headers, refused.text)
        async with service.client(timeout=60) as session:  # the browser's way: the cookie
            for cid in cids:
                for headers in foreign:
                    refused = await session.post(
                        f"/api/conversations/{cid}/messages",
                        json={"text": "<<p = 1>>"},
                        headers=headers,
                    )
                    assert refused.status_code == 403, (headers, refused.text)
        async with httpx.AsyncClient(base_url=service.base_url, timeout=60) as client:
            huge = {"text": "x" * (MAX_FORWARD_BYTES + 10)}
            for cid in cids:
                too_big = await client.post(
                    f"/api/conversations/{cid}/messages", json=huge, headers=good
                )
                assert too_big.status_code in (413, 422)  # here, or by the home's own limit

        # Straight to a process's private socket: the login is checked there too.
        for path in sockets:
            transport = httpx.AsyncHTTPTransport(uds=str(path))
            async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as raw:
                cid = cids[0]
                url = f"/api/conversations/{cid}/messages"
                answer = await raw.post(url, json={"text": "<<p = 1>>"}, headers=bad)
                assert answer.status_code == 401
                assert (await raw.get("/api/conversations")).status_code == 401
    finally:
        service.proc.send_signal(signal.SIGTERM)
        await asyncio.to_thread(service.proc.wait, 60)
        service.stop()
    assert not any(r["msg"] == "turn started" for r in service.records())
    assert not await asyncio.to_thread(folder.exists)  # removed at the end


def rpc_result(answer: httpx.Response) -> Any:
    """The JSON-RPC result of an MCP answer (plain JSON or one server-sent event)."""
    assert answer.status_code == 200, answer.text
    text = answer.text
    if answer.headers["content-type"].startswith("text/event-stream"):
        text = next(line[6:] for line in text.splitlines() if line.startswith("data: "))
    return json.loads(text)["result"]


async def test_mcp_runs_in_process_0_and_is_reached_through_either(
    tmp_path: Path, fake: FakeOpenAI
) -> None:
    from tests.channels.mcp.helpers import TOKEN, mcp_env
    from tests.channels.mcp.test_http import ACCEPT, INITIALIZE

    env = mcp_env(tmp_path, fake) | {"COVE_SERVE_PROCESSES": "2"}
    service = ServeProcess(env, "--web", "--mcp")
    headers = {**ACCEPT, "Content-Type": "application/json", "Authorization": f"Bearer {TOKEN}"}

    async def post(body: dict[str, Any], session: str | None = None) -> httpx.Response:
        """One MCP message on a new connection (the kernel picks the process)."""
        sent = {**headers, **({"mcp-session-id": session} if session else {})}
        async with httpx.AsyncClient(base_url=service.base_url, timeout=60) as http:
            return await http.post("/mcp", content=json.dumps(body), headers=sent)

    try:
        session = (await post(INITIALIZE)).headers["mcp-session-id"]
        initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        assert (await post(initialized, session)).status_code == 202
        # The session's calls on new connections until process 1 has taken (and forwarded) one:
        # each finds the session and the conversation's state in process 0.
        call = {"jsonrpc": "2.0", "method": "tools/call", "id": 2}
        first = await post(
            call | {"params": {"name": "run_python", "arguments": {"code": "n = 0"}}}, session
        )
        cid = rpc_result(first)["structuredContent"]["conversation_id"]
        via = {first.headers.get("x-cove-via", "0")}
        count = 0
        while via != {"0", "1"} and count < 60:
            count += 1
            arguments = {"code": "n += 1\nn", "conversation": cid}
            answer = await post(
                call | {"params": {"name": "run_python", "arguments": arguments}}, session
            )
            assert answer.headers["x-cove-process"] == "0"
            assert rpc_result(answer)["structuredContent"]["value"] == str(count)
            via.add(answer.headers.get("x-cove-via", "0"))
        assert via == {"0", "1"}
    finally:
        service.proc.send_signal(signal.SIGTERM)
        await asyncio.to_thread(service.proc.wait, 60)
        service.stop()
    assert {p for _, _, p in started_in(service)} == {0}
