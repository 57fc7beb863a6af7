"""The terminal UI under load: a turn run by the engine with the app following it, events fed
one per frame and in a burst, in a fresh conversation and in a long one.

Following a live turn (the figure the targets are about): a scripted model (it streams each reply
in chunks, as an endpoint does) and the real store and sandbox worker run a turn of
``--iterations`` iterations twice in the same conversation, once with nobody watching and once
with the app following it through ``watch`` (headless under Textual's Pilot). The difference of
the process's CPU time is the app's share; divided by the turn's events, the CPU per event. It is
measured for iterations 6-15 and for the last ten but five (the cost must not grow with the
turn), and in a fresh conversation and one of ``--turns`` earlier turns (it must not grow with the
conversation either). The app draws once per frame, so events that arrive together share one
layout and paint.

One event per frame (the worst case: events slower than frames): the bench feeds a turn's events
(``TurnStarted``, then per iteration ``IterationStarted``, ``ModelReply``, ``BlockFinished`` and
``VarsChanged``, then ``TurnFinished``) to ``app.apply`` exactly as the watch does, one every
``GAP`` seconds, so each gets a frame of its own; CPU per event for iterations 6-15 and late,
in a fresh conversation and in one of ``--turns`` turns (the frame's cost is what a long
conversation could add to: less noisy than the live figure, which depends on how many events a
frame gathers).

A burst: 50 such events given to the app at once (a watcher that fell behind, a replay), CPU for
the whole burst until it is drawn.

Opening: the time from opening the ``--turns``-turn conversation to its newest turns being shown.

CPU time is the process's (other processes on a loaded machine do not count; the sandbox worker
is another process); wall times on a shared machine are upper bounds.

Run: ``.venv/bin/python bench/tui_bench.py [--iterations 300] [--turns 100]``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import tempfile
import time
from pathlib import Path

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
            index=1,  # 1-based, as the engine sends it
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


#: Seconds between events fed one per frame (a frame is 1/60 s; a loaded machine is slower).
GAP = 0.05
BURST = 50
#: Turn ids of the turns the bench feeds (above any the store gives out in a run).
FED, BURST_TURN = 10_000, 10_001


def settings_at(data: Path, iterations: int) -> Settings:
    return Settings.load(env={}, data_dir=data).replace(
        worker_pool_size=1, max_iterations=iterations + 5, sandbox_libraries=False
    )


async def drawn(app: CoveApp, turn_id: int) -> None:
    """Until the app shows turn ``turn_id`` finished, and one more frame."""
    # The app's state has no event to wait on: it is polled.
    while turn_id not in app.timeline.turns or not app.timeline.turns[turn_id].finished:  # noqa: ASYNC110
        await asyncio.sleep(0.01)
    await asyncio.sleep(GAP)


async def per_frame(iterations: int, turns: int, data: Path) -> dict[str, float]:
    """A turn's events fed one per frame into a conversation of ``turns`` earlier turns: the CPU
    per event, early and late in the turn; then a burst."""
    settings = settings_at(data, iterations)
    factory = scripted_factory(script(0, turns))
    async with await Conversations.open(settings, llm_factory=factory) as convs:
        conv = await convs.create(channel="tui", title="fed")
        for i in range(turns):
            await convs.send(conv.id, f"compute x{i}").finished()
        app = CoveApp(convs, conv.id)
        async with app.run_test(size=SIZE) as pilot:
            while app.timeline.turn_count < turns:  # noqa: ASYNC110 (polled, as in drawn)
                await asyncio.sleep(0.01)
            for _ in range(3):  # the transcript's widgets mounted and drawn
                await pilot.pause()
            fed = FED
            app.apply(TurnStarted(turn_id=fed, position=turns + 1, request="add up a long series"))
            marks: dict[int, float] = {}
            for n in range(1, iterations + 1):
                marks[n] = time.process_time()
                for event in iteration_events(fed, n, iterations):
                    app.apply(event)
                    await asyncio.sleep(GAP)
            marks[iterations + 1] = time.process_time()
            app.apply(finish(fed, iterations))
            await drawn(app, fed)
            burst = await burst_cpu(app)
    late = iterations - 14
    return {
        "early_ms": window(marks, 6, 10) / 4,
        "late_ms": window(marks, late, 10) / 4,
        "all_ms": window(marks, 1, iterations) / 4,
        "burst_ms": burst,
    }


def window(marks: dict[int, float], first: int, count: int) -> float:
    """CPU milliseconds per iteration over iterations ``first`` .. ``first + count - 1``."""
    return (marks[first + count] - marks[first]) / count * 1e3


def finish(turn_id: int, iterations: int) -> TurnFinished:
    return TurnFinished(
        turn_id=turn_id,
        outcome=TurnOutcome("done", "The total is **45150**.", "high"),
        iterations=iterations,
        duration_ms=1.0,
    )


async def burst_cpu(app: CoveApp) -> float:
    """CPU milliseconds from ``BURST`` events given at once to their being drawn."""
    events: list[Event] = [TurnStarted(turn_id=BURST_TURN, position=BURST_TURN, request="a burst")]
    n = 0
    while len(events) < BURST - 1:
        n += 1
        events += iteration_events(BURST_TURN, n, 100)
    events = [*events[: BURST - 1], finish(BURST_TURN, n)]
    start = time.process_time()
    for event in events:
        app.apply(event)
    await drawn(app, BURST_TURN)
    return (time.process_time() - start) * 1e3


def script(iterations: int, turns: int) -> list[str]:
    """The model's replies: ``turns`` one-iteration turns, then two turns of ``iterations``."""
    short = [
        json.dumps(
            {"thinking": "t", "code": [f"x{i} = {i} * 2"], "answer": f"x{i} is {{{{x{i}}}}}"}
        )
        for i in range(turns)
    ]
    long: list[str] = []
    for n in range(1, iterations + 1):
        code = "total = 0\nrows = []" if n == 1 else iteration_code(n)
        reply: dict[str, object] = {"thinking": f"step {n}: add {n} to the total", "code": [code]}
        if n == iterations:
            reply["answer"] = "The total is **{{total}}**."
        long.append(json.dumps(reply))
    return short + long + long


def iteration_code(n: int) -> str:
    return f"total = total + {n}\nrows.append({{'n': {n}, 'square': {n} * {n}}})\ntotal"


async def run_turn(convs: Conversations, conv_id: str) -> tuple[dict[int, float], int, float]:
    """Run one turn; the CPU mark at each iteration's start, the events, the CPU in all."""
    start = time.process_time()
    marks: dict[int, float] = {}
    events = 0
    async for event in convs.send(conv_id, "add up a long series"):
        events += 1
        if isinstance(event, IterationStarted):
            marks[event.iteration] = time.process_time()
    marks[max(marks) + 1] = time.process_time()
    return marks, events, time.process_time() - start


async def following(iterations: int, turns: int, data: Path) -> dict[str, float]:
    """A turn run by the engine, alone and then with the app following it: the app's CPU per
    event, in a conversation of ``turns`` earlier turns."""
    settings = settings_at(data, iterations)
    factory = scripted_factory(script(iterations, turns))
    async with await Conversations.open(settings, llm_factory=factory) as convs:
        conv = await convs.create(channel="tui", title="followed")
        for i in range(turns):
            await convs.send(conv.id, f"compute x{i}").finished()
        alone, events, alone_cpu = await run_turn(convs, conv.id)
        app = CoveApp(convs, conv.id)
        async with app.run_test(size=SIZE) as pilot:
            opened = time.perf_counter()
            while app.timeline.turn_count < turns + 1:  # noqa: ASYNC110 (polled, as in drawn)
                await asyncio.sleep(0.01)
            shown = time.perf_counter() - opened
            for _ in range(3):  # the transcript's widgets mounted and drawn: not the turn's cost
                await pilot.pause()
            watched, _, watched_cpu = await run_turn(convs, conv.id)
            last = max(app.timeline.turns)
            start = time.process_time()
            await drawn(app, last)
            watched_cpu += time.process_time() - start  # the frames after the turn's end
    per_iteration = events / iterations
    late = iterations - 14

    def share(first: int) -> float:
        return (window(watched, first, 10) - window(alone, first, 10)) / per_iteration

    return {
        "events": events,
        "engine_ms": alone_cpu / events * 1e3,
        "app_ms": (watched_cpu - alone_cpu) / events * 1e3,
        "early_ms": share(6),
        "late_ms": share(late),
        "open_s": shown,
    }


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
            app.save_screenshot(path.name, str(path.parent))


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
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        fresh = asyncio.run(following(args.iterations, 0, Path(tmp) / "fresh"))
        long = asyncio.run(following(args.iterations, args.turns, Path(tmp) / "long"))
        frames = asyncio.run(per_frame(args.iterations, 0, Path(tmp) / "frames"))
        frames_long = asyncio.run(per_frame(args.iterations, args.turns, Path(tmp) / "framesl"))
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    late = f"{args.iterations - 14}-{args.iterations - 5}"
    for name, run in (("fresh conversation", fresh), (f"after {args.turns} turns", long)):
        print(
            f"following a live {args.iterations}-iteration turn, {name} ({run['events']:.0f} "
            f"events): app CPU {run['app_ms']:.2f} ms/event (the engine alone: "
            f"{run['engine_ms']:.2f}); iterations 6-15 vs {late}: {run['early_ms']:.2f} vs "
            f"{run['late_ms']:.2f} ms/event"
        )
    print(
        f"  {args.turns} turns vs fresh: {long['app_ms'] / fresh['app_ms']:.2f}x "
        f"(iterations 6-15: {long['early_ms'] / fresh['early_ms']:.2f}x)"
    )
    for name, run in (("fresh", frames), (f"after {args.turns} turns", frames_long)):
        print(
            f"one event per frame, {name}: CPU {run['all_ms']:.2f} ms/event; iterations 6-15 vs "
            f"{late}: {run['early_ms']:.2f} vs {run['late_ms']:.2f} ms"
        )
    print(
        f"  {args.turns} turns vs fresh: {frames_long['all_ms'] / frames['all_ms']:.2f}x "
        f"(iterations 6-15: {frames_long['early_ms'] / frames['early_ms']:.2f}x)"
    )
    print(
        f"a burst of {BURST} events at once: CPU {frames['burst_ms']:.1f} ms until drawn "
        f"({frames['burst_ms'] / BURST:.2f} ms/event)"
    )
    print(f"open a {args.turns}-turn conversation: {long['open_s']:.2f} s to its newest turns")
    print(f"peak RSS of the bench process: {peak_mb:.0f} MB")
    print(
        f"load average {load:.1f} at the start, {os.getloadavg()[0]:.1f} at the end on "
        f"{os.cpu_count()} cores (CPU times are upper bounds on a loaded machine)"
    )


if __name__ == "__main__":
    main()
