"""The concurrency benchmark through ``cove serve``'s HTTP API (``concurrency_bench.py --serve``,
or this script alone to compare process counts).

A real ``cove serve`` subprocess, the real ``openai`` client against the fake endpoint (which
waits 50 ms per call), and one client per conversation that sends over HTTP and reads the
conversation's SSE stream. Everything but the model's own 50 ms is overhead: HTTP, SSE, the
engine, the sandbox, the database and (with a small live-environment bound) evicting and
rebuilding environments.

Run: ``.venv/bin/python bench/serve_load.py [--processes 1 2] [--conversations 100]
[--turns 3] [--bound N]``: one row per process count (turns/s, client-seen overhead p50/p99,
sandbox workers started), then the ratios of the last count to the first. The bound (default:
the `max_live_environments` setting's, memory deciding within it) is per
process: with affinity each process keeps only its own conversations live.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from concurrency_bench import MODEL_DELAY_S, percentile, reply, worker_pss_kb  # noqa: E402

from tests.fakes.openai_server import FakeOpenAI  # noqa: E402

_URL = re.compile(r"^cove serve: http://localhost:(\d+)/login\?token=([A-Za-z0-9_-]+)")


@dataclass
class ServeLevelResult:
    """What one level through ``cove serve`` measured."""

    conversations: int
    max_live: int | None  # None: the setting's default
    processes: int
    turns: int
    seconds: float
    overhead_ms: list[float]
    model_calls: int
    serve_peak_rss_kb: int
    workers_started: int
    workers_peak: int
    workers_peak_pss_kb: int
    worker_pss_kb_mean: float
    statuses: dict[str, int]
    scraped: dict[str, float]
    serve_cpu_s: float  # CPU time of the serve process (and its reaped children) in the run
    driver_cpu_s: float  # CPU time of this process (clients and fake endpoint) in the run


class Events:
    """The SSE events of one open stream, read one at a time."""

    def __init__(self, lines: AsyncIterator[str]) -> None:
        self._lines = lines

    async def next(self) -> dict[str, Any]:
        data: dict[str, Any] | None = None
        async for line in self._lines:
            if line.startswith("data: "):
                data = json.loads(line[6:])
            elif line == "" and data is not None:
                return data
        raise RuntimeError("the event stream ended")


def start_serve(
    env: dict[str, str], log: deque[str], processes: int = 1
) -> tuple[subprocess.Popen[str], int, str]:
    """``cove serve --processes N`` on a free port; returns the process, the port and the
    login token.

    Its stderr is read to the end by a thread (a full pipe would stall the service), keeping
    the last lines in ``log``.
    """
    proc = subprocess.Popen(
        [
            sys.executable,
            *("-m", "cove", "serve", "--port", "0", "--log-level", "WARNING"),
            *("--processes", str(processes)),
        ],
        env=env,
        cwd=ROOT,
        text=True,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    assert proc.stderr is not None
    for line in proc.stderr:
        log.append(line)
        match = _URL.match(line)
        if match:
            threading.Thread(target=log.extend, args=(proc.stderr,), daemon=True).start()
            return proc, int(match.group(1)), match.group(2)
    raise RuntimeError("cove serve did not start:\n" + "".join(log))


def serving_pids(pid: int, processes: int) -> list[int]:
    """The processes that run the service: ``pid`` alone, or the supervisor's children."""
    if processes <= 1:
        return [pid]
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return [int(child) for child in children]


def peak_rss_kb(pid: int) -> int:
    """The process's resident-set high-water mark (VmHWM) in kB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (from ``/proc/PID/stat``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def own_cpu_seconds() -> float:
    """User + system CPU time of this process so far."""
    times = os.times()
    return times.user + times.system


def scrape(text: str) -> dict[str, float]:
    """The metric samples of a Prometheus scrape, by name with labels."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("cove_") and " " in line:
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


#: Which workers are alive is sampled this often; their PSS (costly: the kernel walks each
#: worker's page tables) this often and once more when the load ends.
ALIVE_EVERY_S = 0.25
PSS_EVERY_S = 10.0


def workers_of(hosts: list[int], pss: bool) -> dict[int, int]:
    """PSS in kB (0 without ``pss``) of every sandbox worker of the serving processes, by pid."""
    found: dict[int, int] = {}
    for host in hosts:
        found |= worker_pss_kb(host, pss)
    return found


@dataclass
class Samples:
    """The workers seen alive (every sample) and their PSS (every ``PSS_EVERY_S``)."""

    alive: list[set[int]]
    pss: list[dict[int, int]]


async def sample(hosts: list[int], samples: Samples, stop: asyncio.Event) -> None:
    """Sample the workers until ``stop``: reading PSS every 50 ms took more CPU than the
    service itself (on the 2 cores the service runs on)."""
    last_pss = time.monotonic()
    while True:
        if stop.is_set():  # the load ended: the workers' memory once more
            samples.pss.append(await asyncio.to_thread(workers_of, hosts, True))
            return
        pss = time.monotonic() - last_pss >= PSS_EVERY_S
        found = await asyncio.to_thread(workers_of, hosts, pss)
        samples.alive.append(set(found))
        if pss:
            last_pss = time.monotonic()
            samples.pss.append(found)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), ALIVE_EVERY_S)


async def converse(
    client: httpx.AsyncClient, cid: str, index: int, turns: int, out: dict[str, Any]
) -> None:
    """Run ``turns`` turns in one conversation over HTTP, timing each to its ``turn_finished``."""
    async with client.stream("GET", f"/api/conversations/{cid}/events") as response:
        events = Events(response.aiter_lines())
        for turn in range(turns):
            wanted = 1 + (index + turn) % 2
            started = time.perf_counter()
            sent = await client.post(
                f"/api/conversations/{cid}/messages",
                json={"text": f"Double a number. [plan: {wanted} iterations]"},
            )
            sent.raise_for_status()
            iterations = 0
            while True:
                event = await events.next()
                if event["type"] == "iteration_started":
                    iterations += 1
                elif event["type"] == "turn_finished":
                    out["statuses"][event["status"]] = out["statuses"].get(event["status"], 0) + 1
                    break
            latency = time.perf_counter() - started
            out["calls"] += iterations
            out["overhead"].append((latency - MODEL_DELAY_S * iterations) * 1000)


def _fake_reply(body: Mapping[str, Any]) -> Mapping[str, Any]:
    return reply(body["messages"])


async def scrape_every_process(base_url: str, processes: int) -> dict[str, float]:
    """``/metrics`` of every process, summed (a scrape reaches the one the kernel picks: new
    connections until each has answered)."""
    seen: dict[str, dict[str, float]] = {}
    for _ in range(50 * processes):
        async with httpx.AsyncClient(base_url=base_url, timeout=30) as client:
            response = await client.get("/metrics")
        seen.setdefault(response.headers.get("x-cove-process", "0"), scrape(response.text))
        if len(seen) == processes:
            break
    total: dict[str, float] = {}
    for samples in seen.values():
        for name, value in samples.items():
            total[name] = total.get(name, 0.0) + value
    return total


async def run_serve_level(
    conversations: int, turns: int, max_live: int | None, processes: int = 1
) -> ServeLevelResult:
    """One level: ``conversations`` clients at once against a fresh ``cove serve``."""
    with (
        tempfile.TemporaryDirectory(prefix="cove-bench-") as tmp,
        FakeOpenAI(latency_s=MODEL_DELAY_S) as fake,
    ):
        fake.respond_with(_fake_reply)
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": tmp,
            "COVE_DATA_DIR": tmp,
            "OPENAI_BASE_URL": fake.base_url,
            "OPENAI_API_KEY": "sk-bench",
            "COVE_MODEL": "fake-model",
        }
        if max_live is not None:
            env["COVE_MAX_LIVE_ENVIRONMENTS"] = str(max_live)
        log: deque[str] = deque(maxlen=200)
        proc, port, token = start_serve(env, log, processes)
        out: dict[str, Any] = {"statuses": {}, "calls": 0, "overhead": []}
        # Idle connections dropped before the server drops them (5 s): no send on a closing one.
        limits = httpx.Limits(
            max_connections=None, max_keepalive_connections=None, keepalive_expiry=2.0
        )
        try:
            async with httpx.AsyncClient(
                base_url=f"http://127.0.0.1:{port}",
                timeout=None,
                limits=limits,
                headers={"authorization": f"Bearer {token}"},
            ) as client:
                # Made at once, on many connections: a process makes its conversations at
                # home in it, so the connections spread them over the processes.
                made = await asyncio.gather(
                    *(
                        client.post("/api/conversations", json={})
                        for _ in range(conversations + 8 * processes)
                    )
                )
                ids = [answer.json()["id"] for answer in made]
                # A long-running service has its worker pool and zygote up: warm them first
                # (one conversation at home in each process).
                warm = {"statuses": {}, "calls": 0, "overhead": []}
                for cid in _one_per_home(ids, processes, conversations):
                    ids.remove(cid)
                    await converse(client, cid, 0, 1, warm)
                ids = ids[:conversations]
                # One HTTP client per conversation, as its own user would have: one pool of
                # all of them would look at every open connection on each request (httpcore),
                # and the driver measured itself more than the service.
                users = [
                    httpx.AsyncClient(
                        base_url=client.base_url,
                        timeout=None,
                        limits=limits,
                        headers={"authorization": f"Bearer {token}"},
                    )
                    for _ in ids
                ]
                hosts = serving_pids(proc.pid, processes)
                everyone = [proc.pid, *hosts] if processes > 1 else hosts
                cpu_before = (sum(map(cpu_seconds, everyone)), own_cpu_seconds())
                samples = Samples(alive=[], pss=[])
                stop = asyncio.Event()
                sampler = asyncio.create_task(sample(hosts, samples, stop))
                started = time.perf_counter()
                await asyncio.gather(
                    *(
                        converse(user, cid, i, turns, out)
                        for i, (user, cid) in enumerate(zip(users, ids, strict=True))
                    )
                )
                seconds = time.perf_counter() - started
                serve_cpu = sum(map(cpu_seconds, everyone)) - cpu_before[0]
                driver_cpu = own_cpu_seconds() - cpu_before[1]
                for user in users:
                    await user.aclose()
                stop.set()
                await sampler
            scraped = await scrape_every_process(f"http://127.0.0.1:{port}", processes)
            serve_peak = sum(map(peak_rss_kb, hosts))
        except Exception:
            print("".join(log), file=sys.stderr)
            raise
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=120)
    alive = [s for s in samples.alive if s] or [set()]
    busy = [s for s in samples.pss if s] or [{}]
    return ServeLevelResult(
        conversations=conversations,
        max_live=max_live,
        processes=processes,
        turns=conversations * turns,
        seconds=seconds,
        overhead_ms=out["overhead"],
        model_calls=out["calls"],
        serve_peak_rss_kb=serve_peak,
        # Those alive at the first sample (the pool's idle ones, the warm-ups') came before.
        workers_started=len({pid for s in alive for pid in s} - alive[0]),
        workers_peak=max(len(s) for s in alive),
        workers_peak_pss_kb=max(sum(s.values()) for s in busy),
        worker_pss_kb_mean=sum(sum(s.values()) for s in busy) / max(1, sum(len(s) for s in busy)),
        statuses=out["statuses"],
        scraped=scraped,
        serve_cpu_s=serve_cpu,
        driver_cpu_s=driver_cpu,
    )


def _one_per_home(ids: list[str], processes: int, keep: int) -> list[str]:
    """From the spare ids (past the first ``keep``), one at home in each process."""
    from cove.channels.serve.affinity import home_of

    chosen: dict[int, str] = {}
    for cid in ids[keep:]:
        chosen.setdefault(home_of(cid, processes), cid)
    return list(chosen.values())


def report(result: ServeLevelResult) -> str:
    """One row: processes, turns/s, overhead p50/p99, workers started, serve and driver CPU per
    turn, serve peak RSS and workers' peak PSS."""
    return (
        f"{result.processes:>9} | {result.turns / result.seconds:>7.1f} | "
        f"{percentile(result.overhead_ms, 50):>7.0f} {percentile(result.overhead_ms, 99):>7.0f} | "
        f"{result.workers_started:>7} | {result.serve_cpu_s / result.turns * 1000:>6.1f} "
        f"{result.driver_cpu_s / result.turns * 1000:>6.1f} | "
        f"{result.serve_peak_rss_kb / 1024:>6.0f} {result.workers_peak_pss_kb / 1024:>6.0f} | "
        f"{result.statuses}"
    )


def main() -> None:
    """Compare process counts on one load; print a row each and the ratios."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--processes", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--conversations", type=int, default=100)
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument(
        "--bound", type=int, default=None, help="max_live_environments (default: the setting's)"
    )
    args = parser.parse_args()
    print(
        f"cove serve, {args.conversations} concurrent conversations x {args.turns} turns of 1-2 "
        f"iterations, model {MODEL_DELAY_S * 1000:.0f} ms per call, live-environment bound "
        f"{args.bound or 'by default'} per process, "
        f"worker pool {os.environ.get('COVE_WORKER_POOL_SIZE', 2)}; "
        f"{os.cpu_count()} cores (shared: read absolute figures as upper bounds)\n"
        "overhead = client-seen turn latency - 50 ms x model calls; workers = sandbox worker "
        "processes started in the run (not those alive as it began: the pool's, the warm-ups'); "
        "CPU = ms of CPU per turn of serve (every process, not the sandbox workers) and of this "
        "driver (the clients and the fake endpoint, on the same "
        "cores); memory = serve's peak RSS and the workers' peak total PSS in MB\n"
    )
    header = (
        f"{'processes':>9} | {'turns/s':>7} | {'p50 ms':>7} {'p99 ms':>7} | "
        f"{'workers':>7} | {'CPU':>6} {'driver':>6} | {'serve':>6} {'workers':>6} | statuses"
    )
    print(header)
    print("-" * len(header))
    results = []
    for processes in args.processes:
        result = asyncio.run(run_serve_level(args.conversations, args.turns, args.bound, processes))
        results.append(result)
        print(report(result), flush=True)
    if len(results) > 1:
        first, last = results[0], results[-1]
        speed = (last.turns / last.seconds) / (first.turns / first.seconds)
        p50 = percentile(first.overhead_ms, 50) / max(1e-9, percentile(last.overhead_ms, 50))
        print(
            f"\n{last.processes} vs {first.processes} processes: {speed:.2f}x turns/s, "
            f"overhead p50 {p50:.2f}x lower, workers started {first.workers_started} -> "
            f"{last.workers_started}"
        )


if __name__ == "__main__":
    main()
