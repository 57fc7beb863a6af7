"""The user ids of workers: one of its own for every live worker, where the host can give one.

Workers that share a user may signal each other, trace each other and share per-user limits; so
a host that can gives each live worker an id of its own:

- a root host, from a reserved range that no account uses (``ROOT_RANGE``: ``RANGE_START`` …
  ``RANGE_START + RANGE_SIZE - 1``, far above the ids ``useradd`` hands out and the usual
  subordinate-id ranges of ``/etc/subuid``);
- an unprivileged host with a subordinate range, from that range, mapped into the zygote's user
  namespace (``userns.py``).

The zygote keeps track of the ids of its live workers and never hands one out twice; the pick is
random, so two cove hosts on one machine collide only with a small chance (two live workers
among the range's ids). The group id is the same number, and a worker has no supplementary group.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

RANGE_START = 0x6C000000  # 1811939328
RANGE_SIZE = 1 << 24


@dataclass(frozen=True)
class IdRange:
    """Ids a worker may take: ``first … first + size - 1`` as the worker sets them, which the
    host sees as ``host_first …`` (the same numbers on a root host)."""

    first: int
    size: int
    host_first: int

    def host_id(self, uid: int) -> int:
        """The id ``uid`` (of this range) as the host sees it."""
        return self.host_first + uid - self.first


ROOT_RANGE = IdRange(RANGE_START, RANGE_SIZE, RANGE_START)
"""The ids a root host hands out."""


def in_range(uid: int) -> bool:
    """Whether ``uid`` is one a root host hands out to workers."""
    return RANGE_START <= uid < RANGE_START + RANGE_SIZE


class UidPool:
    """The ids of live workers of one zygote (or one cold-starting host)."""

    def __init__(self, ids: IdRange = ROOT_RANGE) -> None:
        self.ids = ids
        self._live: dict[int, int] = {}  # pid -> uid

    def pick(self) -> int:
        """A free id for the next worker (``claim`` it once the worker's pid is known).

        Raises:
            OSError: Every id of the range is taken.
        """
        taken = set(self._live.values())
        if len(taken) >= self.ids.size:
            raise OSError("every worker id of the range is taken")
        while True:
            uid = self.ids.first + secrets.randbelow(self.ids.size)
            if uid not in taken:
                return uid

    def claim(self, pid: int, uid: int) -> None:
        """Record that the worker ``pid`` runs as ``uid``."""
        self._live[pid] = uid

    def release(self, pid: int) -> None:
        """The worker ``pid`` has ended: its id is free again."""
        self._live.pop(pid, None)
