"""The web channel under load: page and API throughput, SSE fan-out, browser rendering.

1. A database of 1,000 conversations (one of them with 10 finished turns and a few variables,
   retried at turn 5 and that retry branched again): requests/s, p50/p99 latency and the
   process's CPU time per request (server and clients: the same work before and after a
   change, and less sensitive to the machine's load than the wall clock) of the list page, a
   new chat, the chat's sidebar, that conversation's chat page, the chat page of the branch of
   its retry (every turn placed among its versions across the fork tree) and its vars API, with
   16 concurrent HTTP clients.
2. 1, 10, 100 and 1,000 SSE clients watching one conversation while it runs a 20-iteration
   turn: delivery latency of each ``model_reply`` (from the moment the scripted model returned
   that reply to the moment a client parsed the event), p50/p99, and the server process's RSS
   growth. The clients run in a child process so that they do not compete with the server for
   its GIL (they do compete for the cores: the CPU of the server process and of the clients
   over the turn is printed beside the latencies).
3. With Chromium at /usr/bin/chromium: the time for the browser to load and render a finished
   300-iteration turn.

The server is the real app on uvicorn in a thread; the model is scripted.
Run: ``.venv/bin/python bench/web_bench.py [--requests 400] [--sse-clients 1,10,100,1000]
[--no-browser]``.
(The README's pictures come from ``tests/channels/web/test_screenshots.py``.)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from cove.channels.web import create_app
from cove.config import ModelSettings, Settings
from cove.conversation import Conversations, LLMFactory, scripted_factory

CHROMIUM = Path("/usr/bin/chromium")


def code_reply(code: str) -> str:
    return json.dumps({"thinking": "step", "code": [code]})


def answer_reply(text: str) -> str:
    return json.dumps({"thinking": "done", "answer": text})


class TimedClient:
    """A scripted model that records when it returned each reply (monotonic seconds)."""

    def __init__(self, replies: Sequence[str], delay_s: float = 0.0) -> None:
        self.replies, self.delay_s = list(replies), delay_s
        self.inner: Any = None
        self.returned: list[float] = []

    def again(self) -> None:
        """Start the script over (each fan-out run plays the same turn)."""
        self.inner = scripted_factory(self.replies, delay_s=self.delay_s)(
            ModelSettings(), "scripted"
        )
        self.returned = []

    @property
    def model(self) -> str:
        name: str = self.inner.model
        return name

    async def complete(self, messages: Any, **kwargs: Any) -> Any:
        completion = await self.inner.complete(messages, **kwargs)
        self.returned.append(time.monotonic())
        return completion

    async def aclose(self) -> None:
        await self.inner.aclose()

    def factory(self) -> LLMFactory:
        if self.inner is None:
            self.again()

        def make(settings: ModelSettings, model: str) -> Any:
            return self

        return make


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


@contextmanager
def serve(settings: Settings, factory: LLMFactory) -> Iterator[str]:
    config = uvicorn.Config(
        create_app(settings, llm_factory=factory),
        host="127.0.0.1",
        port=0,
        log_level="warning",
        timeout_graceful_shutdown=1,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        threading.Event().wait(0.01)
    try:
        yield f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def populate(settings: Settings, count: int) -> tuple[str, str]:
    """The conversations; the ids of the one with ten turns and of the branch of its retry."""
    replies = [code_reply(f"v{i} = list(range({i * 10}))") for i in range(12)]
    replies = [r for pair in zip(replies, [answer_reply("ok")] * 12, strict=True) for r in pair]
    client = TimedClient(replies)
    async with Conversations.open(settings, llm_factory=client.factory()) as convs:
        for i in range(count - 3):
            await convs.create(channel="web", title=f"Conversation {i}")
        rich = await convs.create(channel="web", title="Ten turns")
        for i in range(10):
            await convs.send(rich.id, f"turn {i}").finished()
        retry = await convs.fork(rich.id, 4)  # turn 5 asked again
        await convs.send(retry.id, "turn 4").finished()
        branch = await convs.fork(retry.id, 5)  # and that retry branched after it
        await convs.send(branch.id, "turn 5, in a branch").finished()
    return rich.id, branch.id


async def hammer(
    base: str, path: str, total: int, concurrency: int
) -> tuple[float, list[float], float]:
    """Requests/s, each request's latency, and the process's CPU seconds per request."""
    latencies: list[float] = []
    queue = iter(range(total))

    async def worker(client: httpx.AsyncClient) -> None:
        for _ in queue:
            start = time.perf_counter()
            response = await client.get(path)
            latencies.append(time.perf_counter() - start)
            assert response.status_code == 200, (path, response.status_code)

    async with httpx.AsyncClient(base_url=base, timeout=60) as client:
        started, cpu = time.perf_counter(), time.process_time()
        await asyncio.gather(*(worker(client) for _ in range(concurrency)))
        elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    return total / elapsed, latencies, cpu / total


async def listen_all(base: str, cid: str, clients: int) -> list[tuple[int, float]]:
    """The SSE clients (run in a child process, so they do not share the server's GIL).

    Each reads its stream over a plain socket, undoing the chunked encoding and decoding only
    the events it times: a full HTTP client per stream took more CPU than the server's whole
    fan-out, on the same cores.
    """
    received: list[tuple[int, float]] = []
    connected = asyncio.Semaphore(0)
    host, port = base.removeprefix("http://").split(":")
    request = (
        f"GET /api/conversations/{cid}/events?after=0 HTTP/1.1\r\n"  # a new one: all of it
        f"Host: {host}:{port}\r\nAccept: text/event-stream\r\n\r\n"
    ).encode()

    async def listen() -> None:
        reader, writer = await asyncio.open_connection(host, int(port), limit=1 << 20)
        writer.write(request)
        head = await reader.readuntil(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200") and b"chunked" in head.lower(), head
        connected.release()
        pending = b""
        try:
            while True:
                size = int((await reader.readuntil(b"\r\n"))[:-2], 16)
                if size == 0:
                    raise RuntimeError("the event stream ended before the turn")
                pending += (await reader.readexactly(size + 2))[:-2]
                *events, pending = pending.split(b"\n\n")
                for event in events:
                    if b'"type":"model_reply"' in event or b'"type":"turn_finished"' in event:
                        data = json.loads(event[event.index(b"data: ") + 6 :])
                        if data["type"] == "turn_finished":
                            return
                        received.append((data["iteration"], time.monotonic()))
        finally:
            writer.close()

    tasks = [asyncio.create_task(listen()) for _ in range(clients)]
    for _ in range(clients):
        await connected.acquire()
    print("connected", flush=True)
    await asyncio.gather(*tasks)
    return received


def sse_fanout(base: str, cid: str, clients: int, model: TimedClient) -> dict[str, Any]:
    model.again()
    before = rss_mb()
    children_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    child = subprocess.Popen(
        [sys.executable, __file__, "--sse-child", base, cid, str(clients)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "connected"
    connected_rss = rss_mb()
    server_cpu = time.process_time()  # the server runs in this process (a thread)
    httpx.post(f"{base}/api/conversations/{cid}/messages", json={"text": "go"})
    received = json.loads(child.stdout.read())
    server_cpu = time.process_time() - server_cpu
    child.wait()
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    clients_cpu = (children.ru_utime + children.ru_stime) - (
        children_before.ru_utime + children_before.ru_stime
    )
    # CLOCK_MONOTONIC is one clock for every process of the machine.
    latencies = [(at - model.returned[iteration - 1]) * 1000 for iteration, at in received]
    return {
        "clients": clients,
        "events": len(latencies),
        "p50_ms": percentile(latencies, 0.5),
        "p99_ms": percentile(latencies, 0.99),
        "rss_growth_mb": max(connected_rss, rss_mb()) - before,
        "server_cpu_s": server_cpu,
        "clients_cpu_s": clients_cpu,
    }


def browser_render(base: str, cid: str) -> float | None:
    if not CHROMIUM.is_file():
        return None
    from playwright.sync_api import sync_playwright

    args = ["--no-sandbox", "--headless", "--disable-gpu", "--no-first-run"]
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=args)
        page = browser.new_page()
        started = time.perf_counter()
        page.goto(f"{base}/c/{cid}")
        page.wait_for_selector(".turn .iteration[data-iteration='300']", state="attached")
        elapsed = time.perf_counter() - started
        browser.close()
    return elapsed


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--sse-clients", default="1,10,100,1000", help="comma-separated counts")
    parser.add_argument("--conversations", type=int, default=1000)
    parser.add_argument("--no-browser", action="store_true", help="skip the browser render")
    parser.add_argument("--sse-child", nargs=3, metavar=("URL", "ID", "N"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.sse_child:
        base, cid, clients = args.sse_child
        print(json.dumps(asyncio.run(listen_all(base, cid, int(clients)))), flush=True)
        return

    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings.load(env={}, data_dir=Path(tmp)).replace(worker_pool_size=1)
        start = time.perf_counter()
        rich, branch = asyncio.run(populate(settings, args.conversations))
        print(
            f"populated {args.conversations} conversations in {time.perf_counter() - start:.1f} s"
        )

        fan_model = TimedClient(
            [code_reply(f"x{i} = {i}") for i in range(19)] + [answer_reply("done")], delay_s=0.05
        )
        with serve(settings.replace(max_iterations=30), fan_model.factory()) as base:
            for label, path in (
                ("list page", "/conversations"),
                ("new chat page", "/"),
                ("sidebar", "/fragments/sidebar"),
                ("conversation page", f"/c/{rich}"),
                ("branch page", f"/c/{branch}"),
                ("vars API", f"/api/conversations/{rich}/vars"),
            ):
                rate, lat, cpu = asyncio.run(hammer(base, path, args.requests, args.concurrency))
                print(
                    f"{label:18} {rate:7.1f} req/s  p50 {percentile(lat, 0.5) * 1000:6.1f} ms  "
                    f"p99 {percentile(lat, 0.99) * 1000:6.1f} ms  CPU {cpu * 1000:5.2f} ms/req"
                )
            for clients in (int(n) for n in args.sse_clients.split(",")):
                target = asyncio.run(_fresh(base))
                fan = sse_fanout(base, target, clients, fan_model)
                print(
                    f"SSE fan-out  {fan['clients']:5} clients, {fan['events']:6} deliveries: "
                    f"p50 {fan['p50_ms']:6.1f} ms  p99 {fan['p99_ms']:6.1f} ms  "
                    f"RSS +{fan['rss_growth_mb']:.1f} MB  CPU server {fan['server_cpu_s']:.2f} s, "
                    f"clients {fan['clients_cpu_s']:.2f} s (load {os.getloadavg()[0]:.1f})"
                )

        if args.no_browser:
            return
        long_model = TimedClient(
            [code_reply(f"k = {i}") for i in range(299)] + [answer_reply("end")]
        )
        long_settings = settings.replace(max_iterations=300)
        with serve(long_settings, long_model.factory()) as base:
            cid = asyncio.run(_long_turn(base))
            seconds = browser_render(base, cid)
            if seconds is None:
                print("browser render     skipped (no /usr/bin/chromium)")
            else:
                print(
                    f"browser render     300-iteration turn loaded and rendered in {seconds:.2f} s"
                )


async def _fresh(base: str) -> str:
    async with httpx.AsyncClient(base_url=base) as http:
        cid: str = (await http.post("/api/conversations", json={})).json()["id"]
        return cid


async def _long_turn(base: str) -> str:
    async with httpx.AsyncClient(base_url=base, timeout=600) as http:
        cid: str = (await http.post("/api/conversations", json={})).json()["id"]
        await http.post(f"/api/conversations/{cid}/messages", json={"text": "long"})
        url = f"/api/conversations/{cid}/events?after=0"
        async with http.stream("GET", url) as response:
            async for line in response.aiter_lines():
                if line.startswith("data: ") and '"turn_finished"' in line:
                    break
    return cid


if __name__ == "__main__":
    main()
