"""Harness overhead per iteration: everything cove does around a model that answers at once.

One turn of N iterations (default 300) on a real store file and a real sandbox worker, with a
zero-latency ``ScriptedClient``: each reply is ``{"thinking": ..., "code": ["x_<i> = <i> * 2"]}``
and the last one also answers. An iteration's wall time is the time between two consecutive
``IterationStarted`` events (the last one ends at ``TurnFinished``), so it covers context build,
the iteration row, the model call, parsing, one sandbox block, variable numbering and the
atomic commit. A warm-up turn runs first.

The breakdown then times the pieces on their own, through cove's public functions: a bare
``Environment.run_block`` round-trip, a bare ``Store.start_iteration`` + ``finish_iteration``,
``context_message``, ``parse_reply`` and the scripted model call.

Two scaling checks follow (``--scaling-only`` runs just these):

- a turn's start (from ``Query.run()`` to its first ``IterationStarted``: the previous turn, the
  handover, the journal, the first context message) in a conversation of 10 turns vs 1,000
  turns; target: within 1.3x;
- a turn whose state grows every iteration (two new variables per iteration, one of them a 5 KB
  string; 100 iterations): the harness time of iterations 5-15 vs 85-95 (p50 of each window);
  target: within 1.3x.

Run: ``.venv/bin/python bench/iteration_bench.py [--iterations 300] [--warmup 30]``
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import math
import statistics
import time
from collections.abc import Awaitable, Callable, Sequence

from stack import BenchStack, bench_stack

from cove.config import Settings
from cove.engine.context import JOURNAL_ITERATIONS, context_message, request_message, system_prompt
from cove.engine.journal import Journal
from cove.engine.llm.scripted import ScriptedClient
from cove.engine.protocol import parse_reply
from cove.engine.query import Query, TurnRequest
from cove.environment.environment import Environment
from cove.events import BlockFinished, IterationStarted, TurnFinished
from cove.persistence.records import (
    ConversationRecord,
    IterationWrite,
    ReplyWrite,
)
from cove.persistence.store import Store
from cove.results import BlockResult, TurnOutcome, Usage, VarVersion

TARGET_P50_MS = 5.0
PROBES = 200  # repetitions of each piece in the breakdown
REQUEST = "Double the numbers one at a time, then tell me you are done."


def replies(count: int) -> list[dict[str, object]]:
    """``count`` scripted replies, one block each; the last one answers."""
    out: list[dict[str, object]] = [
        {"thinking": f"step {i}: double {i}", "code": [f"x_{i} = {i} * 2"]} for i in range(count)
    ]
    out[-1]["answer"] = f"done: x_{count - 1} is {{{{x_{count - 1}}}}}"
    return out


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) of ``values``, nearest rank."""
    ordered = sorted(values)
    rank = max(1, min(len(ordered), math.ceil(q / 100 * len(ordered))))
    return ordered[rank - 1]


def summary(values: Sequence[float]) -> str:
    """``p50 / p90 / p99 / mean`` in milliseconds."""
    return (
        f"p50 {percentile(values, 50):7.3f}  p90 {percentile(values, 90):7.3f}  "
        f"p99 {percentile(values, 99):7.3f}  mean {statistics.fmean(values):7.3f} ms"
    )


async def timed(probe: Callable[[int], Awaitable[object]], count: int = PROBES) -> list[float]:
    """Milliseconds taken by each of ``count`` awaited calls of ``probe(k)``."""
    times = []
    for k in range(count):
        started = time.perf_counter()
        await probe(k)
        times.append((time.perf_counter() - started) * 1000)
    return times


async def run_turn(
    settings: Settings,
    store: Store,
    env: Environment,
    conversation: ConversationRecord,
    iterations: int,
) -> list[float]:
    """Run one scripted turn; the wall time of each iteration in milliseconds."""
    query = Query(
        settings=settings,
        store=store,
        env=env,
        llm=ScriptedClient(replies(iterations)),
        conversation=conversation,
        request=TurnRequest(conversation.id, REQUEST, max_iterations=iterations),
    )
    marks: list[float] = []
    status = "missing"
    async for event in query.run():
        if isinstance(event, (IterationStarted, TurnFinished)):
            marks.append(time.perf_counter())
        if isinstance(event, BlockFinished) and not event.block.ok:
            raise RuntimeError(f"block {event.block.code!r} failed: {event.block.error}")
        if isinstance(event, TurnFinished):
            status = event.status
            if event.error:
                raise RuntimeError(f"the turn failed: {event.error}")
    if status != "done" or len(marks) != iterations + 1:
        raise RuntimeError(f"the turn ended {status} after {len(marks) - 1} iterations")
    return [(b - a) * 1000 for a, b in itertools.pairwise(marks)]


async def breakdown(store: Store, env: Environment, conversation_id: str) -> dict[str, list[float]]:
    """Time each piece of an iteration on its own (after the measured turn)."""
    system = system_prompt(env.system_prompt_docs())
    request = request_message(REQUEST, None)
    journal = Journal.from_records(
        JOURNAL_ITERATIONS,
        await store.recent_blocks(conversation_id, JOURNAL_ITERATIONS * 8),
    ).entries()
    variables = env.var_index.entries()

    async def build_context(k: int) -> str:
        return context_message(
            iteration=k + 1,
            budget=PROBES,
            prior_thinking=f"step {k}: double {k}",
            journal=journal,
            var_index=variables,
            nudges=[],
        )

    context = await build_context(0)
    reply = json.dumps(replies(1)[0])
    messages = [
        {"role": "system", "content": system},
        {"role": "user", "content": request},
        {"role": "user", "content": context},
    ]
    llm = ScriptedClient([reply] * PROBES)

    async def sink(text: str) -> None:
        pass

    async def parse(k: int) -> object:
        return parse_reply(reply)

    async def call_model(k: int) -> object:
        return await llm.complete(messages, on_delta=sink)

    async def block(k: int) -> object:
        return await env.run_block(
            f"probe = {k} * 2", position=0, timeout_s=10.0, seed=k, clock=time.time()
        )

    # A fresh conversation so the probe's version numbers cannot clash with the turn's.
    scratch = await store.create_conversation(channel="bench")
    turn = await store.start_turn(scratch.id, REQUEST)

    async def commit(k: int) -> None:
        iteration_id = await store.start_iteration(
            turn.id, k, system_prompt=system, request_message=request, context_message=context
        )
        code = f"probe = {k} * 2"
        await store.finish_iteration(
            iteration_id,
            IterationWrite(
                status="ok",
                reply=ReplyWrite(raw_reply=reply, thinking=f"step {k}"),
                blocks=(BlockResult(position=0, code=code, ok=True, duration_ms=0.3),),
                var_versions=(
                    VarVersion(
                        name="probe",
                        version=k + 1,
                        block_position=0,
                        kind="value",
                        encoded=json.dumps(k * 2),
                        type_name="int",
                        preview=str(k * 2),
                    ),
                ),
            ),
        )

    return {
        "context_message (build)": await timed(build_context),
        "model call (scripted, 0 ms)": await timed(call_model),
        "parse_reply": await timed(parse),
        "env.run_block round-trip": await timed(block),
        "store start+finish_iteration": await timed(commit),
    }


async def run(iterations: int, warmup: int) -> None:
    """Warm up, run the measured turn, time the pieces, print everything."""
    async with bench_stack(max_iterations=iterations) as stack:
        settings, store, env = stack.settings, stack.store, stack.env
        await run_turn(settings, store, env, stack.conversation, warmup)
        conversation = await store.get_conversation(stack.conversation.id)
        per_iteration = await run_turn(settings, store, env, conversation, iterations)
        pieces = await breakdown(store, env, conversation.id)
    p50 = percentile(per_iteration, 50)
    print(f"one turn of {iterations} iterations after a {warmup}-iteration warm-up turn")
    print(f"per iteration (real store file, real worker, 0 ms model): {summary(per_iteration)}")
    print(f"total {sum(per_iteration):,.0f} ms")
    print(f"\nbreakdown, each piece alone ({PROBES} calls):")
    rest = "rest (events, nudges, tasks)"
    width = max(len(name) for name in [*pieces, rest])
    for name, times in pieces.items():
        print(f"  {name:<{width}}  {summary(times)}")
    accounted = sum(percentile(times, 50) for times in pieces.values())
    print(
        f"  {rest:<{width}}  p50 {p50 - accounted:7.3f} ms (iteration p50 minus the pieces' p50s)"
    )
    verdict = "met" if p50 <= TARGET_P50_MS else "NOT met"
    print(f"\ntarget: p50 <= {TARGET_P50_MS:.1f} ms per iteration: {verdict} ({p50:.3f} ms)")


SCALING_TARGET = 1.3
START_ROUNDS = 60
GROWING_ITERATIONS = 100
GROWING_RUNS = 3


async def fill_turns(store: Store, conversation_id: str, count: int) -> None:
    """``count`` finished turns, each one iteration of six blocks, written through the store.

    Ten such turns already fill the journal, so 10 and 1,000 turns differ only in length.
    """
    system = system_prompt("")
    for k in range(count):
        turn = await store.start_turn(conversation_id, f"question {k}: " + "words " * 30)
        iteration_id = await store.start_iteration(
            turn.id, 0, system_prompt=system, request_message="request", context_message="ctx"
        )
        await store.finish_iteration(
            iteration_id,
            IterationWrite(
                status="ok",
                reply=ReplyWrite(
                    raw_reply=json.dumps(replies(1)[0]),
                    thinking=f"thinking about question {k} " * 10,
                ),
                blocks=tuple(
                    BlockResult(position=p, code=f"v{k}_{p} = {k}", ok=True, duration_ms=0.3)
                    for p in range(6)
                ),
            ),
        )
        await store.finish_turn(
            turn.id,
            TurnOutcome("done", answer=f"answer {k}", confidence="high", usage=Usage(100, 20, 0.0)),
        )


async def turn_start(stack: BenchStack) -> float:
    """Milliseconds from ``Query.run()`` to the first ``IterationStarted`` of one new turn."""
    query = Query(
        settings=stack.settings,
        store=stack.store,
        env=stack.env,
        llm=ScriptedClient([{"thinking": "nothing to run", "code": [], "answer": "done"}]),
        conversation=await stack.store.get_conversation(stack.conversation.id),
        request=TurnRequest(stack.conversation.id, REQUEST),
    )
    started = time.perf_counter()
    mark = None
    async for event in query.run():
        if isinstance(event, IterationStarted) and mark is None:
            mark = time.perf_counter()
    assert mark is not None
    return (mark - started) * 1000


async def turn_starts(short: int, long: int) -> tuple[list[float], list[float]]:
    """Turn starts after ``short`` and ``long`` turns, alternated so load hits both alike."""
    async with bench_stack() as small, bench_stack() as big:
        await fill_turns(small.store, small.conversation.id, short)
        await fill_turns(big.store, big.conversation.id, long)
        samples: tuple[list[float], list[float]] = ([], [])
        for _ in range(START_ROUNDS):
            samples[0].append(await turn_start(small))
            samples[1].append(await turn_start(big))
    return samples


def growing_replies(count: int) -> list[dict[str, object]]:
    """Replies adding two variables per iteration (one a 5 KB string); the last one answers."""
    out: list[dict[str, object]] = [
        {"thinking": f"step {i}", "code": [f"text_{i} = 'x' * 5_000 + '{i}'\nn_{i} = {i}"]}
        for i in range(count)
    ]
    out[-1]["answer"] = "done"
    return out


async def growing_state() -> list[float]:
    """Per-iteration wall time of one turn whose state grows every iteration."""
    async with bench_stack(max_iterations=GROWING_ITERATIONS) as stack:
        await run_turn(stack.settings, stack.store, stack.env, stack.conversation, 10)  # warm-up
        query = Query(
            settings=stack.settings,
            store=stack.store,
            env=stack.env,
            llm=ScriptedClient(growing_replies(GROWING_ITERATIONS)),
            conversation=await stack.store.get_conversation(stack.conversation.id),
            request=TurnRequest(stack.conversation.id, REQUEST, max_iterations=GROWING_ITERATIONS),
        )
        marks = []
        async for event in query.run():
            if isinstance(event, (IterationStarted, TurnFinished)):
                marks.append(time.perf_counter())
            if isinstance(event, TurnFinished) and event.status != "done":
                raise RuntimeError(f"the growing turn ended {event.status}: {event.error}")
    return [(b - a) * 1000 for a, b in itertools.pairwise(marks)]


async def scaling() -> None:
    """The two scaling checks: turn start vs conversation length, iteration vs state size."""
    short, long = await turn_starts(10, 1_000)
    ratio = percentile(long, 50) / percentile(short, 50)
    print("\nturn start (Query.run() to the first IterationStarted)")
    print(f"  after    10 turns  {summary(short)}")
    print(f"  after 1,000 turns  {summary(long)}")
    verdict = "met" if ratio <= SCALING_TARGET else "NOT met"
    floor = min(long) / min(short)  # the least disturbed sample of each: load noise aside
    print(
        f"  target 1,000 / 10 p50 <= {SCALING_TARGET}x: {verdict} ({ratio:.2f}x; min {floor:.2f}x)"
    )

    early: list[float] = []
    late: list[float] = []
    ratios = []
    for _ in range(GROWING_RUNS):  # one run is sequential: repeat it so a load spike averages out
        per_iteration = await growing_state()
        early += per_iteration[5:16]
        late += per_iteration[85:96]
        ratios.append(percentile(per_iteration[85:96], 50) / percentile(per_iteration[5:16], 50))
    ratio = percentile(late, 50) / percentile(early, 50)
    print(
        f"\nstate growing every iteration ({GROWING_ITERATIONS} iterations, 2 variables each; "
        f"{GROWING_RUNS} runs, ratio per run: {', '.join(f'{r:.2f}' for r in ratios)})"
    )
    print(f"  iterations  5-15   {summary(early)}")
    print(f"  iterations 85-95   {summary(late)}")
    verdict = "met" if ratio <= SCALING_TARGET else "NOT met"
    print(f"  target 85-95 / 5-15 p50 <= {SCALING_TARGET}x: {verdict} ({ratio:.2f}x)")


def main(argv: Sequence[str] | None = None) -> None:
    """Parse arguments and run the benchmark."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--iterations", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--scaling-only", action="store_true")
    args = parser.parse_args(argv)
    if not args.scaling_only:
        asyncio.run(run(args.iterations, args.warmup))
    asyncio.run(scaling())


if __name__ == "__main__":
    main()
