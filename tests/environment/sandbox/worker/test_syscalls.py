"""The seccomp allow list: documented call by call, and every other call refused in a worker.

``docs/sandbox-syscalls.md`` has one row per call the filter lets through (and per call it
answers with ``ENOSYS``), with its condition and why; the rows and ``seccomp.py`` must agree.
In a confined worker running plain Python (``assume_breach``), calls off the list fail with
``EPERM`` while they work unconfined, and calls that name a process work only on the worker
itself.
"""

from __future__ import annotations

import ast
import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from cove.config import Settings
from cove.environment.sandbox.host.client import SandboxClient
from cove.environment.sandbox.host.pool import WorkerPool
from cove.environment.sandbox.worker import seccomp
from tests.environment.conftest import Extensions

TABLE = Path(__file__).parents[4] / "docs" / "sandbox-syscalls.md"
ROW = re.compile(r"^\| `([a-z0-9_]+)` \| ([^|]+) \| (.+) \|$")
CONDITIONS = {"clone": "threads only", "ioctl": "`TCGETS` only"}


def documented() -> dict[str, str]:
    """``call -> condition`` from the table."""
    rows: dict[str, str] = {}
    for line in TABLE.read_text(encoding="utf-8").splitlines():
        match = ROW.match(line)
        if match:
            name, condition, why = (part.strip() for part in match.groups())
            assert name not in rows, f"{name} has two rows"
            assert len(why) > 10, f"{name} has no reason"
            rows[name] = condition
    return rows


def expected() -> dict[str, str]:
    """``call -> condition`` as the filter is built."""
    rows = {name: CONDITIONS.get(name, "always") for name in seccomp.ALLOWED}
    for name, pairs in seccomp.SELF_ONLY.items():
        rows[name] = "on itself: " + ", ".join(f"argument {i} is {v}" for i, v in pairs)
    rows.update({name: "`ENOSYS`" for name in seccomp.RETRIED})
    return rows


def test_the_table_lists_every_call_of_the_filter_and_no_other() -> None:
    assert documented() == expected()


def test_the_filter_builds_for_this_machine() -> None:
    program = seccomp.build()
    assert program and len(program) % 8 == 0


# Each probe: a call through the C library, its result and errno.
PROBES = """
import ctypes, os, resource
libc = ctypes.CDLL(None, use_errno=True)
CLONE3 = 435  # the same number on x86_64 and arm64 (uname, to ask, is refused)

def probe(call):
    try:
        value = call()
    except OSError as exc:
        return exc.errno
    return ctypes.get_errno() if value == -1 else 0  # os.* raise; C calls answer -1 and errno

buffer = ctypes.create_string_buffer(512)
pipe = (ctypes.c_int * 2)()
found = {
    "uname": probe(lambda: libc.uname(buffer)),
    "sysinfo": probe(lambda: libc.sysinfo(buffer)),
    "pipe2": probe(lambda: libc.pipe2(pipe, 0)),
    "eventfd": probe(lambda: libc.eventfd(0, 0)),
    "epoll_create1": probe(lambda: libc.epoll_create1(0)),
    "clone3": probe(lambda: libc.syscall(CLONE3, None, 0)),
    "affinity": probe(lambda: os.sched_getaffinity(0)),
    "affinity by pid": probe(lambda: os.sched_getaffinity(os.getpid())),
    "limits": probe(lambda: resource.prlimit(0, resource.RLIMIT_NOFILE)),
    "limits by pid": probe(lambda: resource.prlimit(os.getpid(), resource.RLIMIT_NOFILE)),
    "priority": probe(lambda: os.setpriority(os.PRIO_PROCESS, 0, 0)),
    "user priority": probe(lambda: os.getpriority(os.PRIO_USER, 0)),
}
result = " ".join(str(number) for number in found.values())  # short: a preview holds 80
"""
EPERM, ENOSYS, EINVAL = 1, 38, 22


@pytest.fixture(params=[True, False], ids=["confined", "unconfined"])
async def worker(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[SandboxClient]:
    settings = Settings.load(env={}, data_dir=tmp_path, sandbox_confine=request.param)
    pool = WorkerPool(settings.sandbox, size=0, assume_breach=True)
    try:
        yield await pool.acquire(workspace=tmp_path / "ws", on_call=Extensions())
    finally:
        await pool.aclose()


async def test_calls_off_the_list_are_refused_and_processes_are_named_only_as_itself(
    worker: SandboxClient,
) -> None:
    outcome = await worker.execute(PROBES, timeout_s=30, seed=0, clock=0.0)
    assert outcome.result.ok and outcome.result.result_preview is not None, outcome.result.error
    numbers = ast.literal_eval(outcome.result.result_preview).split()
    names = re.findall(r'^    "([a-z0-9_ ]+)": probe', PROBES, re.MULTILINE)
    assert len(names) == len(numbers) == 12
    found = dict(zip(names, map(int, numbers), strict=True))
    assert worker.confinement is not None
    if not worker.confinement.enabled:
        # Unconfined, every probe works: the refusals below are the filter's.
        assert found == {**dict.fromkeys(found, 0), "clone3": EINVAL}
        return
    assert "seccomp" in worker.confinement.layers
    for call in ("uname", "sysinfo", "pipe2", "eventfd", "epoll_create1"):
        assert found[call] == EPERM, call
    assert found["clone3"] == ENOSYS  # the C library falls back to clone
    assert found["affinity"] == found["limits"] == found["priority"] == 0
    assert found["affinity by pid"] == found["limits by pid"] == EPERM
    assert found["user priority"] == EPERM
