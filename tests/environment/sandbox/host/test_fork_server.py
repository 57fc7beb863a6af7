"""Workers forked from the zygote, on real processes: each in a session of its own, reaped, blind
to what an earlier worker did, and the pool carrying on (cold) when the zygote is lost."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from cove.config import SandboxSettings, Settings
from cove.environment.sandbox.host.client import SandboxClient
from cove.environment.sandbox.host.forkserver import ForkServer
from cove.environment.sandbox.host.pool import WorkerPool
from cove.errors import SandboxError
from tests.environment.conftest import Extensions, ok, read_proc, run


def parent_of(pid: int) -> int:
    """The parent process id of ``pid`` (field 4 of ``/proc/<pid>/stat``)."""
    stat = read_proc(pid, "stat").decode()
    return int(stat[stat.rindex(")") + 2 :].split()[1])


def zombies_of(parent: int) -> list[int]:
    """The children of ``parent`` that have exited but were not reaped."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            stat = read_proc(int(name), "stat").decode()
        except OSError:
            continue  # gone meanwhile
        state, ppid = stat[stat.rindex(")") + 2 :].split()[:2]
        if int(ppid) == parent and state == "Z":
            found.append(int(name))
    return found


def zygote_of(pool: WorkerPool) -> ForkServer:
    zygote = pool._zygote
    assert zygote is not None and zygote.alive
    return zygote


@pytest.fixture
async def cold_pool(sandbox_settings: SandboxSettings) -> AsyncIterator[WorkerPool]:
    """A pool that pre-starts nothing: every worker comes from the zygote on demand."""
    workers = WorkerPool(sandbox_settings, size=0)
    yield workers
    await workers.aclose()


async def acquire(pool: WorkerPool, workspace: Path) -> SandboxClient:
    return await pool.acquire(workspace=workspace, on_call=Extensions())


async def test_workers_are_forked_into_sessions_of_their_own(
    cold_pool: WorkerPool, tmp_path: Path
) -> None:
    for i in range(3):  # open to the workers' users: confined, they stay in "/" all the same
        (tmp_path / f"w{i}").mkdir(mode=0o755)
    clients = [await acquire(cold_pool, tmp_path / f"w{i}") for i in range(3)]
    zygote = zygote_of(cold_pool)
    pids = [client.pid for client in clients]
    assert None not in pids and len(set(pids)) == 3 and zygote.pid not in pids
    for pid in pids:
        assert pid is not None
        assert parent_of(pid) == zygote.pid  # forked, not started by the host
        assert os.getpgid(pid) == os.getsid(pid) == pid
        assert os.readlink(f"/proc/{pid}/cwd") == "/"  # of a root of its own: it needs no file
        assert sorted(int(fd) for fd in os.listdir(f"/proc/{pid}/fd")) == [0, 1, 2, 3, 4]
    assert os.getpgid(zygote.pid) == zygote.pid not in pids
    assert set(filter(None, read_proc(zygote.pid, "environ").split(b"\0"))) == {
        b"PYTHONHASHSEED=0",
        b"PYTHONUTF8=1",
        b"PYTHONDONTWRITEBYTECODE=1",
    }
    for client in clients:
        assert (await ok(client, "6 * 7")).result.result_preview == "42"


async def test_a_worker_killed_by_timeout_leaves_the_zygote_and_its_siblings_alone(
    cold_pool: WorkerPool, tmp_path: Path
) -> None:
    victim = await acquire(cold_pool, tmp_path / "a")
    sibling = await acquire(cold_pool, tmp_path / "b")
    await ok(victim, "keep = 'kept'")
    await ok(sibling, "mine = 2")
    zygote, sibling_pid, old_pid = zygote_of(cold_pool), sibling.pid, victim.pid
    outcome = await run(victim, "while True:\n    pass", timeout_s=1.0)
    assert outcome.result.timed_out and outcome.restart is not None
    assert zygote_of(cold_pool) is zygote and os.getpgid(zygote.pid) == zygote.pid
    assert victim.pid != old_pid and victim.pid is not None
    assert parent_of(victim.pid) == zygote.pid  # the replacement is forked as well
    assert (await ok(victim, "keep")).result.result_preview == "'kept'"
    assert sibling.pid == sibling_pid
    assert (await ok(sibling, "mine * 21")).result.result_preview == "42"


async def test_the_zygote_reaps_every_worker(cold_pool: WorkerPool, tmp_path: Path) -> None:
    client = await acquire(cold_pool, tmp_path / "k")
    zygote = zygote_of(cold_pool)
    for i in range(20):
        other = await acquire(cold_pool, tmp_path / f"n{i}")
        if i % 2:
            await ok(other, "1")
        await other.aclose()
    for _ in range(5):
        await client.kill()
    for _ in range(200):  # the last exits may still be on their way to the zygote
        if not zombies_of(zygote.pid):
            break
        await asyncio.sleep(0.02)
    assert zombies_of(zygote.pid) == []
    assert (await ok(client, "'alive'")).result.result_preview == "'alive'"


async def test_a_worker_sees_nothing_an_earlier_worker_changed(
    cold_pool: WorkerPool, tmp_path: Path
) -> None:
    first = await acquire(cold_pool, tmp_path / "a")
    await first.configure(functions=[], constants={"SECRET": "from a"})
    # The decimal context is process-wide state a block may change.
    code = (
        "import decimal\ndecimal.getcontext().prec = 3\n"
        "class Mark:\n    pass\n"
        "str(decimal.Decimal(2).sqrt())"
    )
    assert (await ok(first, code)).result.result_preview == "'1.41'"
    assert (await ok(first, "SECRET")).result.result_preview == "'from a'"
    second = await acquire(cold_pool, tmp_path / "b")
    assert parent_of(second.pid or 0) == zygote_of(cold_pool).pid
    after = await ok(second, "import decimal\nstr(decimal.Decimal(2).sqrt())")
    assert after.result.result_preview == "'1.414213562373095048801688724'"
    for name in ("SECRET", "Mark"):
        outcome = await run(second, name)
        assert outcome.error_type == "NameError", outcome.result.error
    assert (await ok(first, "str(decimal.Decimal(2).sqrt())")).result.result_preview == "'1.41'"


async def test_a_lost_zygote_means_cold_starts_then_a_new_zygote(
    cold_pool: WorkerPool, tmp_path: Path
) -> None:
    running = await acquire(cold_pool, tmp_path / "r")
    await ok(running, "kept = 1")
    old = zygote_of(cold_pool)
    os.kill(old.pid, signal.SIGKILL)
    await until(lambda: not old.alive)
    # While a new zygote starts in the background, workers are started cold.
    cold = await acquire(cold_pool, tmp_path / "c")
    assert cold.pid is not None and parent_of(cold.pid) == os.getpid()
    assert (await ok(cold, "6 * 7")).result.result_preview == "42"
    await until(lambda: cold_pool._zygote is not old and cold_pool._zygote is not None)
    new = zygote_of(cold_pool)
    forked = await acquire(cold_pool, tmp_path / "f")
    assert forked.pid is not None and parent_of(forked.pid) == new.pid != old.pid
    assert (await ok(forked, "6 * 7")).result.result_preview == "42"
    # A worker of the dead zygote died with it (its death signal): the next block finds it
    # gone and it is replaced as after any crash, its variables restored.
    orphan = running.pid
    assert orphan is not None and wait_gone([orphan]) == []
    crashed = await run(running, "kept")
    assert crashed.restart is not None and crashed.restart.restored == ("kept",)
    assert running.pid not in (None, orphan)
    assert (await ok(running, "kept + 1")).result.result_preview == "2"


async def until(condition: Callable[[], bool]) -> None:
    """Wait (at most 10 s) until ``condition()`` holds."""
    for _ in range(1000):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the condition never held")


async def test_closing_the_pool_stops_the_zygote(
    sandbox_settings: SandboxSettings, tmp_path: Path
) -> None:
    pool = WorkerPool(sandbox_settings, size=1)
    await pool.start()
    zygote = zygote_of(pool)
    await acquire(pool, tmp_path / "w")
    await pool.aclose()
    assert not zygote.alive
    with pytest.raises(ProcessLookupError):
        os.kill(zygote.pid, 0)
    with pytest.raises(SandboxError, match="closed"):
        await acquire(pool, tmp_path / "x")


async def test_a_closed_zygote_refuses_to_fork(
    sandbox_settings: SandboxSettings, tmp_path: Path
) -> None:
    zygote = await ForkServer.start(sandbox_settings)
    await zygote.aclose()
    with pytest.raises(SandboxError, match="zygote is gone"):
        await zygote.fork(tmp_path)


async def test_a_missing_workspace_fails_like_a_cold_start(
    sandbox_settings: SandboxSettings, tmp_path: Path
) -> None:
    zygote = await ForkServer.start(sandbox_settings)
    try:
        with pytest.raises(SandboxError, match="cannot start a sandbox worker"):
            await zygote.fork(tmp_path / "missing")
        assert zygote.alive
    finally:
        await zygote.aclose()


@pytest.mark.slow
async def test_the_switch_off_means_cold_starts(tmp_path: Path) -> None:
    settings = Settings.load(env={}, data_dir=tmp_path, sandbox_fork_server=False).sandbox
    pool = WorkerPool(settings, size=1)
    await pool.start()
    try:
        client = await acquire(pool, tmp_path / "w")
        assert pool._zygote is None
        assert client.pid is not None and parent_of(client.pid) == os.getpid()
        assert (await ok(client, "6 * 7")).result.result_preview == "42"
    finally:
        await pool.aclose()


# A host of its own, killed by the test: it starts a pool, runs a block that never ends, prints
# the pids of its worker and zygote once the block runs, and waits to be killed.
OWNER = """
import asyncio, json, os, sys, tempfile
from pathlib import Path
from cove.config import Settings
from cove.environment.sandbox.host.pool import WorkerPool

async def main():
    settings = Settings.load(
        env={},
        data_dir=Path(sys.argv[1]),
        sandbox_fork_server=sys.argv[2].startswith("fork"),
        sandbox_confine=not sys.argv[2].endswith("unconfined"),
    ).sandbox
    pool = WorkerPool(settings, size=0)
    running = asyncio.Event()

    async def on_call(name, args, kwargs):
        running.set()
        return None

    client = await pool.acquire(workspace=Path(sys.argv[1]) / "ws", on_call=on_call)
    await client.configure(functions=["started"], constants={})
    block = asyncio.create_task(
        client.execute("started()\\nwhile True:\\n    pass", timeout_s=60, seed=0, clock=0.0)
    )
    await running.wait()
    zygote = pool._zygote.pid if pool._zygote is not None else None
    print(json.dumps({"worker": client.pid, "zygote": zygote}), flush=True)
    await block

asyncio.run(main())
"""


def wait_gone(pids: list[int]) -> list[int]:
    """Wait (at most 10 s) for every process in ``pids`` to end; those still running."""
    import select

    fds = {}
    for pid in pids:
        try:
            fds[pid] = os.pidfd_open(pid)
        except ProcessLookupError:
            continue
    try:
        pending = dict(fds)
        while pending:
            ready, _, _ = select.select(list(pending.values()), [], [], 10.0)
            if not ready:
                break
            pending = {pid: fd for pid, fd in pending.items() if fd not in ready}
        return sorted(pending)
    finally:
        for fd in fds.values():
            os.close(fd)


@pytest.mark.slow
@pytest.mark.parametrize("start", ["fork", "cold", "fork-unconfined", "cold-unconfined"])
def test_killing_the_owner_mid_block_kills_its_worker_and_zygote(
    tmp_path: Path, start: str
) -> None:
    import json
    import subprocess
    import sys

    with subprocess.Popen(
        [sys.executable, "-c", OWNER, str(tmp_path), start],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    ) as host:  # fmt: skip
        try:
            assert host.stdout is not None and host.stderr is not None
            line = host.stdout.readline()
            assert line, host.stderr.read()
            pids = json.loads(line)
            forked = start.startswith("fork")
            survivors = [pids["worker"]] + ([pids["zygote"]] if forked else [])
            assert None not in survivors
            for pid in survivors:
                os.kill(pid, 0)  # alive, mid-block
        finally:
            host.kill()
    assert wait_gone(survivors) == []


def test_a_process_whose_owner_is_already_gone_exits_at_once() -> None:
    import subprocess
    import sys

    from cove.environment.sandbox.worker.lifeline import ORPHANED_EXIT

    code = (
        "from cove.environment.sandbox.worker.lifeline import die_with_parent; die_with_parent(1)"
    )
    done = subprocess.run([sys.executable, "-c", code], timeout=60)
    assert done.returncode == ORPHANED_EXIT


def test_a_busy_process_ends_when_its_input_pipe_closes() -> None:
    import subprocess
    import sys

    code = (
        "from cove.environment.sandbox.worker.lifeline import watch_pipe\n"
        "watch_pipe(0)\n"
        "print('watching', flush=True)\n"
        "while True:\n"
        "    pass\n"
    )
    with subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    ) as busy:
        assert busy.stdin is not None and busy.stdout is not None
        assert busy.stdout.readline() == b"watching\n"
        busy.stdin.close()  # as when the host dies: the worker's input hangs up
        assert busy.wait(timeout=60) == 0
