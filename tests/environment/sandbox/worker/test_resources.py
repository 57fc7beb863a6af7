"""Resource abuse: each hostile block ends with a clear error within its timeout (plus a generous
margin for a loaded machine), another conversation keeps being served meanwhile, and the
variables from before the block come back."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from cove.config import Settings
from cove.environment.sandbox.host.client import SandboxClient
from cove.environment.sandbox.host.pool import WorkerPool
from tests.environment.conftest import Extensions, ok, run

#: A block that tells the host it runs (an extension call), then never ends.
RUNNING_THEN_SPINNING = "echo('running')\nwhile True:\n    pass"

TIMEOUT_S = 2.0
MARGIN_S = 3.0  # the issue asks for ~1 s; two shared cores get more slack

ABUSE = {
    "infinite loop": ("while True:\n    pass", "TimeoutError", True),
    "C-level sum": ("sum(range(10**12))", "TimeoutError", True),
    "huge power": ("10**10**8", "TimeoutError", True),
    "huge string": ("'a' * 10**10", "MemoryError", False),
    "huge list": ("[0] * 10**10", "MemoryError", False),
    "output flood": ("while True:\n    print('x' * 1000)", "TimeoutError", True),
    "sleep": ("import time\ntime.sleep(60)", "TimeoutError", True),
}


@pytest.mark.parametrize("name", list(ABUSE))
async def test_abuse_is_stopped_and_the_state_restored(
    name: str, pool: WorkerPool, client: SandboxClient, tmp_path: Path
) -> None:
    code, error_type, timed_out = ABUSE[name]
    await ok(client, "keep = [1, 2, 3]\ndef twice(v):\n    return 2 * v")
    bystander = await pool.acquire(workspace=tmp_path / "bystander", on_call=Extensions())
    finished_first: list[str] = []

    async def abuse() -> tuple[float, object]:
        started = time.monotonic()
        outcome = await run(client, code, timeout_s=TIMEOUT_S)
        finished_first.append("abuse")
        return time.monotonic() - started, outcome

    async def serve_bystander() -> None:
        for i in range(5):
            assert (await ok(bystander, f"{i} + 1")).result.result_preview == str(i + 1)
        finished_first.append("bystander")

    (elapsed, outcome), _ = await asyncio.gather(abuse(), serve_bystander())
    assert not outcome.result.ok  # type: ignore[attr-defined]
    assert outcome.error_type == error_type  # type: ignore[attr-defined]
    assert outcome.result.error.startswith(f"{error_type}: ")  # type: ignore[attr-defined]
    assert outcome.result.timed_out is timed_out  # type: ignore[attr-defined]
    assert outcome.restart is not None  # type: ignore[attr-defined]
    assert set(outcome.restart.restored) == {"keep", "twice"}  # type: ignore[attr-defined]
    assert elapsed < TIMEOUT_S + MARGIN_S
    if timed_out:
        assert finished_first[0] == "bystander"  # served while the abuse was running
    assert (await ok(client, "twice(len(keep))")).result.result_preview == "6"


async def test_deep_recursion_is_an_ordinary_error(client: SandboxClient) -> None:
    await ok(client, "keep = 1")
    pid = client.pid
    outcome = await run(client, "def down(n):\n    return down(n + 1)\ndown(0)")
    assert outcome.error_type == "RecursionError"
    assert outcome.result.error is not None and outcome.result.error.endswith("(line 2)")
    assert outcome.restart is None and client.pid == pid


async def test_deeply_nested_values_are_opaque_not_fatal(client: SandboxClient) -> None:
    outcome = await ok(client, "deep = []\nfor i in range(100000):\n    deep = [deep]")
    assert ("deep", "opaque") in [(c.name, c.kind) for c in outcome.changes]
    assert not (await run(client, "repr(deep)")).result.ok  # RecursionError, caught


async def test_deeply_nested_code_is_a_block_error(client: SandboxClient) -> None:
    outcome = await run(client, "x = " + "(" * 5000 + "1" + ")" * 5000)
    assert not outcome.result.ok and outcome.error_type in {"SyntaxError", "RecursionError"}
    assert (await ok(client, "2 + 2")).result.result_preview == "4"


async def test_a_bounded_output_flood_is_capped(client: SandboxClient) -> None:
    outcome = await ok(client, "for i in range(100000):\n    print('y' * 100)\n'done'")
    assert outcome.result.result_preview == "'done'"
    assert outcome.result.stdout.endswith("[… output cut at 500 chars]\n")


@pytest.mark.slow
async def test_the_cpu_limit_kills_the_worker_and_state_survives(tmp_path: Path) -> None:
    settings = Settings.load(env={}, data_dir=tmp_path, worker_cpu_s=1).sandbox
    workers = WorkerPool(settings, size=0)
    try:
        sandbox = await workers.acquire(workspace=tmp_path / "w", on_call=Extensions())
        await ok(sandbox, "keep = 'safe'")
        outcome = await run(sandbox, "while True:\n    pass", timeout_s=30.0)
        assert (
            outcome.result.error == "SandboxError: worker died (signal 24: CPU time limit reached)"
        )
        assert outcome.restart is not None and outcome.restart.reason == "crash"
        assert (await ok(sandbox, "keep")).result.result_preview == "'safe'"
    finally:
        await workers.aclose()


async def test_a_kill_stops_a_running_block_at_once(
    client: SandboxClient, extensions: Extensions
) -> None:
    await ok(client, "keep = 1")
    task = asyncio.create_task(run(client, RUNNING_THEN_SPINNING, timeout_s=60.0))
    await asyncio.wait_for(extensions.called.wait(), timeout=60)  # the block runs
    started = time.monotonic()
    await client.kill()
    outcome = await task
    assert time.monotonic() - started < 10.0
    assert outcome.error_type == "CancelledError" and not outcome.result.timed_out
    assert outcome.restart is not None and outcome.restart.reason == "killed"
    assert (await ok(client, "keep")).result.result_preview == "1"


async def test_cancelling_execute_kills_the_block(
    client: SandboxClient, extensions: Extensions
) -> None:
    await ok(client, "keep = 2")
    task = asyncio.create_task(run(client, RUNNING_THEN_SPINNING, timeout_s=60.0))
    await asyncio.wait_for(extensions.called.wait(), timeout=60)  # the block runs
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    outcome = await ok(client, "keep")
    assert outcome.result.result_preview == "2"
    assert outcome.restart is not None and outcome.restart.reason == "killed"


async def test_an_extension_call_during_a_timeout_is_abandoned(
    pool: WorkerPool, tmp_path: Path
) -> None:
    release = asyncio.Event()
    cancelled: list[str] = []

    async def hang(name: str, args: list[object], kwargs: dict[str, object]) -> object:
        try:
            await release.wait()
        except asyncio.CancelledError:
            cancelled.append(name)
            raise
        return None

    sandbox = await pool.acquire(workspace=tmp_path / "w", on_call=hang)
    await sandbox.configure(functions=["wait_forever"], constants={})
    await ok(sandbox, "keep = 3")
    outcome = await run(sandbox, "wait_forever()", timeout_s=1.0)
    assert outcome.result.timed_out and cancelled == ["wait_forever"]
    assert (await ok(sandbox, "keep")).result.result_preview == "3"
