"""Host CPU per iteration with the real ``openai`` client reading a streamed reply.

The fake endpoint (``tests/fakes/openai_server.py``) runs in its own process, so the CPU time
this process spends is cove's alone: the engine, the store's thread and the ``openai`` client
(the sandbox worker is another process too). Two figures:

- **per iteration**: one turn of N iterations (default 60, after a warm-up turn) through
  ``Query`` on a real store file and a real worker; each reply is about 900 characters,
  streamed in chunks of 16 (about 57 chunks, like a model's tokens); chunks that arrive while
  the engine is busy go out as one ``ModelDelta``, so a turn publishes about one per reply on a
  fast endpoint. CPU time of this process over the turn / N, and the events by kind.
- **through ``Conversations``**: the same turn sent with ``Conversations.send`` while one
  ``watch`` stream reads along (the hub, the sender's stream and the watcher included): CPU
  per iteration and the model deltas the watcher received.
- **per chunk**: ``OpenAIClient.complete`` alone on a reply of 250 chunks, CPU per chunk.
- **after a burst**: a 6-chunk call alone, then after 100 calls at once (the connections a
  service of many conversations keeps open).

Target (issue #29): host CPU per iteration <= 5 ms. The machine may be shared: CPU times are
upper bounds; the ratio of two runs in one sitting is what to compare.

Run: ``.venv/bin/python bench/stream_bench.py [--iterations 60] [--calls 40]``
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

from stack import bench_stack

from cove.config import Settings
from cove.conversation import Conversations
from cove.engine.llm.openai import OpenAIClient
from cove.engine.query import Query, TurnRequest
from cove.events import ModelDelta, TurnFinished

ROOT = Path(__file__).resolve().parents[1]
TARGET_MS = 5.0
CHUNK = 16
PADDING = "I keep going one step at a time and check what each block printed. " * 13
REQUEST = "Double the numbers one at a time, then tell me you are done."


def replies(count: int) -> list[dict[str, object]]:
    """``count`` replies of about 900 characters, one block each; the last one answers."""
    out: list[dict[str, object]] = [
        {"thinking": f"step {i}: double {i}. {PADDING}", "code": [f"x_{i} = {i} * 2"]}
        for i in range(count)
    ]
    out[-1]["answer"] = "done"
    return out


@contextlib.asynccontextmanager
async def fake_endpoint(script: Sequence[object], chunk: int = CHUNK) -> AsyncIterator[str]:
    """A fake endpoint in a subprocess serving ``script``; yields its base URL."""
    with tempfile.NamedTemporaryFile("w", suffix=".json") as file:
        json.dump(list(script), file)
        file.flush()
        async with _serving(file.name, chunk) as url:
            yield url


@contextlib.asynccontextmanager
async def _serving(script: str, chunk: int) -> AsyncIterator[str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        *("-m", "tests.fakes.openai_server", "--port", "0", "--script", script),
        *("--chunk-size", str(chunk)),
        stdout=asyncio.subprocess.PIPE,
        cwd=ROOT,
    )
    try:
        assert process.stdout is not None
        line = (await process.stdout.readline()).decode()
        if not line.startswith("listening on "):
            raise RuntimeError(f"the fake endpoint did not start: {line!r}")
        yield line.split()[-1]
    finally:
        process.terminate()
        await process.wait()


async def per_iteration(iterations: int, warmup: int) -> tuple[float, float, dict[str, int]]:
    """CPU ms per iteration, wall ms per iteration, and the measured turn's events by kind."""
    script = replies(warmup) + replies(iterations)
    async with (
        fake_endpoint(script) as url,
        bench_stack(max_iterations=max(iterations, warmup)) as stack,
    ):
        settings = stack.settings.replace(base_url=url, api_key="bench", max_retries=0)
        llm = OpenAIClient(settings.model)
        try:
            kinds: collections.Counter[str] = collections.Counter()
            for count in (warmup, iterations):
                kinds.clear()
                query = Query(
                    settings=settings,
                    store=stack.store,
                    env=stack.env,
                    llm=llm,
                    conversation=await stack.store.get_conversation(stack.conversation.id),
                    request=TurnRequest(stack.conversation.id, REQUEST, max_iterations=count),
                )
                cpu, wall = time.process_time(), time.perf_counter()
                async for event in query.run():
                    kinds[type(event).__name__] += 1
                    if isinstance(event, TurnFinished) and event.status != "done":
                        raise RuntimeError(f"the turn ended {event.status}: {event.error}")
                cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        finally:
            await llm.aclose()
    return cpu * 1000 / iterations, wall * 1000 / iterations, dict(kinds)


async def through_conversations(iterations: int, warmup: int) -> tuple[float, int, int]:
    """CPU ms per iteration of a sent turn with one watcher; deltas sent and watched."""
    script = replies(warmup) + replies(iterations)
    async with fake_endpoint(script) as url:
        with tempfile.TemporaryDirectory(prefix="cove-bench-") as tmp:
            settings = Settings.load(env={}, data_dir=Path(tmp)).replace(
                base_url=url, api_key="bench", max_retries=0, worker_pool_size=1,
                max_iterations=max(iterations, warmup), sandbox_libraries=False,
            )  # fmt: skip
            async with Conversations.open(settings) as convs:
                conv = await convs.create()
                await convs.send(conv.id, REQUEST, max_iterations=warmup).finished()
                async with convs.watch(conv.id) as watcher:
                    watched = asyncio.create_task(_deltas(watcher))
                    cpu = time.process_time()
                    sent = 0
                    handle = convs.send(conv.id, REQUEST, max_iterations=iterations)
                    async for event in handle:
                        sent += isinstance(event, ModelDelta)
                        if isinstance(event, TurnFinished) and event.status != "done":
                            raise RuntimeError(f"the turn ended {event.status}: {event.error}")
                    seen = await watched
                    cpu = time.process_time() - cpu
    return cpu * 1000 / iterations, sent, seen


async def _deltas(watcher: AsyncIterator[object]) -> int:
    """Model deltas read from ``watcher`` until the turn finishes."""
    count = 0
    async for event in watcher:
        count += isinstance(event, ModelDelta)
        if isinstance(event, TurnFinished):
            return count
    return count


async def per_chunk(calls: int, chunks: int) -> tuple[float, float]:
    """CPU µs per streamed chunk and per call of ``OpenAIClient.complete`` alone."""
    text = "y" * (CHUNK * chunks)
    async with fake_endpoint([text] * (calls + 5)) as url, bench_stack() as stack:
        settings = stack.settings.replace(base_url=url, api_key="bench", max_retries=0)
        received = 0

        async def sink(piece: str) -> None:
            nonlocal received
            received += 1

        async with OpenAIClient(settings.model) as llm:
            messages = [{"role": "user", "content": "go"}]
            for _ in range(5):  # warm-up: connections, first-call imports
                await llm.complete(messages, kind="subquery", on_delta=sink)
            samples = []
            for _ in range(calls):
                cpu = time.process_time()
                await llm.complete(messages, kind="subquery", on_delta=sink)
                samples.append(time.process_time() - cpu)
    per_call = statistics.median(samples) * 1e6
    return per_call / chunks, per_call


async def after_burst(calls: int, burst: int, chunks: int = 6) -> tuple[float, float]:
    """CPU ms of a short call (``chunks`` chunks) alone, then after ``burst`` calls at once
    left that many connections open (what a service of many conversations keeps)."""
    text = "y" * (CHUNK * chunks)
    async with fake_endpoint([text] * (burst + 2 * calls + 5)) as url, bench_stack() as stack:
        settings = stack.settings.replace(base_url=url, api_key="bench", max_retries=0)
        messages = [{"role": "user", "content": "go"}]
        async with OpenAIClient(settings.model) as llm:
            figures = []
            for concurrent in (1, burst):
                await asyncio.gather(
                    *(llm.complete(messages, kind="subquery") for _ in range(concurrent))
                )
                samples = []
                for _ in range(calls):
                    cpu = time.process_time()
                    await llm.complete(messages, kind="subquery")
                    samples.append(time.process_time() - cpu)
                figures.append(statistics.median(samples) * 1000)
    return figures[0], figures[1]


def main(argv: Sequence[str] | None = None) -> None:
    """Run both measurements and print them."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--iterations", type=int, default=60)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--calls", type=int, default=40)
    parser.add_argument("--chunks", type=int, default=250)
    parser.add_argument("--burst", type=int, default=100, help="calls at once before the last")
    args = parser.parse_args(argv)
    cpu_ms, wall_ms, kinds = asyncio.run(per_iteration(args.iterations, args.warmup))
    print(f"one turn of {args.iterations} iterations, replies ~900 chars in {CHUNK}-char chunks")
    print(f"  host CPU per iteration  {cpu_ms:7.2f} ms   (wall {wall_ms:7.2f} ms)")
    total = sum(kinds.values())
    print(f"  events {total:,}: " + ", ".join(f"{k} {n:,}" for k, n in sorted(kinds.items())))
    verdict = "met" if cpu_ms <= TARGET_MS else "NOT met"
    print(f"  target host CPU per iteration <= {TARGET_MS:.1f} ms: {verdict}")
    cpu_ms, sent, seen = asyncio.run(through_conversations(args.iterations, args.warmup))
    print("\nthe same turn through Conversations.send with one watcher reading along")
    print(f"  host CPU per iteration  {cpu_ms:7.2f} ms")
    print(f"  model deltas: sender's stream {sent:,}, watcher {seen:,}")
    chunk_us, call_us = asyncio.run(per_chunk(args.calls, args.chunks))
    print(f"\nOpenAIClient.complete alone, {args.chunks} chunks per reply (median of {args.calls})")
    print(f"  CPU per call {call_us / 1000:7.2f} ms   per chunk {chunk_us:6.1f} µs")
    alone, burst = asyncio.run(after_burst(args.calls, args.burst))
    print(f"\na 6-chunk call alone, then after {args.burst} calls at once (median of {args.calls})")
    print(f"  CPU per call {alone:7.2f} ms   after the burst {burst:7.2f} ms")
    print(f"\nload average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
