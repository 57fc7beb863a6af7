"""The user ids of workers on a root host: one of its own for every live worker.

Workers that share a user may signal each other, trace each other and share per-user limits; so
a root host gives each live worker an id of its own, from a reserved range that no account uses
(``RANGE_START`` … ``RANGE_START + RANGE_SIZE - 1``, far above the ids ``useradd`` hands out and
the usual subordinate-id ranges of ``/etc/subuid``). The zygote keeps track of the ids of its live
workers and never hands one out twice; the pick is random, so two cove hosts on one machine
collide only with a negligible chance (two live workers among 16 million ids).

The group id is the same number, and a worker has no supplementary group.
"""

from __future__ import annotations

import secrets

RANGE_START = 0x6C000000  # 1811939328
RANGE_SIZE = 1 << 24


def in_range(uid: int) -> bool:
    """Whether ``uid`` is one handed out to workers."""
    return RANGE_START <= uid < RANGE_START + RANGE_SIZE


class UidPool:
    """The ids of live workers of one zygote (or one cold-starting host)."""

    def __init__(self) -> None:
        self._live: dict[int, int] = {}  # pid -> uid

    def pick(self) -> int:
        """A free id for the next worker (``claim`` it once the worker's pid is known)."""
        taken = set(self._live.values())
        while True:
            uid = RANGE_START + secrets.randbelow(RANGE_SIZE)
            if uid not in taken:
                return uid

    def claim(self, pid: int, uid: int) -> None:
        """Record that the worker ``pid`` runs as ``uid``."""
        self._live[pid] = uid

    def release(self, pid: int) -> None:
        """The worker ``pid`` has ended: its id is free again."""
        self._live.pop(pid, None)
