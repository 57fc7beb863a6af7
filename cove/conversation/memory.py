"""What a live environment costs: its sandbox worker's PSS, and a few open files in the host.

A worker forked from the zygote shares most of its pages with it and with its siblings (the
interpreter, the data libraries): its RSS counts them all again, so a hundred workers would
seem to take a hundred times the libraries. PSS (proportional set size) divides each shared
page among the processes mapping it, so the PSS of all workers adds up to what they take
together. Linux reports it in ``/proc/<pid>/smaps_rollup``.
"""

from __future__ import annotations

import logging
import os
import resource
from pathlib import Path

log = logging.getLogger("cove.conversation")

DEFAULT_SHARE = 4
"""Without a setting, the live environments may take 1/DEFAULT_SHARE of the machine's memory."""
#: Open files one live environment holds in the host process (its worker's pipes and process
#: handle: 3 measured), with one to spare.
FILES_PER_ENVIRONMENT = 4
#: Open files left for everything else a process does (the database, clients, sockets, logs).
FILES_RESERVED = 256


def pss_bytes(pid: int) -> int | None:
    """The PSS of process ``pid`` in bytes; None when it is gone or the kernel does not say."""
    try:
        text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("Pss:"):
            return int(line.split()[1]) * 1024
    return None


def machine_memory_bytes() -> int:
    """The machine's physical memory in bytes."""
    return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def live_memory_budget(setting_mb: int) -> int:
    """The bytes live environments may take: the setting, or (0) a share of the machine's."""
    if setting_mb > 0:
        return setting_mb * 1024 * 1024
    return machine_memory_bytes() // DEFAULT_SHARE


def open_files_at_least(wanted: int) -> int:
    """Raise this process's soft open-file limit to ``wanted`` when it is lower, no further
    than its hard limit (a failure leaves it as it was); the soft limit now."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= wanted:
        return soft
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    except (ValueError, OSError):
        return soft
    return target


def environments_within(open_files: int, wanted: int) -> int:
    """How many of ``wanted`` live environments an open-file limit of ``open_files`` allows
    (always one, or no turn could run)."""
    if open_files == resource.RLIM_INFINITY:
        return wanted
    return max(1, min(wanted, (open_files - FILES_RESERVED) // FILES_PER_ENVIRONMENT))


def live_capacity(wanted: int) -> int:
    """How many environments this process may keep live: ``wanted`` (the
    ``max_live_environments`` setting), within its open-file limit.

    The soft limit is raised as far as ``wanted`` needs (no further than the hard limit; a
    limit of 1,024 that cannot be raised holds 192 live environments). When even the hard
    limit is too low, the capacity is what it allows, and the log says so.
    """
    limit = open_files_at_least(FILES_RESERVED + wanted * FILES_PER_ENVIRONMENT)
    capacity = environments_within(limit, wanted)
    if capacity < wanted:
        log.warning(
            "at most %d live environments, not %d: the open-file limit (%d) allows no more "
            "(raise it with ulimit -n, or lower max_live_environments)",
            capacity,
            wanted,
            limit,
        )
    return capacity
