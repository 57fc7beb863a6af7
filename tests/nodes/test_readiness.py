"""``/readyz`` follows the database: a node whose PostgreSQL server stops is not ready (and
says why), stays alive (``/healthz``), and is ready again — and runs turns — once the server is
back."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest

from tests.fakes.openai_server import FakeOpenAI
from tests.nodes.cluster import client, finished, nodes, send, start_node
from tests.postgres_server import PostgresServer
from tests.scripted import reply

pytestmark = pytest.mark.slow  # a node and a PostgreSQL server of its own


async def readiness(http: httpx.AsyncClient, status: int) -> httpx.Response:
    """Poll ``/readyz`` until it answers ``status`` (bounded by the test's timeout)."""
    while (answer := await http.get("/readyz")).status_code != status:  # noqa: ASYNC110
        await asyncio.sleep(0.1)  # another process's state
    return answer


async def test_a_node_that_loses_its_database_is_not_ready_until_it_is_back(
    tmp_path: Path, fake_openai: FakeOpenAI, private_postgres: PostgresServer
) -> None:
    fake_openai.respond_with(reply(["x = 6 * 7"], "x is {{x}}"))
    server = private_postgres
    url = server.database()
    node = start_node(tmp_path, "a", fake_openai, url)
    async with (
        nodes(node),
        client(node.base_url) as http,
        httpx.AsyncClient(base_url=node.base_url, timeout=60) as anonymous,
    ):
        assert (await anonymous.get("/readyz")).json() == {"status": "ready"}
        cid = (await http.post("/api/conversations", json={})).json()["id"]

        await asyncio.to_thread(server.halt)
        down = await readiness(anonymous, 503)
        assert down.json() == {"status": "not ready", "failing": ["database"]}
        detailed = (await http.get("/readyz")).json()
        database = next(c for c in detailed["checks"] if c["name"] == "database")
        assert "cannot reach the PostgreSQL database" in database["detail"]
        assert (await anonymous.get("/healthz")).status_code == 200  # alive all the same

        await asyncio.to_thread(server.resume)
        assert (await readiness(anonymous, 200)).json() == {"status": "ready"}
        assert (await send(http, cid, "and now?")).status_code == 202
        ended = await finished(http, cid, "and now?")
        assert ended["status"] == "done" and ended["answer"] == "x is 42"
