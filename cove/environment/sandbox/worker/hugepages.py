"""A cheaper fork: the zygote's anonymous memory folded into huge pages once it is warm.

A fork copies the parent's page tables, one entry per 4 KiB page, and marks each page
copy-on-write. With the data libraries loaded and warmed up the zygote holds some 85 MB of
anonymous memory, about 21,000 entries: most of what a fork costs. ``collapse`` asks the kernel
(``MADV_COLLAPSE``, Linux 6.1) to fold each aligned 2 MiB stretch of the zygote's private
writable memory into one huge page, which a fork copies as one entry. A worker writing to such a
page splits only its own mapping of it and copies the 4 KiB it wrote, as before; the zygote never
writes to it again, so the pages stay shared.

It is an optimisation only: a kernel without ``MADV_COLLAPSE``, huge pages turned off
(``never``) or a mapping that cannot take them leaves the memory as it was.
"""

from __future__ import annotations

import ctypes

from cove.environment.sandbox.worker.libc import libc

MADV_COLLAPSE = 25
"""``madvise`` advice: collapse the range into transparent huge pages, synchronously."""

HUGE_PAGE = 2 * 1024 * 1024


def collapse(maps: str = "/proc/self/maps") -> int:
    """Fold the process's private writable anonymous memory into huge pages where the kernel
    can; the bytes folded."""
    try:
        with open(maps, encoding="ascii") as file:
            regions = [_region(line) for line in file]
    except OSError:
        return 0
    madvise = libc().madvise
    madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    folded = 0
    for start, end in filter(None, regions):
        if madvise(start, end - start, MADV_COLLAPSE) == 0:  # else: this one cannot
            folded += end - start
    return folded


def _region(line: str) -> tuple[int, int] | None:
    """The huge-page-aligned part of one ``/proc/self/maps`` line, when it is private writable
    anonymous memory (or the heap) of at least one huge page; else None."""
    fields = line.split()
    if len(fields) < 5 or fields[1][:2] != "rw" or fields[1][3:4] != "p":
        return None
    if len(fields) > 5 and fields[5] != "[heap]":
        return None
    low, high = (int(bound, 16) for bound in fields[0].split("-"))
    start = (low + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1)
    end = high & ~(HUGE_PAGE - 1)
    return (start, end) if end - start >= HUGE_PAGE else None
