"""Prometheus metrics of one ``cove serve`` process, derived from the conversation layer.

Turn, iteration, block, model and cost metrics come from the events this process's turns
publish (``Conversations.watching.observe``); gauges (live environments, workers, watchers) are
read from the conversation layer when Prometheus scrapes. The registry belongs to the service
(no global state), so two services in one process never mix their numbers.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import defaultdict, deque

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    generate_latest,
)

from cove.channels.serve.affinity import Placement
from cove.channels.serve.logs import bind_turn
from cove.conversation import Conversations
from cove.events import (
    BlockFinished,
    Event,
    IterationStarted,
    ModelReply,
    SandboxRestarted,
    TurnFinished,
    TurnQueued,
    TurnStarted,
)

log = logging.getLogger("cove.serve")

_SECONDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)


class ServeMetrics:
    """The service's registry, fed by the event tap ``observe`` and read by ``render``.

    It also knows which turns run now (``running``), which shutdown waits on (``idle``). One
    of several processes (``placement``) counts its own work and says which it is
    (``cove_serve_process{index, processes}``): a scrape reaches one process.
    """

    def __init__(self, convs: Conversations, placement: Placement | None = None) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        ProcessCollector(registry=r)
        PlatformCollector(registry=r)
        if placement is not None:
            which = Gauge(
                "cove_serve_process",
                "This process of cove serve --processes N (1, labelled).",
                ["index", "processes"],
                registry=r,
            )
            which.labels(str(placement.index), str(placement.processes)).set(1)
        self.turns_started = Counter("cove_turns_started", "Turns started.", registry=r)
        self.turns = Counter("cove_turns", "Turns finished, by status.", ["status"], registry=r)
        self.turn_seconds = Histogram(
            "cove_turn_duration_seconds", "Turn durations.", buckets=_SECONDS, registry=r
        )
        self.iterations = Counter("cove_iterations", "Iterations started.", registry=r)
        self.blocks = Histogram(
            "cove_block_duration_seconds",
            "Code block durations, by outcome.",
            ["ok"],
            buckets=_SECONDS,
            registry=r,
        )
        self.block_timeouts = Counter("cove_block_timeouts", "Blocks that timed out.", registry=r)
        self.sandbox_restarts = Counter(
            "cove_sandbox_restarts", "Sandbox workers restarted mid-turn.", registry=r
        )
        self.model_latency = Histogram(
            "cove_model_latency_seconds",
            "From an iteration's start to the model's complete reply.",
            buckets=_SECONDS,
            registry=r,
        )
        self.tokens = Counter(
            "cove_model_tokens", "Model tokens of finished turns.", ["direction"], registry=r
        )
        self.cost = Counter("cove_cost_usd", "Cost of finished turns in US dollars.", registry=r)
        self.queue_wait = Histogram(
            "cove_queue_wait_seconds",
            "How long a sent turn waited behind another turn of its conversation.",
            buckets=_SECONDS,
            registry=r,
        )
        self.channel_received = Counter(
            "cove_channel_received",
            "Inputs a channel received (Telegram updates, …).",
            ["channel"],
            registry=r,
        )
        self.channel_failed = Counter(
            "cove_channel_failed",
            "A channel's calls out that failed (Telegram Bot API calls, …), by what was called.",
            ["channel", "call"],
            registry=r,
        )
        Gauge("cove_turns_running", "Turns running now.", registry=r).set_function(
            lambda: len(self.running)
        )
        Gauge("cove_live_environments", "Live environments now.", registry=r).set_function(
            lambda: convs.stats().live_environments
        )
        Gauge("cove_live_environments_max", "The live-environment bound.", registry=r).set_function(
            lambda: convs.stats().live_capacity
        )
        Gauge(
            "cove_live_memory_bytes", "What live environments' workers take (PSS).", registry=r
        ).set_function(lambda: convs.stats().live_memory_bytes)
        Gauge(
            "cove_live_memory_budget_bytes", "The memory live environments may take.", registry=r
        ).set_function(lambda: convs.stats().live_memory_budget_bytes)
        Gauge(
            "cove_live_evicted_for_memory", "Environments closed to stay in budget.", registry=r
        ).set_function(lambda: convs.stats().evicted_for_memory)
        workers = Gauge("cove_workers", "Sandbox worker processes.", ["state"], registry=r)
        workers.labels("busy").set_function(lambda: convs.stats().workers_busy)
        workers.labels("idle").set_function(lambda: convs.stats().workers_idle)
        Gauge("cove_watchers", "Event watchers attached now.", registry=r).set_function(
            lambda: convs.stats().watchers
        )
        self.running: dict[tuple[str, int], float] = {}
        self._queued: defaultdict[str, deque[float]] = defaultdict(deque)
        self._iteration_started: dict[tuple[str, int, int], float] = {}
        self._idle = asyncio.Event()
        self._idle.set()

    def render(self) -> bytes:
        """The Prometheus text exposition of every metric."""
        return generate_latest(self.registry)

    async def wait_idle(self) -> None:
        """Return once no turn of this process runs."""
        await self._idle.wait()

    def counts(self, channel: str) -> ChannelTally:
        """The counters of the channel named ``channel`` (``channel.ChannelCounts``)."""
        return ChannelTally(self, channel)

    def running_conversations(self) -> set[str]:
        """Conversations with a turn running in this process."""
        return {cid for cid, _ in self.running}

    def observe(self, event: Event) -> None:
        """The event tap: count what a turn of this process published."""
        now = time.monotonic()
        cid = event.conversation_id
        if isinstance(event, TurnQueued):
            self._queued[cid].append(now)
        elif isinstance(event, TurnStarted):
            self._started(event, now)
        elif isinstance(event, IterationStarted):
            self.iterations.inc()
            self._iteration_started[(cid, event.turn_id, event.iteration)] = now
        elif isinstance(event, ModelReply):
            began = self._iteration_started.pop((cid, event.turn_id, event.iteration), None)
            if began is not None:
                self.model_latency.observe(now - began)
        elif isinstance(event, BlockFinished):
            self.blocks.labels(str(event.block.ok).lower()).observe(event.block.duration_ms / 1000)
            if event.block.timed_out:
                self.block_timeouts.inc()
        elif isinstance(event, SandboxRestarted):
            self.sandbox_restarts.inc()
        elif isinstance(event, TurnFinished):
            self._finished(event)

    def _started(self, event: TurnStarted, now: float) -> None:
        cid = event.conversation_id
        waits = self._queued.get(cid)
        self.queue_wait.observe(now - waits.popleft() if waits else 0.0)
        if waits is not None and not waits:
            del self._queued[cid]
        self.turns_started.inc()
        self.running[(cid, event.turn_id)] = now
        self._idle.clear()
        bind_turn(cid, event.position)  # the turn's task: its later log lines carry the ids
        log.info("turn started", extra={"fields": {"turn_id": event.turn_id}})
        log.debug("turn request", extra={"fields": {"request": event.request}})

    def _finished(self, event: TurnFinished) -> None:
        cid = event.conversation_id
        if event.turn_id == 0:  # withdrawn while it waited: it never started
            waits = self._queued.get(cid)
            if waits:
                waits.pop()
            return
        self.turns.labels(event.status).inc()
        self.turn_seconds.observe(event.duration_ms / 1000)
        self.tokens.labels("in").inc(event.usage.tokens_in)
        self.tokens.labels("out").inc(event.usage.tokens_out)
        self.cost.inc(event.usage.cost_usd)
        self.running.pop((cid, event.turn_id), None)
        for key in [k for k in self._iteration_started if k[:2] == (cid, event.turn_id)]:
            del self._iteration_started[key]
        if not self.running:
            self._idle.set()
        fields = {"turn_id": event.turn_id, "status": event.status}
        fields |= {"iterations": event.iterations, "ms": round(event.duration_ms)}
        log.info("turn finished", extra={"fields": fields})


class ChannelTally:
    """One channel's counters in the service's metrics (``channel.ChannelCounts``)."""

    def __init__(self, metrics: ServeMetrics, channel: str) -> None:
        self._received = metrics.channel_received.labels(channel)
        self._failed = metrics.channel_failed
        self._channel = channel

    def received(self) -> None:
        """One more input received."""
        self._received.inc()

    def failed(self, call: str) -> None:
        """One more failed call out, by what was called."""
        self._failed.labels(self._channel, call).inc()
