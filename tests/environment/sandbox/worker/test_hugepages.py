"""The zygote folds its memory into huge pages, so a fork copies fewer page-table entries."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from cove.environment.sandbox.worker.hugepages import HUGE_PAGE, _region

THP = Path("/sys/kernel/mm/transparent_hugepage/enabled")

FOLD = """
import re
from cove.environment.sandbox.worker.hugepages import collapse
data = bytearray(64 * 1024 * 1024)
for i in range(0, len(data), 4096):
    data[i] = 1
def huge():
    text = open("/proc/self/smaps_rollup").read()
    return int(re.search(r"AnonHugePages:\\s+(\\d+)", text).group(1))
before = huge()
folded = collapse()
print(before, huge(), folded)
"""


def test_private_writable_anonymous_memory_is_aligned_to_huge_pages() -> None:
    start = 0x7F0000000000 + 4096
    line = f"{start:x}-{start + 3 * HUGE_PAGE:x} rw-p 00000000 00:00 0 \n"
    assert _region(line) == (start - 4096 + HUGE_PAGE, start - 4096 + 3 * HUGE_PAGE)
    assert _region(f"{start:x}-{start + 3 * HUGE_PAGE:x} rw-p 0 00:00 0 [heap]\n") is not None
    assert _region(f"{start:x}-{start + 3 * HUGE_PAGE:x} r--p 0 00:00 0 \n") is None
    assert _region(f"{start:x}-{start + 3 * HUGE_PAGE:x} rw-s 0 00:00 0 \n") is None
    assert _region(f"{start:x}-{start + 3 * HUGE_PAGE:x} rw-p 0 08:01 7 /usr/lib/x.so\n") is None
    assert _region(f"{start:x}-{start + HUGE_PAGE:x} rw-p 0 00:00 0 \n") is None  # not aligned
    assert _region("garbage\n") is None


@pytest.mark.skipif(
    not THP.exists() or "[never]" in THP.read_text(), reason="no transparent huge pages here"
)
def test_collapse_folds_a_processes_memory_into_huge_pages() -> None:
    done = subprocess.run(
        [sys.executable, "-c", FOLD], capture_output=True, text=True, check=True, timeout=60
    )
    before, after, folded = map(int, done.stdout.split())
    assert folded >= 32 * 1024 * 1024
    assert after - before >= 32 * 1024
