"""What the store costs per iteration, and how many turns 10 conversations commit at once.

An iteration is recorded the way the engine does it, under the conversation's lease (every
write fenced): ``start_iteration`` (the exact prompt, before the model is called),
``record_reply`` when the reply arrives, ``record_block`` as each of its 3 blocks finishes (2
variable versions), ``finish_iteration``: six write units. The script times each iteration's six
units (p50 and p90 over ``--iterations``) and the CPU they take (this process's, and a private
server's), then runs 10 conversations at once, each taking turns of 3 such iterations, and
reports turns per second. It counts what an iteration sends: units (on SQLite one hop each to
the connection's thread), statements, write transactions, and on PostgreSQL the round trips and
statements on the wire (``tests/persistence/counting.py``). The store's cost sits beside a model
call's, which takes 100 ms to 10 s.

Backends: a SQLite file in a temporary folder (the default) or ``--db PATH|URL``; ``--postgres``
also starts a private PostgreSQL 15 server (``initdb`` and ``pg_ctl`` from
``/usr/lib/postgresql/15/bin``, as the tests do, but with fsync on) and measures it twice: as it
commits by default (each commit waits for its WAL flush) and on a database set to
``synchronous_commit = off`` (a commit survives the client's crash, as SQLite's do here, not
the server's or the machine's); then each against the first backend's figures. The load
average is printed before and after: the figures are upper bounds on a shared machine.

Run: ``.venv/bin/python bench/store_bench.py [--iterations N] [--db PATH|URL] [--postgres]``
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import asyncpg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cove.persistence.fence import Fence, fenced  # noqa: E402
from cove.persistence.locations import open_database  # noqa: E402
from cove.persistence.records import IterationWrite, ReplyWrite  # noqa: E402
from cove.persistence.store import DEFAULT_HISTORY_BUDGET, Store  # noqa: E402
from cove.results import BlockResult, TurnOutcome, Usage, VarVersion  # noqa: E402
from tests.persistence.counting import CountingDatabase, WireCounter  # noqa: E402
from tests.postgres_server import PostgresServer  # noqa: E402

SYSTEM_PROMPT = "You answer by writing Python code. " * 200
CONTEXT = "[iteration 3/10]\n<journal>\n" + "i2.0 total = sum(prices)\n-> 1234\n" * 60
REPLY = '{"thinking": "sum the prices", "code": ["total = sum(prices)"]}' * 4
CONVERSATIONS = 10
ITERATIONS_PER_TURN = 3


def _blocks(n: int) -> tuple[BlockResult, ...]:
    return tuple(
        BlockResult(
            position=k,
            code=f"value_{k} = compute({n}, {k})\nvalue_{k}",
            ok=True,
            result_preview=str(n * k),
            result_encoded=f'{{"int": {n * k}}}',
            stdout="done\n",
        )
        for k in range(3)
    )


def _versions(n: int) -> tuple[VarVersion, ...]:
    return tuple(
        VarVersion(
            name=name,
            version=n + 1,
            block_position=k,
            kind="value",
            encoded=f'{{"int": {n}}}',
            type_name="int",
            preview=str(n),
        )
        for k, name in enumerate(("total", "count"))
    )


async def record_iteration(store: Store, turn_id: int, n: int, version: int) -> None:
    """One iteration (at position ``n``, writing version ``version + 1`` of its variables) in
    the engine's six units."""
    iteration_id = await store.start_iteration(
        turn_id, n, system_prompt=SYSTEM_PROMPT, request_message="bench", context_message=CONTEXT
    )
    blocks, versions = _blocks(n), _versions(version)
    await store.record_reply(
        iteration_id,
        ReplyWrite(
            raw_reply=REPLY,
            thinking="sum the prices",
            usage=Usage(900, 60),
            planned_blocks=tuple(b.code for b in blocks),
        ),
    )
    for block in blocks:
        mine = [v for v in versions if v.block_position == block.position]
        await store.record_block(iteration_id, block, mine)
    await store.finish_iteration(iteration_id, IterationWrite(status="ok"))


async def leased(store: Store, conversation_id: str) -> Fence:
    """The conversation's lease taken, as a turn's writes carry it (every write is fenced)."""
    epoch = await store.acquire_lease(conversation_id, "bench", 600.0)
    return Fence(conversation_id, "bench", epoch)


@dataclass
class IterationTimes:
    """What ``count`` timed iterations took."""

    wall_ms: list[float]
    inside_ms: list[float]  # inside its units (SQLite: on the connection's thread)
    cpu: str  # CPU per iteration, as words


async def per_iteration_ms(
    store: Store, db: CountingDatabase, cpu: CpuClock, count: int
) -> IterationTimes:
    """The wall time of each of ``count`` iterations of one turn in milliseconds, the time
    spent inside their units and the CPU they took."""
    conversation = await store.create_conversation(channel="bench")
    with fenced(await leased(store, conversation.id)):
        turn = await store.start_turn(conversation.id, "bench")
        for n in range(20):  # warm-up: connections, statement caches
            await record_iteration(store, turn.id, n, n)
        times, inside = [], []
        before = cpu.read()
        for n in range(20, 20 + count):
            started, was_inside = time.perf_counter(), db.inside_s
            await record_iteration(store, turn.id, n, n)
            times.append((time.perf_counter() - started) * 1000)
            inside.append((db.inside_s - was_inside) * 1000)
        spent = cpu.spent_ms(before, count)
        await store.finish_turn(turn.id, TurnOutcome("done", answer="ok"))
    return IterationTimes(times, inside, spent)


T = TypeVar("T")


async def _warm_then_counted(store: Store, take: Callable[[], T], count: int) -> T:
    """Record 5 iterations, reset the counts (``take``), record ``count`` more: their counts."""
    conversation = await store.create_conversation(channel="bench")
    with fenced(await leased(store, conversation.id)):
        turn = await store.start_turn(conversation.id, "bench")
        for n in range(5):
            await record_iteration(store, turn.id, n, n)
        take()
        for n in range(5, 5 + count):
            await record_iteration(store, turn.id, n, n)
        return take()


async def per_iteration_counts(store: Store, db: CountingDatabase, count: int = 50) -> str:
    """Units, statements and write transactions per iteration (warm), as one line."""
    counts = await _warm_then_counted(store, db.counts.take, count)
    return (
        f"{counts.units / count:.1f} units ({counts.transactions / count:.1f} write"
        f" transactions), {counts.statements / count:.1f} statements through Sql"
        f" (+ BEGIN and COMMIT per transaction)"
    )


async def wire_counts(url: str, count: int = 50) -> str:
    """Round trips and statements on the wire per iteration (PostgreSQL), as one line."""
    async with WireCounter(url) as counter, Store.open(counter.url) as store:
        wire = await _warm_then_counted(store, counter.counts.take, count)
    return (
        f"{wire.round_trips / count:.1f} round trips, {wire.statements / count:.1f} statements"
        f" (BEGIN, COMMIT, NOTIFY included), {wire.prepares / count:.1f} prepared"
    )


async def concurrent_turns_per_s(store: Store, turns: int) -> tuple[float, float]:
    """Turns per second with ``CONVERSATIONS`` conversations taking ``turns`` turns each, and
    the wall time of the whole run in seconds."""
    conversations = [await store.create_conversation(channel="bench") for _ in range(CONVERSATIONS)]

    async def run(conversation_id: str) -> None:
        written = 0
        with fenced(await leased(store, conversation_id)):
            for _ in range(turns):
                turn = await store.start_turn(conversation_id, "bench turn")
                for n in range(ITERATIONS_PER_TURN):
                    await record_iteration(store, turn.id, n, written)
                    written += 1
                await store.finish_turn(turn.id, TurnOutcome("done", answer="ok"))

    started = time.perf_counter()
    await asyncio.gather(*(run(c.id) for c in conversations))
    elapsed = time.perf_counter() - started
    return CONVERSATIONS * turns / elapsed, elapsed


async def read_ms(store: Store, count: int = 300) -> float:
    """The p50 of a one-statement read (``get_conversation``): the floor of a round trip."""
    conversation = await store.create_conversation(channel="bench")
    times = []
    for _ in range(count):
        started = time.perf_counter()
        await store.get_conversation(conversation.id)
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


@dataclass
class Figures:
    """What one backend measured."""

    label: str
    p50_ms: float
    turns_per_s: float


class CpuClock:
    """CPU seconds spent by this process, and by a private PostgreSQL server's processes when
    one is named (``postmaster.pid`` in its data folder: the postmaster and its children)."""

    def __init__(self, server_data: Path | None) -> None:
        self._server_data = server_data

    def read(self) -> tuple[float, float]:
        """(this process's CPU seconds, the server's, 0 without one)."""
        return time.process_time(), self._server_seconds()

    def _server_seconds(self) -> float:
        if self._server_data is None:
            return 0.0
        postmaster = (self._server_data / "postmaster.pid").read_text().split()[0]
        ticks = 0
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue  # gone meanwhile
            if entry.name == postmaster or fields[1] == postmaster:
                ticks += int(fields[11]) + int(fields[12])  # utime + stime
        return ticks / os.sysconf("SC_CLK_TCK")

    def spent_ms(self, before: tuple[float, float], count: int) -> str:
        """The CPU milliseconds per item of ``count`` since ``before``, as words."""
        here, server = (b - a for a, b in zip(before, self.read(), strict=True))
        text = f"{here * 1000 / count:.2f} ms CPU here"
        if self._server_data is not None:
            text += f" + {server * 1000 / count:.2f} ms in the server"
        return text


async def _synchronous_commit(location: str) -> str:
    """The ``synchronous_commit`` a PostgreSQL store's sessions run with."""
    conn = await asyncpg.connect(location)
    try:
        return str(await conn.fetchval("SHOW synchronous_commit"))
    finally:
        await conn.close()


async def measure(location: str, count: int, cpu: CpuClock) -> Figures:
    """Measure one backend at ``location`` and print its figures."""
    db = CountingDatabase(await open_database(location, read_only=False))
    async with Store(db, time.time, DEFAULT_HISTORY_BUDGET) as store:
        label = store.kind
        if store.kind == "postgres":
            label += f", synchronous_commit={await _synchronous_commit(location)}"
        floor = await read_ms(store)
        timed = await per_iteration_ms(store, db, cpu, count)
        turns = max(1, count // 50)
        before = cpu.read()
        rate, _ = await concurrent_turns_per_s(store, turns)
        turn_cpu = cpu.spent_ms(before, CONVERSATIONS * turns)
        sent = await per_iteration_counts(store, db)
    wire = await wire_counts(location) if store.kind == "postgres" else None
    p50 = statistics.median(timed.wall_ms)
    p90 = statistics.quantiles(timed.wall_ms, n=10)[-1]
    where = "on the connection's thread" if store.kind == "sqlite" else "inside the units"
    print(f"backend: {label}")
    print(f"  one-statement read (a round trip to the database): p50 {floor:.3f} ms")
    print(
        f"  store cost per iteration (6 write units: start, reply, 3 blocks, finish), "
        f"{count} iterations: p50 {p50:.2f} ms, p90 {p90:.2f} ms; {timed.cpu}"
    )
    print(f"    of which {where}: p50 {statistics.median(timed.inside_ms):.2f} ms")
    print(f"    beside a model call of 100 ms to 10 s: {p50:.2f}% of a 100 ms call")
    print(f"    sent per iteration: {sent}")
    if wire is not None:
        print(f"    on the wire per iteration: {wire}")
    else:
        print("    round trips per iteration: one hop to the connection's thread per unit")
    print(
        f"  {CONVERSATIONS} conversations at once, turns of {ITERATIONS_PER_TURN} iterations: "
        f"{rate:.1f} turns/s; per turn {turn_cpu}"
    )
    return Figures(label, p50, rate)


async def _without_commit_flush(url: str) -> str:
    """``url``'s database made to commit without waiting for the WAL flush (new sessions)."""
    conn = await asyncpg.connect(url)
    try:
        name = await conn.fetchval("SELECT current_database()")
        await conn.execute(f'ALTER DATABASE "{name}" SET synchronous_commit = off')
    finally:
        await conn.close()
    return url


def _load() -> str:
    return "load average " + " ".join(f"{x:.1f}" for x in os.getloadavg())


def _summary(figures: list[Figures]) -> None:
    """Each backend's p50 and turns/s against the first's (SQLite's)."""
    base = figures[0]
    print("summary (timings are upper bounds: the machine is shared):")
    for f in figures:
        print(
            f"  {f.label}: p50 {f.p50_ms:.2f} ms an iteration, {f.turns_per_s:.1f} turns/s "
            f"({f.turns_per_s / base.turns_per_s:.2f}x {base.label}'s)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--iterations", type=int, default=500)
    parser.add_argument("--db", help="a SQLite path or postgresql:// URL (default: a temp file)")
    parser.add_argument(
        "--postgres",
        action="store_true",
        help="also start a private PostgreSQL 15 and measure it, as the server commits by "
        "default and with synchronous_commit=off",
    )
    args = parser.parse_args()
    print(_load())
    with tempfile.TemporaryDirectory() as folder:
        location = args.db or str(Path(folder) / "bench.db")
        figures = [asyncio.run(measure(location, args.iterations, CpuClock(None)))]
        if args.postgres:
            # fsync on, as a server a team runs: durable as far as the server's settings say.
            with PostgresServer(fsync=True) as server:
                cpu = CpuClock(server.folder / "data")
                figures.append(asyncio.run(measure(server.database(), args.iterations, cpu)))
                url = asyncio.run(_without_commit_flush(server.database()))
                figures.append(asyncio.run(measure(url, args.iterations, cpu)))
        if len(figures) > 1:
            _summary(figures)
    print(_load())


if __name__ == "__main__":
    main()
