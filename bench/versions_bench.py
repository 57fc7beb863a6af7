"""What a variable version costs: CPU per block and bytes written, through the real query loop.

Every scenario runs one turn of a scripted model against a real store file and a real sandbox
worker (``stack.py``): a setup block, then K iterations of the measured block, then K iterations
of an empty block (``pass``), so each figure is "over an empty block". CPU is the host process's
CPU time (the store's thread included) plus the worker's (``/proc/<pid>/schedstat``), per
iteration, median. Bytes written are the bytes of stored values the K measured blocks added
(inline encodings, blobs and value chunks, whatever the schema holds), divided by K.

Scenarios and the targets of issue 25:

- ``append``: ``nums.append(i)`` on a 100,000-int list: <= 2 ms CPU over an empty block and
  <= 16 KB written;
- ``len(rows)`` on 50,000 dict rows: <= 1 ms; ``rows.append({...})``: <= 5 ms and <= 32 KB;
- ``one of 1M``: one element of a 1,000,000-int list changed: <= 64 KB written;
- ``40 x 1 MB``: 40 variables of ~1 MB, 5 blocks each changing one element of each: database
  size <= 60 MB;
- ``encode``: ``cove.codec.encode`` of a 100,000-int list within 2x ``json.dumps`` (in process);
- ``scale``: a numpy array of 1 KB, 1 MB and 100 MB with one element changed per block: bytes
  written per iteration and CPU per byte of the value (no target: it shows what the cost follows).

The machine this runs on is usually shared: compare ratios, and re-run on a quiet machine for
absolute figures. Run: ``.venv/bin/python bench/versions_bench.py [--k 12] [--only NAME]``.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import sqlite3
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from stack import BenchStack, bench_stack

from cove import codec
from cove.engine.llm.scripted import ScriptedClient
from cove.engine.query import Query, TurnRequest
from cove.events import BlockFinished, IterationStarted, TurnFinished

ROWS = (
    "rows = [{'id': i, 'name': f'item {i}', 'price': i * 1.5, 'qty': i % 7, 'ok': i % 2 == 0}"
    " for i in range(50_000)]"
)
NEW_ROW = "rows.append({'id': -1, 'name': 'new', 'price': 0.5, 'qty': 1, 'ok': True})"
FORTY = 40
ONE_MB_INTS = 140_000  # encodes to about 1 MB


@dataclass
class Figures:
    """One measured block: CPU over an empty block and bytes written, per iteration."""

    cpu_ms: float
    empty_cpu_ms: float
    bytes_per_block: float
    wall_s: float

    @property
    def over_empty_ms(self) -> float:
        """CPU of the measured block minus that of an empty block."""
        return self.cpu_ms - self.empty_cpu_ms


def worker_cpu_ns(stack: BenchStack) -> int:
    """CPU time the current worker process has used, in nanoseconds (0 when unreadable)."""
    client = stack.env._client
    pid = client.pid if client is not None else None
    if pid is None:
        return 0
    try:
        return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 0


def value_bytes(path: str) -> int:
    """Bytes of stored values in the database: inline encodings, blobs and value chunks."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
        total = 0
        queries = [
            "SELECT sum(length(CAST(encoded AS BLOB))) FROM var_version",
            "SELECT sum(length(data)) FROM blob",
        ]
        if "value_chunk" in tables:
            queries.append("SELECT sum(length(data)) FROM value_chunk")
        for query in queries:
            total += int(conn.execute(query).fetchone()[0] or 0)
        return total
    finally:
        conn.close()


def database_bytes(path: str) -> int:
    """The database file's size once its WAL is folded back in."""
    conn = sqlite3.connect(path)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
    return Path(path).stat().st_size


async def run_turn(stack: BenchStack, codes: Sequence[str]) -> list[tuple[int, int]]:
    """Run one turn whose iterations run ``codes`` in order; the CPU (host, worker) in ns at
    the start of each iteration and at the end of the turn."""
    replies: list[dict[str, object]] = [{"code": [code]} for code in codes]
    replies[-1]["answer"] = "done"
    query = Query(
        settings=stack.settings,
        store=stack.store,
        env=stack.env,
        llm=ScriptedClient(replies),
        conversation=stack.conversation,
        request=TurnRequest(stack.conversation.id, "bench", max_iterations=len(codes)),
    )
    marks: list[tuple[int, int]] = []
    async for event in query.run():
        if isinstance(event, IterationStarted | TurnFinished):
            marks.append((time.process_time_ns(), worker_cpu_ns(stack)))
        if isinstance(event, BlockFinished) and not event.block.ok:
            raise RuntimeError(f"block {event.block.code[:80]!r} failed: {event.block.error}")
        if isinstance(event, TurnFinished) and event.status != "done":
            raise RuntimeError(f"the turn ended {event.status}: {event.error}")
    return marks


def iteration_cpu_ms(marks: list[tuple[int, int]]) -> list[float]:
    """CPU of each iteration (host + worker), in milliseconds."""
    return [((h2 - h1) + max(0, w2 - w1)) / 1e6 for (h1, w1), (h2, w2) in itertools.pairwise(marks)]


async def measure(setup: Sequence[str], block: Sequence[str] | str, k: int) -> Figures:
    """Run ``setup``, then ``k`` measured blocks, then ``k`` empty blocks, in one conversation."""
    blocks = [block] * k if isinstance(block, str) else list(block)
    async with bench_stack(max_iterations=1000, block_timeout_s=110.0) as stack:
        await run_turn(stack, [*setup, "pass"])
        before = value_bytes(stack.store.path)
        started = time.perf_counter()
        marks = await run_turn(stack, blocks)
        wall = time.perf_counter() - started
        written = value_bytes(stack.store.path) - before
        empty = await run_turn(stack, ["pass"] * k)
    # The first iteration of a turn also starts the turn: leave it out.
    cpu = iteration_cpu_ms(marks)[1:]
    empty_cpu = iteration_cpu_ms(empty)[1:]
    return Figures(
        cpu_ms=statistics.median(cpu),
        empty_cpu_ms=statistics.median(empty_cpu),
        bytes_per_block=written / len(blocks),
        wall_s=wall,
    )


def show(name: str, figures: Figures, cpu_target: float | None, bytes_target: float | None) -> None:
    """Print one scenario's line."""
    parts = [
        f"{name:<26} CPU {figures.cpu_ms:8.2f} ms (empty {figures.empty_cpu_ms:6.2f}, over "
        f"{figures.over_empty_ms:8.2f} ms",
        f"target <= {cpu_target:g} ms)" if cpu_target is not None else "no target)",
        f" written {figures.bytes_per_block / 1024:9.1f} KB/block",
    ]
    if bytes_target is not None:
        parts.append(f"(target <= {bytes_target / 1024:g} KB)")
    print(" ".join(parts), flush=True)


async def scenario_append(k: int) -> None:
    figures = await measure(["nums = list(range(100_000))"], "nums.append(len(nums))", k)
    show("append to 100k ints", figures, 2.0, 16 * 1024)


async def scenario_rows(k: int) -> None:
    show("len(rows) on 50k rows", await measure([ROWS], "len(rows)", k), 1.0, None)
    show("rows.append on 50k rows", await measure([ROWS], NEW_ROW, k), 5.0, 32 * 1024)


async def scenario_million(k: int) -> None:
    blocks = [f"big[{i * 7919 % 1_000_000}] = -{i + 1}" for i in range(k)]
    figures = await measure(["big = list(range(1_000_000))"], blocks, k)
    show("one of 1M ints changed", figures, None, 64 * 1024)


async def scenario_forty() -> None:
    setup = [f"v_{n} = list(range({n}, {n} + {ONE_MB_INTS}))" for n in range(FORTY)]
    changes = [
        "\n".join(f"v_{n}[{(b * 31 + n) % ONE_MB_INTS}] = -{b + 1}" for n in range(FORTY))
        for b in range(5)
    ]
    async with bench_stack(max_iterations=1000, block_timeout_s=110.0) as stack:
        await run_turn(stack, setup)
        after_setup = database_bytes(stack.store.path)
        started = time.perf_counter()
        await run_turn(stack, changes)
        wall = time.perf_counter() - started
        size = database_bytes(stack.store.path)
    print(
        f"{'40 x 1 MB, 5 blocks':<26} database {size / 1e6:7.1f} MB (after the 40 variables: "
        f"{after_setup / 1e6:.1f} MB; target <= 60 MB); the 5 blocks took {wall:.2f} s",
        flush=True,
    )


def scenario_encode() -> None:
    nums = list(range(100_000))
    dumps = json.JSONEncoder(separators=(",", ":")).encode

    def best(function: object, rounds: int = 30) -> float:
        times = []
        for _ in range(rounds):
            started = time.perf_counter()
            function()  # type: ignore[operator]
            times.append(time.perf_counter() - started)
        return min(times) * 1000

    plain = best(lambda: dumps(nums))
    ours = best(lambda: codec.encode(nums, max_bytes=1 << 30))
    print(
        f"{'encode 100k ints':<26} codec.encode {ours:7.2f} ms, json.dumps {plain:7.2f} ms: "
        f"{ours / plain:5.2f}x (target <= 2x)",
        flush=True,
    )


async def scenario_scale(k: int) -> None:
    for label, count in (("1 KB", 128), ("1 MB", 131_072), ("100 MB", 13_107_200)):
        setup = ["import numpy as np", f"a = np.arange({count}, dtype=np.float64)"]
        blocks = [f"a[{i * 7919 % count}] = -{i + 1}.5" for i in range(k)]
        figures = await measure(setup, blocks, k)
        size = count * 8
        per_byte = figures.over_empty_ms * 1e6 / size
        print(
            f"{'array of ' + label:<26} CPU over empty {figures.over_empty_ms:9.2f} ms, "
            f"{per_byte:9.3f} ns per byte of the value; written "
            f"{figures.bytes_per_block / 1024:9.1f} KB/block",
            flush=True,
        )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--k", type=int, default=12, help="measured blocks per scenario")
    parser.add_argument(
        "--only",
        choices=("encode", "append", "rows", "million", "forty", "scale"),
        action="append",
        help="run only these scenarios (repeatable)",
    )
    args = parser.parse_args()
    only = set(args.only or ())

    def wanted(name: str) -> bool:
        return not only or name in only

    print("measured on a shared machine: compare ratios; re-run on a quiet one for absolutes")
    if wanted("encode"):
        scenario_encode()
    if wanted("append"):
        await scenario_append(args.k)
    if wanted("rows"):
        await scenario_rows(args.k)
    if wanted("million"):
        await scenario_million(args.k)
    if wanted("forty"):
        await scenario_forty()
    if wanted("scale"):
        await scenario_scale(args.k)


if __name__ == "__main__":
    asyncio.run(main())
