"""The terminal UI under load: a 300-iteration turn streamed into the app, and opening a
conversation of 100 turns.

Streaming: the app runs headless under Textual's Pilot; the bench feeds a turn's events
(``TurnStarted``, then per iteration ``IterationStarted``, ``ModelReply``, ``BlockFinished`` and
``VarsChanged``, then ``TurnFinished``) to ``app.apply`` exactly as the watch does, and times each
event until the app has processed it and refreshed (``pilot.pause()``). Two clocks: wall time
(``pilot.pause`` sleeps in steps of 20 ms until the process is idle, so it is coarse) and the
process's CPU time for the same span (the work the event caused: layout, rendering, the pilot's
own bookkeeping; other processes on a loaded machine do not count). It prints mean and p99 per
event, the means for the events of iterations 6-15 against 286-295 (the cost per event must not
grow with the turn), and the process's peak RSS.

Opening: 100 turns are run through ``Conversations`` with a scripted model (real store and
sandbox worker), then the time from opening the conversation to its newest turns being shown,
and the CPU per event of a 20-iteration turn streamed into it (against the same turn streamed
into an empty conversation, iterations 6-15 above: the length of the conversation must not show).

Run: ``.venv/bin/python bench/tui_bench.py [--iterations 300] [--turns 100]``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import statistics
import tempfile
import time
from pathlib import Path

from textual.pilot import Pilot

from cove.channels.tui import CoveApp
from cove.config import Settings
from cove.conversation import Conversations, scripted_factory
from cove.events import (
    BlockFinished,
    Event,
    IterationStarted,
    ModelReply,
    TurnFinished,
    TurnStarted,
    VarsChanged,
)
from cove.results import BlockResult, TurnOutcome, VarVersion

SIZE = (120, 40)


def iteration_events(turn_id: int, n: int, budget: int) -> list[Event]:
    code = f"total = total + {n}\nrows.append({{'n': {n}, 'square': {n} * {n}}})\ntotal"
    return [
        IterationStarted(turn_id=turn_id, iteration=n, budget=budget),
        ModelReply(
            turn_id=turn_id, iteration=n, thinking=f"step {n}: add {n} to the total", code=(code,)
        ),
        BlockFinished(
            turn_id=turn_id,
            iteration=n,
            index=0,
            block=BlockResult(
                position=0,
                code=code,
                ok=True,
                result_preview=str(n * (n + 1) // 2),
                stdout=f"row {n}\n",
                duration_ms=3.5,
            ),
        ),
        VarsChanged(
            turn_id=turn_id,
            iteration=n,
            changes=(
                VarVersion("total", "value", None, "int", str(n), version=n),
                VarVersion("rows", "value", None, "list", "[…]", version=n),
            ),
        ),
    ]


Timing = tuple[int, float, float]  # (iteration, wall seconds, CPU seconds)


async def feed(app: CoveApp, pilot: Pilot[None], turn_id: int, iterations: int) -> list[Timing]:
    """Stream one turn of ``iterations`` iterations into the app, timing every event."""
    app.apply(TurnStarted(turn_id=turn_id, position=turn_id, request="add up a long series"))
    await pilot.pause()
    times: list[Timing] = []
    for n in range(1, iterations + 1):
        for event in iteration_events(turn_id, n, iterations):
            start, cpu = time.perf_counter(), time.process_time()
            app.apply(event)
            await pilot.pause()
            times.append((n, time.perf_counter() - start, time.process_time() - cpu))
    finish = TurnFinished(
        turn_id=turn_id,
        outcome=TurnOutcome("done", "The total is **45150**.", "high"),
        iterations=iterations,
        duration_ms=1.0,
    )
    app.apply(finish)
    await pilot.pause()
    assert app.timeline.turns[turn_id].finished
    return times


def mean_ms(times: list[Timing], first: int, last: int, clock: int) -> float:
    return statistics.mean(t[clock] for t in times if first <= t[0] <= last) * 1e3


async def stream(iterations: int, data: Path) -> dict[str, float]:
    settings = Settings.load(env={}, data_dir=data).replace(worker_pool_size=1)
    async with await Conversations.open(settings, llm_factory=scripted_factory([])) as convs:
        app = CoveApp(convs)
        async with app.run_test(size=SIZE) as pilot:
            await pilot.pause()
            times = await feed(app, pilot, 1, iterations)
    wall = sorted(t[1] for t in times)
    cpu = sorted(t[2] for t in times)
    late = (iterations - 14, iterations - 5)
    return {
        "events": len(times),
        "mean_ms": statistics.mean(wall) * 1e3,
        "p99_ms": wall[int(len(wall) * 0.99)] * 1e3,
        "cpu_mean_ms": statistics.mean(cpu) * 1e3,
        "cpu_p99_ms": cpu[int(len(cpu) * 0.99)] * 1e3,
        "early_mean_ms": mean_ms(times, 6, 15, 1),
        "late_mean_ms": mean_ms(times, *late, 1),
        "early_cpu_ms": mean_ms(times, 6, 15, 2),
        "late_cpu_ms": mean_ms(times, *late, 2),
    }


async def open_long(turns: int, data: Path) -> dict[str, float]:
    replies = [
        json.dumps(
            {"thinking": "t", "code": [f"x{i} = {i} * 2"], "answer": f"x{i} is {{{{x{i}}}}}"}
        )
        for i in range(turns)
    ]
    settings = Settings.load(env={}, data_dir=data).replace(worker_pool_size=1)
    async with await Conversations.open(settings, llm_factory=scripted_factory(replies)) as convs:
        conv = await convs.create(channel="tui", title="a long one")
        for i in range(turns):
            await convs.send(conv.id, f"compute x{i}").finished()
        app = CoveApp(convs, conv.id)
        start = time.perf_counter()
        async with app.run_test(size=SIZE) as pilot:
            timeline = app.timeline
            while timeline.turn_count < turns or not timeline.turns[max(timeline.turns)].finished:
                await pilot.pause(0.005)
            await pilot.pause()
            shown = time.perf_counter() - start
            times = await feed(app, pilot, 10_000, 20)
    return {"turns": turns, "open_s": shown, "cpu_ms": mean_ms(times, 6, 15, 2)}


SHOWCASE = [
    {
        "thinking": "Write a primality test and keep the primes in a variable.",
        "title": "Primes",
        "code": [
            "def is_prime(n):\n"
            "    return n > 1 and all(n % d for d in range(2, int(n ** 0.5) + 1))",
            "primes = [n for n in range(2, 60) if is_prime(n)][:10]\ntotal = sum(primes)\ntotal",
        ],
    },
    {
        "thinking": "Check the count before answering.",
        "code": ["print(len(primes), primes[-1])"],
        "answer": "The first ten primes are {{primes}}; their sum is **{{total}}**.",
    },
    {
        "thinking": "Extend the list in place; is_prime survives from the last turn.",
        "code": [
            "while len(primes) < 15:\n    n = primes[-1] + 1\n    while not is_prime(n):\n"
            "        n += 1\n    primes.append(n)\ntotal = sum(primes)\ntotal"
        ],
        "answer": "Fifteen primes now, summing to **{{total}}**.",
    },
]


async def screenshot(path: Path, data: Path) -> None:
    """Save an SVG of the app on a small conversation (for the README)."""
    replies = [json.dumps(r) for r in SHOWCASE]
    settings = Settings.load(env={}, data_dir=data).replace(worker_pool_size=1)
    async with await Conversations.open(settings, llm_factory=scripted_factory(replies)) as convs:
        conv = await convs.create(channel="tui")
        await convs.send(conv.id, "What are the first ten primes and their sum?").finished()
        await convs.send(conv.id, "Extend the list to fifteen.").finished()
        app = CoveApp(convs, conv.id)
        async with app.run_test(size=SIZE) as pilot:
            while (
                len(app.timeline.turns) < 2
                or not app.timeline.turns[max(app.timeline.turns)].finished
            ):
                await pilot.pause(0.01)
            await pilot.press("f3")
            first = app.timeline.turns[min(app.timeline.turns)].iterations[1]
            first.focus()
            await pilot.press("enter")
            await pilot.pause(0.3)
            app.save_screenshot(path.name, path.parent)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--iterations", type=int, default=300)
    parser.add_argument("--turns", type=int, default=100)
    parser.add_argument("--screenshot", type=Path, help="only save an SVG screenshot there")
    args = parser.parse_args()
    if args.screenshot is not None:
        with tempfile.TemporaryDirectory() as tmp:
            asyncio.run(screenshot(args.screenshot.resolve(), Path(tmp)))
        print(f"saved {args.screenshot}")
        return
    with tempfile.TemporaryDirectory() as tmp:
        streamed = asyncio.run(stream(args.iterations, Path(tmp) / "stream"))
        opened = asyncio.run(open_long(args.turns, Path(tmp) / "open"))
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    late = f"{args.iterations - 14}-{args.iterations - 5}"
    print(
        f"stream {args.iterations} iterations ({streamed['events']:.0f} events): "
        f"wall mean {streamed['mean_ms']:.2f} ms/event, p99 {streamed['p99_ms']:.2f} ms; "
        f"CPU mean {streamed['cpu_mean_ms']:.2f} ms/event, p99 {streamed['cpu_p99_ms']:.2f} ms"
    )
    print(
        f"  iterations 6-15 vs {late}: wall {streamed['early_mean_ms']:.2f} vs "
        f"{streamed['late_mean_ms']:.2f} ms, CPU {streamed['early_cpu_ms']:.2f} vs "
        f"{streamed['late_cpu_ms']:.2f} ms"
    )
    print(
        f"open a {opened['turns']:.0f}-turn conversation: {opened['open_s']:.2f} s; "
        f"then a turn streamed into it: CPU {opened['cpu_ms']:.2f} ms/event (iterations 6-15)"
    )
    print(f"peak RSS of the bench process: {peak_mb:.0f} MB")


if __name__ == "__main__":
    main()
