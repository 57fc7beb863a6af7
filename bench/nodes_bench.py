"""Several ``cove serve`` nodes over one PostgreSQL database: throughput with 1 and 2 nodes, and
the failover time behind HAProxy.

    .venv/bin/python bench/nodes_bench.py [--conversations 8] [--turns 4]

Real processes on loopback: a private PostgreSQL server (``tests/postgres_server.py``, fsync
off), ``cove serve --web`` nodes, the fake OpenAI endpoint waiting 50 ms per call, and one
client per conversation that sends over HTTP and reads the conversation's SSE stream until each
turn ends. Conversation ``i`` is sent to node ``i mod N`` (the affinity a proxy gives). A first
turn per conversation warms its environment and is not counted.

Failover (with ``haproxy`` installed): two nodes behind ``deploy/haproxy.cfg``, a turn whose
model call hangs on the conversation's node, that node SIGKILLed; the time until the next
message through the proxy is accepted (202) by the other node. Both nodes run on this host, so
the takeover finds the dead process at once. Then again with each node under a host name of
its own (a UTS namespace, ``unshare --uts``; root): the dead node's lease names another host,
so the other node waits for it to lapse, as for a node lost on another machine (the target:
at most ``COVE_LEASE_TTL_S`` + 2 s).

Telegram takeover: two bot nodes with webhooks; a message acknowledged by a node whose running
turn holds it back, that node SIGKILLed; the time until the other node's turn for it calls the
model (it took the update over from the store's inbox), on one host and across hosts.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.fakes.openai_server import FakeOpenAI, Fault  # noqa: E402
from tests.fakes.telegram_server import FakeTelegram  # noqa: E402
from tests.nodes.cluster import (  # noqa: E402
    Watcher,
    client,
    finished,
    kill,
    model_calls,
    passing,
    send,
    start_node,
)
from tests.nodes.proxy import Proxy  # noqa: E402
from tests.nodes.telegram import BotNode  # noqa: E402
from tests.postgres_server import PostgresServer  # noqa: E402
from tests.scripted import reply  # noqa: E402

MODEL_DELAY_S = 0.05
LEASE_TTL_S = "10"
HAPROXY_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"  # Debian's haproxy is in /usr/sbin


async def converse(base_url: str, turns: int) -> list[float]:
    """One client: a conversation, a warm-up turn, then ``turns`` timed turns (seconds each)."""
    async with client(base_url) as http:
        cid = (await http.post("/api/conversations", json={})).json()["id"]
        watcher = Watcher(http, cid)
        latencies: list[float] = []
        try:
            for k in range(turns + 1):
                started = time.perf_counter()
                answer = await send(http, cid, f"turn {k}")
                assert answer.status_code == 202, answer.text
                begun = await watcher.wait_for("turn_started", request=f"turn {k}")
                await watcher.wait_for("turn_finished", turn_id=begun["turn_id"])
                if k:
                    latencies.append(time.perf_counter() - started)
        finally:
            await watcher.aclose()
        return latencies


async def throughput(
    server: PostgresServer, fake: FakeOpenAI, count: int, conversations: int, turns: int
) -> tuple[float, list[float]]:
    """Turns per second and each turn's latency with ``count`` nodes."""
    url = server.database()
    home = Path(tempfile.mkdtemp(prefix="cove-nodes-bench-"))
    nodes = [
        start_node(home, f"n{i}", fake, url, COVE_MAX_LIVE_ENVIRONMENTS="64") for i in range(count)
    ]
    try:
        started = time.perf_counter()
        results = await asyncio.gather(
            *(converse(nodes[i % count].base_url, turns) for i in range(conversations))
        )
        elapsed = time.perf_counter() - started
    finally:
        for node in nodes:
            node.stop()
        shutil.rmtree(home, ignore_errors=True)
    latencies = [x for each in results for x in each]
    # The warm-up turns are in the elapsed time too: count them, as they ran.
    return conversations * (turns + 1) / elapsed, latencies


async def failover(
    server: PostgresServer, fake: FakeOpenAI, binary: str, hosts: bool = False
) -> tuple[float, float]:
    """Seconds from SIGKILL of a conversation's node to its next message accepted elsewhere
    (both nodes warm: each ran a turn before), and the seconds a new conversation's first
    message takes to be accepted then (a worker from the pool, nothing to restore). ``hosts``:
    each node under a host name of its own."""
    url = server.database()
    home = Path(tempfile.mkdtemp(prefix="cove-nodes-bench-"))
    opened = threading.Event()
    names = ("cove-node-a", "cove-node-b") if hosts else (None, None)
    a = start_node(home, "a", fake, url, host=names[0], COVE_LEASE_TTL_S=LEASE_TTL_S)
    b = start_node(home, "b", fake, url, host=names[1], COVE_LEASE_TTL_S=LEASE_TTL_S)
    try:
        for node in (a, b):  # ready, and warm: each has run a turn (its sandbox started)
            async with client(node.base_url) as direct:
                while (ready := await direct.get("/readyz")).status_code != 200:
                    print(f"waiting for {node.base_url}: {ready.json()}", flush=True)
                    await asyncio.sleep(1)
                warm = (await direct.post("/api/conversations", json={})).json()["id"]
                assert (await send(direct, warm, "warm up")).status_code == 202
                await finished(direct, warm, "warm up")
        with Proxy(binary, (a.port, b.port)) as proxy:
            await asyncio.to_thread(proxy.wait_until_up)
            async with client(proxy.base_url) as front:
                cid = (await front.post("/api/conversations", json={})).json()["id"]
                calls = len(fake.requests)
                fake.add_faults(passing(), Fault.gate(opened))
                fake.add_replies(reply(["x = 1"]))  # no answer: a second model call, held
                sent = await send(front, cid, "long")
                running = {"node1": a, "node2": b}[sent.headers["x-cove-node"]]
                await model_calls(fake, calls + 2)
                killed = time.perf_counter()
                await asyncio.to_thread(kill, running)
                refused: list[int] = []  # what the client got before the takeover
                while (answer := await send(front, cid, "again")).status_code != 202:
                    refused.append(answer.status_code)
                    await asyncio.sleep(0.05)
                taken_over = time.perf_counter() - killed
                got = ", ".join(f"{n} x {code}" for code, n in sorted(Counter(refused).items()))
                print(f"before the takeover the client got: {got or 'nothing'}")
                # A new conversation's first message (no lease to take over, nothing to restore).
                fresh = (await front.post("/api/conversations", json={})).json()["id"]
                started = time.perf_counter()
                assert (await send(front, fresh, "first")).status_code == 202
                return taken_over, time.perf_counter() - started
    finally:
        opened.set()
        a.stop()
        b.stop()
        shutil.rmtree(home, ignore_errors=True)


async def telegram_takeover(server: PostgresServer, fake: FakeOpenAI, hosts: bool) -> float:
    """Seconds from SIGKILL of a bot node holding an acknowledged message (queued behind its
    running turn) to the other node's turn for it calling the model."""
    url = server.database()
    home = Path(tempfile.mkdtemp(prefix="cove-nodes-bench-"))
    opened = threading.Event()
    chat, warm = 9001, (9002, 9003)
    names = ("cove-node-a", "cove-node-b") if hosts else (None, None)
    with FakeTelegram() as tg:
        a = BotNode(
            home, "a", fake, tg, url, [chat, *warm], host=names[0], COVE_LEASE_TTL_S=LEASE_TTL_S
        )
        b = BotNode(
            home, "b", fake, tg, url, [chat, *warm], host=names[1], COVE_LEASE_TTL_S=LEASE_TTL_S
        )
        try:
            for node, other in zip((a, b), warm, strict=True):  # each node has run a turn
                await node.deliver(tg.text_update(other, "warm up"))
            await tg.wait_for(lambda: all("n is 42" in tg.texts(other) for other in warm), 120)
            calls = len(fake.requests)
            fake.add_faults(Fault.gate(opened))  # the first message's turn holds its node
            await a.deliver(tg.text_update(chat, "first"))
            await model_calls(fake, calls + 1)
            await a.deliver(tg.text_update(chat, "second"))  # acknowledged, waiting behind it
            killed = time.perf_counter()
            await asyncio.to_thread(kill, a.process)
            await model_calls(fake, calls + 2)  # the other node runs it
            return time.perf_counter() - killed
        finally:
            opened.set()
            a.stop()
            b.stop()
            shutil.rmtree(home, ignore_errors=True)


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--conversations", type=int, default=8)
    parser.add_argument("--turns", type=int, default=4)
    options = parser.parse_args()
    print(
        f"{options.conversations} conversations at once, {options.turns} timed turns each "
        f"(1 model call of {MODEL_DELAY_S * 1000:.0f} ms); load average "
        f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores, shared: figures are upper bounds"
    )
    print("nodes | turns/s | overhead p50 ms  p99 ms")
    rates = {}
    with FakeOpenAI(latency_s=MODEL_DELAY_S) as fake, PostgresServer() as server:
        fake.respond_with(reply(["n = 2 * 21"], "n is {{n}}"))
        for count in (1, 2):
            rate, latencies = await throughput(
                server, fake, count, options.conversations, options.turns
            )
            rates[count] = rate
            overhead = [(x - MODEL_DELAY_S) * 1000 for x in latencies]
            print(
                f"{count:5} | {rate:7.1f} | {statistics.median(overhead):15.0f} "
                f"{percentile(overhead, 0.99):7.0f}"
            )
        print(f"2 nodes / 1 node: {rates[2] / rates[1]:.2f}x turns/s (both on this one machine)")
        binary = shutil.which("haproxy", path=HAPROXY_PATH)
        if binary is None:
            print("failover: haproxy is not installed, not measured")
            return
        seconds, cold = await failover(server, fake, binary)
        print(
            f"failover (kill -> next message accepted through HAProxy): {seconds * 1000:.0f} ms,"
            f" against {cold * 1000:.0f} ms for a new conversation's first message; same host:"
            f" the dead process is seen at once"
        )
        seconds = await telegram_takeover(server, fake, hosts=False)
        print(
            f"Telegram (kill -> an update the dead node acknowledged runs on the other node):"
            f" {seconds:.1f} s, same host"
        )
        if shutil.which("unshare") is None or os.geteuid() != 0:
            print("failover across hosts: needs root and unshare, not measured")
            return
        seconds, _ = await failover(server, fake, binary, hosts=True)
        print(
            f"failover across hosts (kill -> next message accepted through HAProxy): "
            f"{seconds:.1f} s, the lease lapsing (TTL {LEASE_TTL_S} s; target <= TTL + 2 s)"
        )
        seconds = await telegram_takeover(server, fake, hosts=True)
        print(
            f"Telegram across hosts (kill -> an acknowledged update runs on the other node):"
            f" {seconds:.1f} s, its claim and the lease lapsing (TTL {LEASE_TTL_S} s)"
        )
    print(f"load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    asyncio.run(main())
