"""``cove mcp`` over stdio, driven by the SDK's own client as a subprocess: state across calls
and restarts, errors, a cancelled call, two clients at once, another process watching, and
``ask_cove`` against the fake OpenAI endpoint."""

from __future__ import annotations

import asyncio
import json
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from cove.config import Settings
from cove.conversation import Conversations
from cove.events import BlockStarted, TurnFinished
from tests.channels.mcp.helpers import SPIN, Spinning, data, mcp_env, run, stdio, text, until
from tests.fakes.openai_server import FakeOpenAI
from tests.scripted import reply

pytestmark = pytest.mark.slow  # cove mcp processes, each with its sandbox workers


async def test_state_is_kept_across_calls_and_a_restart_of_the_server(tmp_path: Path) -> None:
    env = mcp_env(tmp_path)
    async with stdio(env) as client:
        cid = (await run(client, "counts = {'a': 1}"))["conversation_id"]
        await run(client, "counts['b'] = 2", cid)
    async with stdio(env) as client:  # a new server process on the same database
        again = await run(client, "counts['c'] = 3\nsorted(counts.items())", cid)
        assert again["value"] == "[('a', 1), ('b', 2), ('c', 3)]"
        versions = await client.call_tool(
            "variable_versions", {"conversation": cid, "name": "counts"}
        )
        assert [v["version"] for v in data(versions)["versions"]] == [1, 2, 3]


async def test_a_cancelled_call_stops_its_block_while_another_process_watches(
    tmp_path: Path,
) -> None:
    env = mcp_env(tmp_path)
    async with stdio(env) as client:
        cid = (await run(client, "spins = 0"))["conversation_id"]
        # Another process follows the conversation, as cove watch or the web would.
        async with (
            Conversations.open(Settings.load(env=env), read_only=True) as other,
            other.watch(cid) as watched,
        ):
            spinning = Spinning(client, cid)
            await spinning.running()
            started = [e async for e in until(watched, BlockStarted)][-1]
            assert isinstance(started, BlockStarted) and "spins += 1" in started.code
            await spinning.cancel()
            ended = [e async for e in until(watched, TurnFinished)][-1]
            assert isinstance(ended, TurnFinished) and ended.status == "cancelled"

        failed = await client.call_tool("run_python", {"code": "spins / 0", "conversation": cid})
        assert failed.is_error and "ZeroDivisionError" in text(failed)
        assert (await run(client, "spins + 1", cid))["value"] == "1"
        transcript = await client.read_resource(f"cove://conversations/{cid}")
        document = transcript.contents[0].text  # type: ignore[union-attr]
        assert "## Turn 2 — cancelled" in document and "CancelledError" in document


async def test_two_clients_on_two_conversations_at_once(tmp_path: Path) -> None:
    env = mcp_env(tmp_path)
    async with stdio(env) as first, stdio(env) as second:
        one = (await run(first, "who = 'first'\nspins = 0"))["conversation_id"]
        two = (await run(second, "who = 'second'"))["conversation_id"]
        spinning = Spinning(first, one)
        await spinning.running()
        # While the first client's block runs, the second works in its own conversation.
        for n in range(3):
            assert (await run(second, f"who + '{n}'", two))["value"] == f"'second{n}'"
        await spinning.cancel()
        assert (await run(first, "who", one))["value"] == "'first'"
        both = await asyncio.gather(run(first, "who", one), run(second, "who", two))
        assert [b["value"] for b in both] == ["'first'", "'second'"]


async def test_ask_cove_over_stdio_reports_each_iteration(tmp_path: Path) -> None:
    with FakeOpenAI() as fake:
        fake.add_replies(reply(["n = len('sandbox')"]), reply(None, "It has {{n}} letters."))
        async with stdio(mcp_env(tmp_path, fake)) as client:
            steps: list[str] = []

            async def progress(value: float, total: float | None, message: str | None) -> None:
                steps.append(message or "")

            result = await client.call_tool(
                "ask_cove", {"question": "How long is 'sandbox'?"}, progress_callback=progress
            )
        assert not result.is_error, text(result)
        assert data(result)["answer"] == "It has 7 letters."
        assert [s for s in steps if "block" not in s][:2] == [
            "iteration 1 of 10",
            "iteration 2 of 10",
        ]


def test_sigterm_mid_call_records_the_turn_cancelled_and_exits_0(tmp_path: Path) -> None:
    """What a client's shutdown does (it closes stdin or terminates the server)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "cove", "mcp"],
        env=mcp_env(tmp_path),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None

    def send(message: dict[str, object]) -> None:
        assert proc.stdin is not None
        proc.stdin.write(json.dumps({"jsonrpc": "2.0", **message}) + "\n")
        proc.stdin.flush()

    hello = {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"},
    }
    send({"id": 1, "method": "initialize", "params": hello})
    assert json.loads(proc.stdout.readline())["result"]["serverInfo"]["name"] == "cove"
    send({"method": "notifications/initialized"})
    spin = {"code": SPIN.replace("spins += 1", "pass"), "timeout_s": 600}
    call = {"name": "run_python", "arguments": spin, "_meta": {"progressToken": 1}}
    send({"id": 2, "method": "tools/call", "params": call})
    for line in proc.stdout:  # the block runs once the server says so
        if "running block" in line:
            break
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "Traceback" not in err
    with sqlite3.connect(tmp_path / "cove.db") as db:
        assert db.execute("SELECT position, status FROM turn").fetchall() == [(1, "cancelled")]
