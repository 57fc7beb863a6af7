"""Many conversations at once through ``Conversations``: throughput, overhead, memory, LRU bound.

Levels of 1, 10 and 100 concurrent conversations; each runs T turns (default 3) of 1 or 2
iterations against a scripted model that waits 50 ms per call. Each level runs in its own
subprocess, so the host's peak RSS (a high-water mark) belongs to that level alone. With
``max_live_environments=32`` the 100-level has to evict and rebuild environments.

Per level it prints: turns per second; p50/p99 turn latency minus the model's own time
(latency - 50 ms x model calls of that turn); the host's peak RSS; the sandbox workers' PSS
(sampled from ``/proc`` while they run: the largest total seen and the mean per worker); and
whether ``convs._live.peak`` stayed within ``max_live_environments``.

Run: ``.venv/bin/python bench/concurrency_bench.py [--turns 3] [--levels 1 10 100]``

``--serve`` runs the same load through a ``cove serve`` subprocess's HTTP API instead (the real
``openai`` client against a fake endpoint that waits 50 ms per call; one HTTP client per
conversation sending and reading its SSE stream), once per live-environment bound
(``--bounds 32 128``): the difference between the bounds is what evicting and rebuilding
environments costs. See ``serve_load.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from cove.config import ModelSettings, Settings
from cove.conversation.conversations import Conversations
from cove.conversation.memory import pss_bytes
from cove.engine.llm import LLMClient, Message
from cove.engine.llm.scripted import ScriptedClient
from cove.events import IterationStarted, TurnFinished

MODEL_DELAY_S = 0.05
MAX_LIVE = 32
LEVELS = (1, 10, 100)
SAMPLE_EVERY_S = 0.05
_PLAN = re.compile(r"\[plan: (\d+) iterations?\]")
_ITERATION = re.compile(r"\[iteration (\d+)/")


@dataclass
class LevelResult:
    """What one level measured (sent from the level's subprocess as JSON)."""

    conversations: int
    turns: int
    seconds: float
    overhead_ms: list[float]
    model_calls: int
    host_peak_rss_kb: int
    workers_started: int
    workers_peak: int
    workers_peak_pss_kb: int
    worker_pss_kb: float
    live_peak: int
    max_live: int
    statuses: dict[str, int]


def reply(messages: Sequence[Message]) -> Mapping[str, Any]:
    """Answer at the iteration the request's ``[plan: N iterations]`` asks for."""
    # The request message may quote the previous request (the handover): the plan is its last.
    wanted = int(_PLAN.findall(messages[1]["content"])[-1])
    match = _ITERATION.search(messages[2]["content"])
    iteration = int(match.group(1)) if match else 1
    out: dict[str, Any] = {
        "thinking": f"iteration {iteration}",
        "code": [f"step = {iteration} * 2"],
    }
    if iteration >= wanted:
        out["answer"] = "step is {{step}}"
    return out


def worker_pss_kb(host: int | None = None, pss: bool = True) -> dict[int, int]:
    """PSS in kB of each sandbox worker of the ``host`` process (this one), by pid: what each
    takes with the pages it shares with the zygote and its siblings divided among them (RSS
    would count the shared interpreter and libraries once per worker). With ``pss`` False, 0
    for each (which workers are alive, without the cost of reading PSS: the kernel walks each
    worker's page tables, a few ms of CPU per worker).

    Workers are the children of the host, and the children of its zygote (the fork server,
    itself not counted).
    """
    me = host or os.getpid()
    workers: list[int] = []
    for child in _children(me):  # the children's files, not a scan of every process
        with contextlib.suppress(OSError):
            if b"sandbox.worker.zygote" in Path(f"/proc/{child}/cmdline").read_bytes():
                workers += _children(child)
            else:
                workers.append(child)
    found: dict[int, int] = {}
    for pid in workers:
        taken = pss_bytes(pid) if pss else 0
        if taken is not None:
            found[pid] = taken // 1024
    return found


def _children(pid: int) -> list[int]:
    """The child processes of ``pid`` (of any of its threads)."""
    children: list[int] = []
    with contextlib.suppress(OSError):
        for task in os.scandir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError):
                children += map(int, Path(task.path, "children").read_text().split())
    return children


async def sample_workers(samples: list[dict[int, int]], stop: asyncio.Event) -> None:
    """Append ``worker_pss_kb()`` every ``SAMPLE_EVERY_S`` until ``stop`` is set."""
    while not stop.is_set():
        samples.append(await asyncio.to_thread(worker_pss_kb))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), SAMPLE_EVERY_S)


async def run_level(conversations: int, turns: int) -> LevelResult:
    """Run ``conversations`` conversations of ``turns`` turns each, all at once."""
    with tempfile.TemporaryDirectory(prefix="cove-bench-") as tmp:
        settings = Settings.load(env={}, data_dir=Path(tmp), max_live_environments=MAX_LIVE)
        # Every call gets the same callable: which conversation takes which entry does not matter.
        client = ScriptedClient([reply] * (conversations * turns * 2), delay_s=MODEL_DELAY_S)

        def factory(settings: ModelSettings, model: str) -> LLMClient:
            return client

        overhead: list[float] = []
        statuses: dict[str, int] = {}
        calls = 0

        async def converse(conversation_id: str, index: int) -> None:
            nonlocal calls
            for turn in range(turns):
                wanted = 1 + (index + turn) % 2
                text = f"Double a number. [plan: {wanted} iterations]"
                started = time.perf_counter()
                iterations = 0
                async for event in convs.send(conversation_id, text):
                    if isinstance(event, IterationStarted):
                        iterations += 1
                    elif isinstance(event, TurnFinished):
                        statuses[event.status] = statuses.get(event.status, 0) + 1
                latency = time.perf_counter() - started
                calls += iterations
                overhead.append((latency - MODEL_DELAY_S * iterations) * 1000)

        async with await Conversations.open(settings, llm_factory=factory) as convs:
            ids = [(await convs.create(channel="bench")).id for _ in range(conversations)]
            samples: list[dict[int, int]] = []
            stop = asyncio.Event()
            sampler = asyncio.create_task(sample_workers(samples, stop))
            started = time.perf_counter()
            await asyncio.gather(*(converse(cid, i) for i, cid in enumerate(ids)))
            seconds = time.perf_counter() - started
            stop.set()
            await sampler
            live_peak = convs._live.peak
    busy = [s for s in samples if s] or [{}]
    return LevelResult(
        conversations=conversations,
        turns=conversations * turns,
        seconds=seconds,
        overhead_ms=overhead,
        model_calls=calls,
        host_peak_rss_kb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
        workers_started=len({pid for sample in busy for pid in sample}),
        workers_peak=max(len(s) for s in busy),
        workers_peak_pss_kb=max(sum(s.values()) for s in busy),
        worker_pss_kb=sum(sum(s.values()) for s in busy) / max(1, sum(len(s) for s in busy)),
        live_peak=live_peak,
        max_live=settings.sandbox.max_live_environments,
        statuses=statuses,
    )


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) of ``values``, nearest rank."""
    ordered = sorted(values)
    return ordered[max(1, min(len(ordered), math.ceil(q / 100 * len(ordered)))) - 1]


def run_in_subprocess(conversations: int, turns: int) -> LevelResult:
    """Run one level in a fresh interpreter and read its result."""
    done = subprocess.run(
        [sys.executable, __file__, "--level", str(conversations), "--turns", str(turns)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"level {conversations} failed:\n{done.stderr}")
    return LevelResult(**json.loads(done.stdout.strip().splitlines()[-1]))


def report(result: LevelResult) -> str:
    """One table row."""
    bound_ok = result.live_peak <= result.max_live
    bound = f"{result.live_peak}/{result.max_live} {'ok' if bound_ok else 'EXCEEDED'}"
    return (
        f"{result.conversations:>5} | {result.turns / result.seconds:>9.1f} | "
        f"{percentile(result.overhead_ms, 50):>8.1f} {percentile(result.overhead_ms, 99):>8.1f} | "
        f"{result.host_peak_rss_kb / 1024:>9.1f} | {result.workers_started:>7} "
        f"{result.workers_peak:>4} "
        f"{result.workers_peak_pss_kb / 1024:>8.1f} {result.worker_pss_kb / 1024:>7.1f} | {bound}"
    )


def main(argv: Sequence[str] | None = None) -> None:
    """Run every level in its own subprocess and print the table (or run one level)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--levels", type=int, nargs="+", default=list(LEVELS))
    parser.add_argument("--level", type=int, help=argparse.SUPPRESS)  # one level, JSON out
    parser.add_argument("--serve", action="store_true", help="through cove serve's HTTP API")
    parser.add_argument("--bounds", type=int, nargs="+", default=[32, 128])
    args = parser.parse_args(argv)
    if args.serve:
        serve_main(args.levels, args.bounds, args.turns)
        return
    if args.level is not None:
        print(json.dumps(asdict(asyncio.run(run_level(args.level, args.turns)))))
        return
    print(
        f"{args.turns} turns per conversation of 1-2 iterations; model waits "
        f"{MODEL_DELAY_S * 1000:.0f} ms per call; max_live_environments={MAX_LIVE}; "
        f"{os.cpu_count()} cores\n"
        "overhead = turn latency - 50 ms x model calls of the turn; workers (sampled every "
        f"{SAMPLE_EVERY_S * 1000:.0f} ms): started, peak alive, peak total PSS, mean PSS each\n"
    )
    header = (
        f"{'convs':>5} | {'turns/s':>9} | {'p50 ms':>8} {'p99 ms':>8} | {'host MB':>9} | "
        f"{'started':>7} {'peak':>4} {'peak MB':>8} {'MB/wkr':>7} | live peak/bound"
    )
    print(header)
    print("-" * len(header))
    for level in args.levels:
        result = run_in_subprocess(level, args.turns)
        print(report(result), flush=True)
        if set(result.statuses) != {"done"}:
            print(f"      turn statuses: {result.statuses}")


def serve_report(result: Any) -> str:
    """One row of the ``--serve`` table."""
    m = result.scraped
    wait = m.get("cove_queue_wait_seconds_sum", 0) / max(
        1, m.get("cove_queue_wait_seconds_count", 0)
    )
    model = m.get("cove_model_latency_seconds_sum", 0) / max(
        1, m.get("cove_model_latency_seconds_count", 0)
    )
    return (
        f"{result.conversations:>5} {result.max_live:>5} | {result.turns / result.seconds:>7.1f} | "
        f"{percentile(result.overhead_ms, 50):>7.0f} {percentile(result.overhead_ms, 99):>7.0f} | "
        f"{result.serve_peak_rss_kb / 1024:>7.0f} | {result.workers_started:>5} "
        f"{result.workers_peak:>4} {result.workers_peak_pss_kb / 1024:>7.0f} "
        f"{result.worker_pss_kb_mean / 1024:>6.1f} | {wait * 1000:>6.1f} {model * 1000:>7.1f} | "
        f"{result.serve_cpu_s / result.turns * 1000:>6.1f} "
        f"{result.driver_cpu_s / result.turns * 1000:>6.1f}"
    )


def serve_main(levels: Sequence[int], bounds: Sequence[int], turns: int) -> None:
    """Run every (level, bound) through ``cove serve`` and print the table."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from serve_load import run_serve_level

    print(
        f"through cove serve (HTTP + SSE): {turns} turns per conversation of 1-2 iterations; "
        f"model endpoint waits {MODEL_DELAY_S * 1000:.0f} ms per call; {os.cpu_count()} cores\n"
        "overhead = client-seen turn latency - 50 ms x model calls; serve MB = peak RSS of the "
        "serve process; workers: started, peak alive, peak total MB, mean MB each; "
        "queue wait and model latency: means from /metrics; CPU ms per turn of the serve "
        "process and of the load driver (HTTP clients + fake endpoint)\n"
    )
    header = (
        f"{'convs':>5} {'bound':>5} | {'turns/s':>7} | {'p50 ms':>7} {'p99 ms':>7} | "
        f"{'serveMB':>7} | {'start':>5} {'peak':>4} {'peakMB':>7} {'MB/wkr':>6} | "
        f"{'wait ms':>6} {'model ms':>7} | {'srvCPU':>6} {'drvCPU':>6}"
    )
    print(header)
    print("-" * len(header))
    for level in levels:
        for bound in bounds:
            result = asyncio.run(run_serve_level(level, turns, bound))
            print(serve_report(result), flush=True)
            if set(result.statuses) != {"done"}:
                print(f"      turn statuses: {result.statuses}")


if __name__ == "__main__":
    main()
