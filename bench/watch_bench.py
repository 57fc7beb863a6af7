"""Watching conversations: fan-out in one process, following another process, idle cost.

1. Fan-out: one busy conversation (turns of 5 iterations, one block each, a scripted model that
   streams its replies) watched by 0, 1, 10 and 100 watchers. Prints the delivery latency
   (event published → a watcher has it) p50/p99 over every event and watcher, and the turn's
   duration compared with no watchers.
2. Following: a child process runs turns (a scripted model waiting 50 ms per call) while this
   process watches through the database. Prints the latency from the child publishing a
   committed event to this process receiving it rebuilt, p50/p99.
3. Idle: this process watches a conversation nobody drives for a few seconds; prints its CPU use.

Run: ``.venv/bin/python bench/watch_bench.py [--turns 5] [--idle-s 10]``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cove.config import Settings
from cove.conversation import Conversations, scripted_factory
from cove.conversation.watch.hub import ConversationHub
from cove.events import Event, TurnFinished
from cove.persistence.sqlite_commits import CommitPoller

ITERATIONS = 5
FAN_OUT = (0, 1, 10, 100)


def replies(turns: int) -> list[str]:
    """``turns`` turns of ``ITERATIONS`` iterations: a block each, an answer at the end."""
    out: list[str] = []
    for _ in range(turns):
        for i in range(1, ITERATIONS):
            out.append(json.dumps({"thinking": "x" * 400, "code": [f"v{i} = {i} * 2"]}))
        out.append(json.dumps({"thinking": "done", "code": [], "answer": "ok"}))
    return out


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def settings_in(tmp: str) -> Settings:
    return Settings.load(env={}, data_dir=Path(tmp)).replace(worker_pool_size=1)


def stamp_publishing(published: dict[int, float]) -> None:
    """Record when each seq is published (bench-only instrumentation of the hub)."""
    original = ConversationHub._deliver

    def deliver(self: ConversationHub, event: Event) -> None:
        published[event.seq] = time.perf_counter()
        original(self, event)

    ConversationHub._deliver = deliver  # type: ignore[method-assign]


async def fan_out(watchers: int, turns: int, published: dict[int, float]) -> dict[str, float]:
    """Run ``turns`` turns with ``watchers`` watchers; latencies and turn durations."""
    with tempfile.TemporaryDirectory(prefix="cove-bench-") as tmp:
        factory = scripted_factory(replies(turns + 1))
        async with Conversations.open(settings_in(tmp), llm_factory=factory) as convs:
            conv = await convs.create()
            await convs.send(conv.id, "warm up").finished()  # start the worker
            latencies: list[float] = []

            async def watch(stream: Any) -> None:
                finished = 0
                async for event in stream:
                    latencies.append(time.perf_counter() - published[event.seq])
                    if isinstance(event, TurnFinished):
                        finished += 1
                        if finished == turns:
                            break

            streams = [await convs.watch(conv.id).start() for _ in range(watchers)]
            tasks = [asyncio.create_task(watch(s)) for s in streams]
            durations: list[float] = []
            for turn in range(turns):
                started = time.perf_counter()
                await convs.send(conv.id, f"turn {turn}").finished()
                durations.append(time.perf_counter() - started)
            await asyncio.gather(*tasks)
            for stream in streams:
                await stream.aclose()
    return {
        "p50_ms": percentile(latencies, 0.5) * 1000,
        "p99_ms": percentile(latencies, 0.99) * 1000,
        "events": len(latencies),
        "turn_ms": statistics.median(durations) * 1000,
    }


async def follow(turns: int) -> dict[str, float]:
    """Latency of following a turn that a child process runs."""
    with tempfile.TemporaryDirectory(prefix="cove-bench-") as tmp:
        settings = settings_in(tmp)
        async with Conversations.open(settings, llm_factory=scripted_factory([])) as convs:
            conv = await convs.create()
            received: dict[int, float] = {}
            finished = 0
            async with convs.watch(conv.id) as stream:
                child = await asyncio.create_subprocess_exec(
                    sys.executable, __file__, "--drive", tmp, conv.id, str(turns),
                    stdout=asyncio.subprocess.PIPE,
                )  # fmt: skip
                async for event in stream:
                    received[event.seq] = time.time()
                    if isinstance(event, TurnFinished):
                        finished += 1
                        if finished == turns:
                            break
                out, _ = await child.communicate()
        sent = {
            int(seq): float(at) for seq, at in (line.split() for line in out.decode().splitlines())
        }
        lags = [received[seq] - sent[seq] for seq in sent if seq in received]
    return {
        "p50_ms": percentile(lags, 0.5) * 1000,
        "p99_ms": percentile(lags, 0.99) * 1000,
        "events": len(lags),
        "missing": len(set(sent) - set(received)),
    }


async def drive(tmp: str, conversation_id: str, turns: int) -> None:
    """The child of ``follow``: run turns, print ``seq wall-time`` of each published event."""
    published: dict[int, float] = {}
    original = ConversationHub._deliver

    def deliver(self: ConversationHub, event: Event) -> None:
        published[event.seq] = time.time()
        original(self, event)

    ConversationHub._deliver = deliver  # type: ignore[method-assign]
    factory = scripted_factory(replies(turns), delay_s=0.05)
    async with Conversations.open(settings_in(tmp), llm_factory=factory) as convs:
        for turn in range(turns):
            await convs.send(conversation_id, f"turn {turn}").finished()
    for seq, at in published.items():
        print(seq, at)


async def idle(seconds: float) -> dict[str, float]:
    """CPU used by this process while it follows a conversation nobody drives."""
    with tempfile.TemporaryDirectory(prefix="cove-bench-") as tmp:
        async with Conversations.open(settings_in(tmp), llm_factory=scripted_factory([])) as c:
            conv = await c.create()
            async with c.watch(conv.id):
                await asyncio.sleep(0.5)
                cpu, wall = time.process_time(), time.perf_counter()
                poller = c._watching.poller
                assert isinstance(poller, CommitPoller), "the SQLite poller counts its polls"
                polls = poller.polls
                await asyncio.sleep(seconds)
                cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
                polls = poller.polls - polls
    return {"cpu_percent": 100 * cpu / wall, "polls_per_s": polls / wall}


async def main(turns: int, idle_s: float) -> None:
    published: dict[int, float] = {}
    stamp_publishing(published)
    print(f"fan-out: turns of {ITERATIONS} iterations, median of {turns} turns")
    baseline = None
    for watchers in FAN_OUT:
        r = await fan_out(watchers, turns, published)
        baseline = baseline or r["turn_ms"]
        latency = (
            f"delivery p50 {r['p50_ms']:.3f} ms  p99 {r['p99_ms']:.3f} ms  "
            f"({r['events']:.0f} deliveries)"
            if watchers
            else "(no watchers)"
        )
        print(
            f"  {watchers:>3} watchers: turn {r['turn_ms']:.1f} ms "
            f"({r['turn_ms'] - baseline:+.1f} ms vs none)  {latency}"
        )
    r = await follow(turns)
    print(
        f"following another process: p50 {r['p50_ms']:.1f} ms  p99 {r['p99_ms']:.1f} ms  "
        f"({r['events']:.0f} events, {r['missing']:.0f} transient ones not rebuilt)"
    )
    r = await idle(idle_s)
    print(
        f"idle follower: {r['cpu_percent']:.2f}% of one CPU "
        f"({r['polls_per_s']:.1f} data_version polls/s)"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=5)
    parser.add_argument("--idle-s", type=float, default=10.0)
    parser.add_argument("--drive", nargs=3, metavar=("DIR", "ID", "TURNS"))
    args = parser.parse_args()
    if args.drive:
        asyncio.run(drive(args.drive[0], args.drive[1], int(args.drive[2])))
    else:
        asyncio.run(main(args.turns, args.idle_s))
