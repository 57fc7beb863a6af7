"""MCP over streamable HTTP at ``/mcp`` of a real ``cove serve --mcp``, driven by the SDK's own
client: state across calls and a restart of the service, errors, a cancelled call, two clients
at once; and the service's login and Host/Origin checks in front of it."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.channels.mcp.helpers import TOKEN, Spinning, data, mcp_env, over_http, run, text
from tests.channels.serve.process import ServeProcess
from tests.fakes.openai_server import FakeOpenAI
from tests.scripted import reply

pytestmark = pytest.mark.slow  # cove serve processes

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"},
    },
}
ACCEPT = {"Accept": "application/json, text/event-stream"}


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


def serve(tmp_path: Path, fake: FakeOpenAI, *args: str) -> ServeProcess:
    return ServeProcess(mcp_env(tmp_path, fake), "--mcp", *args)


async def test_state_is_kept_across_calls_and_a_restart_of_the_service(
    tmp_path: Path, fake: FakeOpenAI
) -> None:
    service = serve(tmp_path, fake)
    try:
        async with over_http(f"{service.base_url}/mcp") as client:
            cid = (await run(client, "notes = ['one']"))["conversation_id"]
            await run(client, "notes.append('two')", cid)
    finally:
        service.stop()
    service = serve(tmp_path, fake)
    try:
        async with over_http(f"{service.base_url}/mcp") as client:
            again = await run(client, "notes.append('three')\nnotes", cid)
            assert again["value"] == "['one', 'two', 'three']"
            assert again["turn"] == 3
    finally:
        service.stop()


async def test_errors_a_cancelled_call_and_two_clients_at_once(
    tmp_path: Path, fake: FakeOpenAI
) -> None:
    fake.add_replies(reply(["answer = spins + 40"]), reply(None, "{{answer}}"))
    service = serve(tmp_path, fake, "--web")
    url = f"{service.base_url}/mcp"
    try:
        async with over_http(url) as first, over_http(url) as second:
            one = (await run(first, "spins = 2"))["conversation_id"]
            two = (await run(second, "other = 'b'"))["conversation_id"]
            spinning = Spinning(first, one)
            await spinning.running()
            # The second client works on while the first one's block spins.
            assert (await run(second, "other * 3", two))["value"] == "'bbb'"
            await spinning.cancel()

            failed = await first.call_tool("run_python", {"code": "spins[0]", "conversation": one})
            assert failed.is_error and "TypeError" in text(failed)
            asked = await first.call_tool("ask_cove", {"question": "add 40", "conversation": one})
            assert data(asked)["answer"] == "42"
            both = await asyncio.gather(run(first, "spins", one), run(second, "other", two))
            assert [b["value"] for b in both] == ["2", "'b'"]

        # The web channel of the same service shows the MCP turns, the cancelled one included.
        async with service.client(timeout=30) as web:
            exported = await web.get(f"/api/conversations/{one}/export?format=json")
            turns = exported.json()["turns"]
            assert [t["status"] for t in turns] == ["done", "cancelled", "failed", "done", "done"]
            assert [t["model"] for t in turns] == [None, None, None, "fake-model", None]
    finally:
        service.stop()


async def test_the_login_and_the_host_and_origin_checks_stand_in_front(
    tmp_path: Path, fake: FakeOpenAI
) -> None:
    service = serve(tmp_path, fake)
    port = service.port
    try:
        async with httpx.AsyncClient(base_url=service.base_url, timeout=30) as http:
            body = json.dumps(INITIALIZE)
            plain = {**ACCEPT, "Content-Type": "application/json"}
            bearer = {**plain, "Authorization": f"Bearer {TOKEN}"}

            no_token = await http.post("/mcp", content=body, headers=plain)
            assert no_token.status_code == 401
            wrong_token = {**plain, "Authorization": "Bearer not-the-token"}
            wrong = await http.post("/mcp", content=body, headers=wrong_token)
            assert wrong.status_code == 401
            foreign_host = await http.post(
                "/mcp", content=body, headers={**bearer, "Host": f"evil.example:{port}"}
            )
            assert foreign_host.status_code == 403
            rebound = await http.post(
                "/mcp", content=body, headers={**bearer, "Host": f"127.0.0.1.evil.example:{port}"}
            )
            assert rebound.status_code == 403
            foreign_origin = await http.post(
                "/mcp", content=body, headers={**bearer, "Origin": "http://evil.example"}
            )
            assert foreign_origin.status_code == 403

            same_origin = {**bearer, "Origin": f"http://127.0.0.1:{port}"}
            accepted = await http.post("/mcp", content=body, headers=same_origin)
            assert accepted.status_code == 200, accepted.text
        with pytest.raises(Exception):  # noqa: B017 - the SDK's client cannot get in either
            async with over_http(f"{service.base_url}/mcp", token=None) as client:
                await client.list_tools()
    finally:
        service.stop()
