"""``ProcessStats``: what one process holds now, for a service's metrics."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ProcessStats:
    """A snapshot of what this process holds (``Conversations.stats``).

    Attributes:
        live_environments: Conversations whose environment is open now.
        live_capacity: How many may be open at once (the least recently used idle one closes).
        live_memory_bytes: What their workers took (PSS) when each last finished a turn.
        live_memory_budget_bytes: What they may take (past it, idle ones close, coldest first).
        evicted_for_memory: Environments closed so far to stay within the memory budget.
        workers_busy: Sandbox worker processes in use by live environments.
        workers_idle: Sandbox worker processes started and ready.
        watchers: Event watchers attached now (senders' own streams included).
    """

    live_environments: int
    live_capacity: int
    live_memory_bytes: int
    live_memory_budget_bytes: int
    evicted_for_memory: int
    workers_busy: int
    workers_idle: int
    watchers: int
