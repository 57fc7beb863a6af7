"""``ProcessStats``: what one process holds now, for a service's metrics."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ProcessStats:
    """A snapshot of what this process holds (``Conversations.stats``).

    Attributes:
        live_environments: Conversations whose environment is open now.
        live_capacity: How many may be open at once (the least recently used idle one closes).
        workers_busy: Sandbox worker processes in use by live environments.
        workers_idle: Sandbox worker processes started and ready.
        watchers: Event watchers attached now (senders' own streams included).
    """

    live_environments: int
    live_capacity: int
    workers_busy: int
    workers_idle: int
    watchers: int
