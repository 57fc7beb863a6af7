"""How fast the store commits iterations, next to plain sqlite3 doing the same inserts.

Each committed iteration is 1 iteration row + 3 blocks + 2 variable versions (+ the search rows
for the code). ``Store`` does it the way the engine does: ``start_iteration`` (the exact prompt,
before the model is called), ``record_reply`` when the reply arrives, ``record_block`` as each
block finishes, ``finish_iteration``: six transactions. The baseline inserts the same rows with
the standard ``sqlite3`` module in the same six transactions, on the same schema with the same
pragmas (block code indexed for search once, when the iteration ends, as the Store does); a
second baseline does it all in one transaction per iteration (what recording nothing until the
iteration ends would cost).

The Store's connection lives on its own thread; a call the loop can run at once (the thread is
idle, the unit is small, the write lock is free) runs inline, anything else is one round trip
between threads. The script also measures a bare round trip and repeats the comparison with the
process pinned to one CPU, where a round trip is a context switch instead of waking another CPU.

Run: ``.venv/bin/python bench/store_bench.py [iterations]``
"""

from __future__ import annotations

import asyncio
import json
import os
import queue
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from cove.persistence.connection import connect, enable_wal, put_blob
from cove.persistence.migrate import migrate
from cove.persistence.records import IterationWrite, ReplyWrite
from cove.persistence.store import Store
from cove.results import BlockResult, Usage, VarVersion

SYSTEM_PROMPT = "You answer by writing Python code. " * 200
CONTEXT = "[iteration 3/10]\n<journal>\n" + "i2.0 total = sum(prices)\n-> 1234\n" * 60
REPLY = '{"thinking": "sum the prices", "code": ["total = sum(prices)"]}' * 4


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


def _iteration(n: int) -> IterationWrite:
    versions = tuple(
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
    return IterationWrite(
        status="ok",
        reply=ReplyWrite(raw_reply=REPLY, thinking="sum the prices", usage=Usage(900, 60)),
        blocks=_blocks(n),
        var_versions=versions,
    )


async def bench_store(path: Path, count: int) -> float:
    """Iterations per second through ``Store``, unit by unit as the engine records them."""
    async with Store.open(path) as store:
        conversation = await store.create_conversation(channel="bench")
        turn = await store.start_turn(conversation.id, "bench")
        started = time.perf_counter()
        for n in range(count):
            result = _iteration(n)
            iteration_id = await store.start_iteration(
                turn.id,
                n,
                system_prompt=SYSTEM_PROMPT,
                request_message="bench",
                context_message=CONTEXT,
                seed=n,
            )
            await store.record_reply(
                iteration_id,
                ReplyWrite(
                    raw_reply=REPLY,
                    thinking="sum the prices",
                    usage=Usage(900, 60),
                    planned_blocks=tuple(b.code for b in result.blocks),
                ),
            )
            for block in result.blocks:
                versions = [v for v in result.var_versions if v.block_position == block.position]
                await store.record_block(iteration_id, block, versions)
            await store.finish_iteration(
                iteration_id,
                IterationWrite(status="ok"),
            )
        elapsed = time.perf_counter() - started
    return count / elapsed


def bench_sqlite(path: Path, count: int, *, units: bool = True) -> float:
    """Iterations per second inserting the same rows with plain sqlite3.

    With ``units`` in the Store's six transactions per iteration, else in one.
    """
    conn = connect(str(path))
    enable_wal(conn, str(path))
    migrate(conn, str(path))
    now = time.time()
    conn.execute(
        "INSERT INTO conversation (id, channel, created_at, updated_at)"
        " VALUES ('c', 'bench', ?, ?)",
        (now, now),
    )
    turn_id = conn.execute(
        "INSERT INTO turn (conversation_id, position, request, status, started_at)"
        " VALUES ('c', 1, 'bench', 'running', ?)",
        (now,),
    ).lastrowid

    def commit_unit() -> None:
        if units:
            conn.execute("COMMIT")
            conn.execute("BEGIN IMMEDIATE")

    started = time.perf_counter()
    for n in range(count):
        result = _iteration(n)
        conn.execute("BEGIN IMMEDIATE")
        digest = put_blob(conn, SYSTEM_PROMPT.encode())
        iteration_id = conn.execute(
            "INSERT INTO iteration (turn_id, position, status, system_prompt_hash,"
            " request_message, context_message, seed, started_at)"
            " VALUES (?, ?, 'running', ?, 'bench', ?, ?, ?)",
            (turn_id, n, digest, CONTEXT, n, time.time()),
        ).lastrowid
        commit_unit()
        conn.execute(
            "UPDATE iteration SET raw_reply = ?, thinking = ?, tokens_in = ?, tokens_out = ?,"
            " planned_blocks = ? WHERE id = ?",
            (REPLY, result.thinking, 900, 60, json.dumps([b.code for b in result.blocks]),
             iteration_id),
        )  # fmt: skip
        commit_unit()
        for block in result.blocks:
            block_id = conn.execute(
                "INSERT INTO block (iteration_id, position, code, ok, result_preview,"
                " result_encoded, stdout) VALUES (?, ?, ?, 1, ?, ?, ?)",
                (
                    iteration_id,
                    block.position,
                    block.code,
                    block.result_preview,
                    block.result_encoded,
                    block.stdout,
                ),
            ).lastrowid
            for var in result.var_versions:
                if var.block_position != block.position:
                    continue
                conn.execute(
                    "INSERT INTO var_version (conversation_id, name, version, block_id, kind,"
                    " encoded, type_name, preview, created_at)"
                    " VALUES ('c', ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        var.name,
                        var.version,
                        block_id,
                        var.kind,
                        var.encoded,
                        var.type_name,
                        var.preview,
                        time.time(),
                    ),
                )
            commit_unit()
        for block in result.blocks:  # code is indexed for search once, at the iteration's end
            doc = conn.execute(
                "INSERT INTO search_doc (turn_id, kind) VALUES (?, 'code')", (turn_id,)
            ).lastrowid
            conn.execute("INSERT INTO search_fts (rowid, text) VALUES (?, ?)", (doc, block.code))
        conn.execute("UPDATE iteration SET status = 'ok' WHERE id = ?", (iteration_id,))
        conn.execute("COMMIT")
    elapsed = time.perf_counter() - started
    conn.close()
    return count / elapsed


def _disk_bytes(path: Path) -> int:
    """Size of the database after folding the WAL back into it."""
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))


async def thread_hop_us(count: int = 3000) -> float:
    """Microseconds for one bare round trip to a worker thread and back (the Store's bridge)."""
    loop = asyncio.get_running_loop()
    requests: queue.SimpleQueue[asyncio.Future[None] | None] = queue.SimpleQueue()

    def serve() -> None:
        while (future := requests.get()) is not None:
            loop.call_soon_threadsafe(future.set_result, None)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    started = time.perf_counter()
    for _ in range(count):
        future = loop.create_future()
        requests.put(future)
        await future
    elapsed = time.perf_counter() - started
    requests.put(None)
    thread.join()
    return elapsed / count * 1e6


def measure(count: int) -> tuple[float, float, float, float, float]:
    """sqlite3 rate (same units), sqlite3 rate (one transaction), Store rate, bytes per
    iteration, and the bare thread hop (us)."""
    with tempfile.TemporaryDirectory() as folder:
        store_path = Path(folder) / "store.db"
        bench_sqlite(Path(folder) / "warmup.db", 100)
        plain_rate = bench_sqlite(Path(folder) / "plain.db", count)
        single_rate = bench_sqlite(Path(folder) / "single.db", count, units=False)
        store_rate = asyncio.run(bench_store(store_path, count))
        per_iteration = _disk_bytes(store_path) / count
    return plain_rate, single_rate, store_rate, per_iteration, asyncio.run(thread_hop_us())


def main() -> None:
    args = [a for a in sys.argv[1:] if a != "--one-cpu"]
    count = int(args[0]) if args else 2000
    if "--one-cpu" in sys.argv:
        # Both threads on one CPU: a hand-off is a context switch, not a wake-up of another CPU.
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
        print(json.dumps(measure(count)))
        return
    plain_rate, single_rate, store_rate, per_iteration, hop = measure(count)
    print(
        f"iterations committed: {count} (1 iteration + 3 blocks + 2 variable versions each, "
        "in 6 transactions: start, reply, 3 blocks, finish)"
    )
    print(f"plain sqlite3, same 6 transactions: {plain_rate:9.0f} iterations/s")
    print(f"plain sqlite3, 1 transaction:       {single_rate:9.0f} iterations/s")
    print(f"Store:                              {store_rate:9.0f} iterations/s")
    print(f"ratio Store / sqlite3 (same units): {store_rate / plain_rate:.2f} (target >= 0.5)")
    print(f"ratio Store / sqlite3 (1 transaction): {store_rate / single_rate:.2f}")
    print(f"Store per iteration: {1e6 / store_rate:.0f} us ({1e6 / store_rate / 6:.0f} us a unit)")
    print(f"bytes on disk per iteration: {per_iteration:.0f}")
    print(f"bare thread round trip on this machine: {hop:.1f} us")
    if hasattr(os, "sched_setaffinity") and len(os.sched_getaffinity(0)) > 1:
        pinned = subprocess.run(
            [sys.executable, __file__, str(count), "--one-cpu"],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        plain_1, _, store_1, _, hop_1 = json.loads(pinned.stdout)
        print(
            f"same process pinned to one CPU: sqlite3 {plain_1:.0f}/s, Store {store_1:.0f}/s, "
            f"ratio {store_1 / plain_1:.2f}, thread round trip {hop_1:.1f} us"
        )


if __name__ == "__main__":
    main()
