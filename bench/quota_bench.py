"""Workspace quota benchmark: the cost of one ``write_file`` in a workspace holding N files.

Run with ``.venv/bin/python bench/quota_bench.py [writes]``. For N = 10, 1,000 and 10,000 files
already in the workspace (spread over directories of 100), it prints the first write (which
measures the workspace once) and the p50/p99 of the writes after it, each a small file written
through the ``files`` extension as sandbox code calls it (in a worker thread), and how many times
the workspace was walked. A write after the first costs the same whatever N is: the quota keeps a
running figure instead of walking the tree.

Target: the p50 of a write at N = 10,000 within 1.5x of the p50 at N = 10.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

from cove.config import Settings
from cove.environment.extensions.base import CallContext
from cove.environment.extensions.files import write_file
from cove.environment.extensions.quota import WorkspaceQuota

SIZES = (10, 1_000, 10_000)


def fill(workspace: Path, files: int) -> None:
    """``files`` small files in directories of 100."""
    for i in range(files):
        directory = workspace / f"d{i // 100}"
        directory.mkdir(exist_ok=True)
        (directory / f"f{i}.txt").write_text("some text\n")


async def measure(files: int, writes: int) -> tuple[float, list[float], int]:
    with tempfile.TemporaryDirectory() as tmp:
        workspace = Path(tmp) / "workspace"
        workspace.mkdir()
        fill(workspace, files)
        settings = Settings.load(env={}, data_dir=Path(tmp) / "data").sandbox
        quota = WorkspaceQuota(workspace, settings)
        ctx = CallContext(
            environment=None,  # type: ignore[arg-type]  # write_file does not use it
            conversation_id="bench",
            workspace=workspace,
            store=None,  # type: ignore[arg-type]
            settings=settings,
            hooks=None,
            quota=quota,
        )
        started = time.perf_counter()
        await write_file(ctx, "first.txt", "x")
        first = time.perf_counter() - started
        times = []
        for i in range(writes):
            started = time.perf_counter()
            await write_file(ctx, f"out/w{i % 50}.txt", f"line {i}\n")
            times.append(time.perf_counter() - started)
        return first, times, quota.measurements


async def main(writes: int) -> None:
    print(f"write_file in a workspace holding N files ({writes} writes after the first)")
    p50s = {}
    for files in SIZES:
        first, times, walks = await measure(files, writes)
        times.sort()
        p50s[files] = statistics.median(times)
        p99 = times[min(len(times) - 1, int(len(times) * 0.99))]
        print(
            f"  N={files:>6,}: first write {first * 1000:7.2f} ms (measures the workspace), "
            f"then p50 {p50s[files] * 1e6:6.0f} us, p99 {p99 * 1e6:6.0f} us; "
            f"workspace walked {walks}x"
        )
    ratio = p50s[SIZES[-1]] / p50s[SIZES[0]]
    verdict = "ok" if ratio <= 1.5 else "MISSED"
    print(f"  p50 at N={SIZES[-1]:,} / p50 at N={SIZES[0]}: {ratio:.2f} (target <= 1.5: {verdict})")


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 300))
