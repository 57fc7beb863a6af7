"""Fixtures for sandbox tests: a worker pool on real processes and clients with an extension
handler that records its calls."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from cove.config import SandboxSettings, Settings
from cove.environment.sandbox.host.client import SandboxClient
from cove.environment.sandbox.host.pool import WorkerPool
from cove.environment.sandbox.outcome import BlockOutcome

CLOCK = 1_700_000_000.0  # 2023-11-14 22:13:20 UTC


class Extensions:
    """An ``on_call`` handler: a few extension functions, and the calls received."""

    names = ("add", "slow_add", "echo", "explode", "blob", "wait")

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[Any], dict[str, Any]]] = []
        self.called = asyncio.Event()  # set by the first call (a block signals it runs)

    async def __call__(self, name: str, args: list[Any], kwargs: dict[str, Any]) -> Any:
        self.calls.append((name, args, kwargs))
        self.called.set()
        if name == "add":  # answers without ever suspending
            return args[0] + args[1]
        if name == "slow_add":
            await asyncio.sleep(0.01)
            return args[0] + args[1]
        if name == "echo":
            return {"args": args, "kwargs": kwargs}
        if name == "explode":
            raise ValueError("the gauge is broken")
        if name == "blob":
            return object()  # not encodable
        if name == "wait":  # like an llm_query: slow, but the sandbox itself is idle
            await asyncio.sleep(args[0])
            return args[0]
        raise KeyError(name)


@pytest.fixture
def sandbox_settings(tmp_path: Path) -> SandboxSettings:
    """Default sandbox limits with a small output cap, without the data libraries (loading them
    costs every zygote a second or more); modules that need them override this fixture with
    ``with_libraries``."""
    return Settings.load(
        env={}, data_dir=tmp_path, output_limit_chars=500, block_timeout_s=5.0,
        sandbox_libraries=False,
    ).sandbox  # fmt: skip


def with_libraries(tmp_path: Path) -> SandboxSettings:
    """The sandbox settings of ``sandbox_settings`` with numpy, pandas and matplotlib loaded."""
    return Settings.load(
        env={}, data_dir=tmp_path, output_limit_chars=500, block_timeout_s=5.0
    ).sandbox


def library_fixtures() -> tuple[Any, Any]:
    """The ``pool`` and ``client`` fixtures of a module whose tests share one zygote with the
    data libraries, as a service has one for all its conversations: numpy, pandas and
    matplotlib load once (a second or more of CPU), and every test still gets a worker of its
    own, forked for it and killed after it. Bind them in the module
    (``pool, client = library_fixtures()``) and run its async tests in the module's event
    loop, where the pool lives (``pytest.mark.asyncio(loop_scope="module")``)."""
    # Imported here: the breach test's unprivileged host imports this module from a copy of
    # the packages it needs, without their metadata (pytest_asyncio reads its own).
    import pytest_asyncio

    @pytest_asyncio.fixture(name="pool", scope="module", loop_scope="module")
    async def pool(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[WorkerPool]:
        workers = WorkerPool(with_libraries(tmp_path_factory.mktemp("sandbox")), size=1)
        await workers.start()
        try:
            yield workers
        finally:
            await workers.aclose()

    @pytest_asyncio.fixture(name="client", loop_scope="module")
    async def client(
        pool: WorkerPool, extensions: Extensions, tmp_path: Path
    ) -> AsyncIterator[SandboxClient]:
        sandbox = await pool.acquire(workspace=tmp_path / "workspace", on_call=extensions)
        try:
            await sandbox.configure(
                functions=Extensions.names, constants={"REQUEST": "what is 6*7?"}
            )
            yield sandbox
        finally:
            await sandbox.aclose()

    return pool, client


@pytest.fixture
async def pool(sandbox_settings: SandboxSettings) -> AsyncIterator[WorkerPool]:
    """A started pool of one pre-started worker, closed after the test."""
    workers = WorkerPool(sandbox_settings, size=1)
    await workers.start()
    yield workers
    await workers.aclose()


@pytest.fixture
def extensions() -> Extensions:
    """The extension handler given to ``client``."""
    return Extensions()


@pytest.fixture
async def client(pool: WorkerPool, extensions: Extensions, tmp_path: Path) -> SandboxClient:
    """A configured client whose workspace is ``tmp_path / "workspace"``."""
    sandbox = await pool.acquire(workspace=tmp_path / "workspace", on_call=extensions)
    await sandbox.configure(functions=Extensions.names, constants={"REQUEST": "what is 6*7?"})
    return sandbox


def read_proc(pid: int, entry: str) -> bytes:
    """The content of ``/proc/<pid>/<entry>``."""
    with open(f"/proc/{pid}/{entry}", "rb") as file:
        return file.read()


async def run(
    client: SandboxClient, code: str, *, timeout_s: float = 5.0, seed: int = 7, clock: float = CLOCK
) -> BlockOutcome:
    """Execute ``code`` with test defaults."""
    return await client.execute(code, timeout_s=timeout_s, seed=seed, clock=clock)


async def ok(client: SandboxClient, code: str, **kwargs: Any) -> BlockOutcome:
    """Execute ``code`` and insist that it succeeded."""
    outcome = await run(client, code, **kwargs)
    assert outcome.result.ok, outcome.result.error
    return outcome
