"""Sandbox benchmark: the cost of isolation, worker hand-out and restore.

Run with ``.venv/bin/python bench/sandbox_bench.py``. Prints:

- round trip of a trivial block through a worker (p50/p99) vs. the same compiled block run in
  process (bare ``exec``, and the full in-process runtime with variable tracking);
- time to get a ready worker from the pool vs. one forked from the zygote vs. a cold start;
- time to restore 500 variables (250 values, 250 functions) into a fresh worker;
- the cost of confinement (``confinement_costs``): a worker forked from the zygote and a trivial
  block, each with confinement on (own user, Landlock, seccomp...) and off.

Targets: trivial block p50 <= 2 ms; worker from pool <= 10 ms; from the fork server <= 10 ms;
restore of 500 variables <= 300 ms; confined fork <= 10 ms and trivial block <= 1 ms.
"""

from __future__ import annotations

import asyncio
import dataclasses
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cove.config import Settings
from cove.environment.sandbox.policy import compile_block
from cove.environment.sandbox.pool import WorkerPool
from cove.environment.sandbox.runtime import Runtime

TRIVIAL = "x = 1\nx + 1"
ROUNDS = 500


async def no_calls(name: str, args: list[Any], kwargs: dict[str, Any]) -> Any:
    raise LookupError(name)


def percentiles(samples_ms: list[float]) -> str:
    ordered = sorted(samples_ms)
    p50 = statistics.median(ordered)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return f"p50 {p50:8.3f} ms   p99 {p99:8.3f} ms"


def timed(function: Callable[[], object], rounds: int) -> list[float]:
    samples = []
    for _ in range(rounds):
        started = time.perf_counter()
        function()
        samples.append((time.perf_counter() - started) * 1000)
    return samples


async def main() -> None:
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        settings = Settings(data_dir=root)
        pool = WorkerPool(settings, size=1)
        await pool.start()
        try:
            await report(pool, root)
        finally:
            await pool.aclose()
        await confinement_costs(root / "confinement")


async def report(pool: WorkerPool, root: Path) -> None:
    # 1. The cost of isolation.
    client = await pool.acquire(workspace=root / "a", on_call=no_calls)
    for _ in range(20):
        await client.execute(TRIVIAL, timeout_s=5, seed=1, clock=0.0)
    worker_ms = []
    for _ in range(ROUNDS):
        started = time.perf_counter()
        await client.execute(TRIVIAL, timeout_s=5, seed=1, clock=0.0)
        worker_ms.append((time.perf_counter() - started) * 1000)

    block = compile_block(TRIVIAL)
    runtime = Runtime(request=lambda m: m, output_limit=20_000, snapshot_limit=1_000_000)
    namespace = runtime.namespace
    assert block.body is not None and block.tail is not None
    body, tail = block.body, block.tail
    bare_ms = timed(lambda: (exec(body, namespace), eval(tail, namespace)), ROUNDS)
    full_ms = timed(lambda: runtime.execute(TRIVIAL, 1, 0.0), ROUNDS)

    print(f"trivial block via worker      {percentiles(worker_ms)}")
    print(f"same block in process (exec)  {percentiles(bare_ms)}")
    print(f"in-process runtime (tracked)  {percentiles(full_ms)}")
    ratio = statistics.median(worker_ms) / statistics.median(full_ms)
    print(f"cost of isolation: worker p50 / in-process runtime p50 = {ratio:.1f}x")

    # 2. A ready worker from the pool vs. a cold start.
    pooled_ms = []
    for i in range(10):
        await wait_for_idle(pool)
        started = time.perf_counter()
        taken = await pool.acquire(workspace=root / f"p{i}", on_call=no_calls)
        pooled_ms.append((time.perf_counter() - started) * 1000)
        await taken.aclose()
    forked_ms = await unpooled(pool._settings, root / "f", rounds=20)
    cold_settings = dataclasses.replace(pool._settings, sandbox_fork_server=False)
    cold_ms = await unpooled(cold_settings, root / "c", rounds=5)
    print(f"worker from the pool          {percentiles(pooled_ms)}")
    print(f"worker from the fork server   {percentiles(forked_ms)}")
    print(f"worker from a cold start      {percentiles(cold_ms)}")

    # 3. Restoring 500 variables.
    lines = []
    for i in range(250):
        lines.append(f"v{i} = {{'n': {i}, 'items': list(range(10)), 'name': 'value {i}'}}")
        lines.append(f"def f{i}(x, y={i}):\n    return x * y + {i}")
    await client.execute("del x\n" + "\n".join(lines), timeout_s=30, seed=1, clock=0.0)
    saved = list(client.snapshots().values())
    assert len(saved) == 500, len(saved)
    restore_ms = []
    for i in range(5):
        await wait_for_idle(pool)
        fresh = await pool.acquire(workspace=root / f"r{i}", on_call=no_calls)
        started = time.perf_counter()
        report = await fresh.restore(saved)
        restore_ms.append((time.perf_counter() - started) * 1000)
        assert len(report.restored) == 500 and not report.lost
        await fresh.aclose()
    print(f"restore of 500 variables      {percentiles(restore_ms)}")
    started = time.perf_counter()
    await client.kill()
    print(f"kill + replace + restore 500  {(time.perf_counter() - started) * 1000:8.3f} ms")


async def unpooled(settings: Settings, root: Path, *, rounds: int) -> list[float]:
    """Times to acquire a worker from a pool that pre-starts none (after one to warm it up)."""
    pool = WorkerPool(settings, size=0)
    samples = []
    try:
        await (await pool.acquire(workspace=root / "warm", on_call=no_calls)).aclose()
        for i in range(rounds):
            started = time.perf_counter()
            taken = await pool.acquire(workspace=root / f"{i}", on_call=no_calls)
            samples.append((time.perf_counter() - started) * 1000)
            await taken.aclose()
    finally:
        await pool.aclose()
    return samples


async def confinement_costs(root: Path) -> None:
    """Fork-from-zygote and trivial-block p50, with confinement on and off."""
    for confined in (True, False):
        settings = Settings(data_dir=root, sandbox_confine=confined)
        forked_ms = await unpooled(settings, root / f"fork-{confined}", rounds=30)
        pool = WorkerPool(settings, size=0)
        try:
            client = await pool.acquire(workspace=root / f"block-{confined}", on_call=no_calls)
            for _ in range(20):
                await client.execute(TRIVIAL, timeout_s=5, seed=1, clock=0.0)
            block_ms = []
            for _ in range(ROUNDS):
                started = time.perf_counter()
                await client.execute(TRIVIAL, timeout_s=5, seed=1, clock=0.0)
                block_ms.append((time.perf_counter() - started) * 1000)
            layers = ", ".join(client.confinement.layers) if client.confinement else "?"
        finally:
            await pool.aclose()
        label = "on " if confined else "off"
        print(f"confinement {label}: fork from zygote {percentiles(forked_ms)}")
        print(f"confinement {label}: trivial block    {percentiles(block_ms)}")
        print(f"confinement {label}: layers           {layers or 'none'}")


async def wait_for_idle(pool: WorkerPool) -> None:
    while not pool._idle:  # noqa: ASYNC110 - the pool refills in the background, unobserved
        await asyncio.sleep(0.01)


if __name__ == "__main__":
    asyncio.run(main())
