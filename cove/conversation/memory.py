"""What a live environment costs in memory: its sandbox worker's PSS.

A worker forked from the zygote shares most of its pages with it and with its siblings (the
interpreter, the data libraries): its RSS counts them all again, so a hundred workers would
seem to take a hundred times the libraries. PSS (proportional set size) divides each shared
page among the processes mapping it, so the PSS of all workers adds up to what they take
together. Linux reports it in ``/proc/<pid>/smaps_rollup``.
"""

from __future__ import annotations

import os
from pathlib import Path

DEFAULT_SHARE = 4
"""Without a setting, the live environments may take 1/DEFAULT_SHARE of the machine's memory."""


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
