"""The concurrency benchmark through ``cove serve``'s HTTP API (``concurrency_bench.py --serve``).

A real ``cove serve`` subprocess, the real ``openai`` client against the fake endpoint (which
waits 50 ms per call), and one client per conversation that sends over HTTP and reads the
conversation's SSE stream. Everything but the model's own 50 ms is overhead: HTTP, SSE, the
engine, the sandbox, the database and (with a small live-environment bound) evicting and
rebuilding environments.
"""

from __future__ import annotations

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

from bench.concurrency_bench import MODEL_DELAY_S, reply, worker_pss_kb  # noqa: E402
from tests.fakes.openai_server import FakeOpenAI  # noqa: E402

_URL = re.compile(r"^cove serve: http://localhost:(\d+)/")


@dataclass
class ServeLevelResult:
    """What one level through ``cove serve`` measured."""

    conversations: int
    max_live: int
    turns: int
    seconds: float
    overhead_ms: list[float]
    model_calls: int
    serve_peak_rss_kb: int
    workers_started: int
    workers_peak: int
    workers_peak_rss_kb: int
    worker_rss_kb: float
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


def start_serve(env: dict[str, str], log: deque[str]) -> tuple[subprocess.Popen[str], int]:
    """``cove serve`` on a free port; returns the process and the port.

    Its stderr is read to the end by a thread (a full pipe would stall the service), keeping
    the last lines in ``log``.
    """
    proc = subprocess.Popen(
        [sys.executable, "-m", "cove", "serve", "--port", "0", "--log-level", "WARNING"],
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
            return proc, int(match.group(1))
    raise RuntimeError("cove serve did not start:\n" + "".join(log))


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


async def sample(pid: int, samples: list[dict[int, int]], stop: asyncio.Event) -> None:
    while not stop.is_set():
        samples.append(await asyncio.to_thread(worker_pss_kb, pid))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 0.05)


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


async def run_serve_level(conversations: int, turns: int, max_live: int) -> ServeLevelResult:
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
            "COVE_MAX_LIVE_ENVIRONMENTS": str(max_live),
        }
        log: deque[str] = deque(maxlen=200)
        proc, port = start_serve(env, log)
        out: dict[str, Any] = {"statuses": {}, "calls": 0, "overhead": []}
        limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
        try:
            async with httpx.AsyncClient(
                base_url=f"http://127.0.0.1:{port}", timeout=None, limits=limits
            ) as client:
                ids = [
                    (await client.post("/api/conversations", json={})).json()["id"]
                    for _ in range(conversations + 1)
                ]
                # A long-running service has its worker pool and zygote up: warm them first.
                await converse(
                    client, ids.pop(), 0, 1, {"statuses": {}, "calls": 0, "overhead": []}
                )
                cpu_before = (cpu_seconds(proc.pid), own_cpu_seconds())
                samples: list[dict[int, int]] = []
                stop = asyncio.Event()
                sampler = asyncio.create_task(sample(proc.pid, samples, stop))
                started = time.perf_counter()
                await asyncio.gather(
                    *(converse(client, cid, i, turns, out) for i, cid in enumerate(ids))
                )
                seconds = time.perf_counter() - started
                serve_cpu = cpu_seconds(proc.pid) - cpu_before[0]
                driver_cpu = own_cpu_seconds() - cpu_before[1]
                stop.set()
                await sampler
                scraped = scrape((await client.get("/metrics")).text)
            serve_peak = peak_rss_kb(proc.pid)
        except Exception:
            print("".join(log), file=sys.stderr)
            raise
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=120)
    busy = [s for s in samples if s] or [{}]
    return ServeLevelResult(
        conversations=conversations,
        max_live=max_live,
        turns=conversations * turns,
        seconds=seconds,
        overhead_ms=out["overhead"],
        model_calls=out["calls"],
        serve_peak_rss_kb=serve_peak,
        workers_started=len({pid for s in busy for pid in s}),
        workers_peak=max(len(s) for s in busy),
        workers_peak_rss_kb=max(sum(s.values()) for s in busy),
        worker_rss_kb=sum(sum(s.values()) for s in busy) / max(1, sum(len(s) for s in busy)),
        statuses=out["statuses"],
        scraped=scraped,
        serve_cpu_s=serve_cpu,
        driver_cpu_s=driver_cpu,
    )
