"""A workspace's quota: what its entries cost, and a running figure so a write costs O(1).

Every entry — file, directory, symbolic link, anything — costs its blocks on disk (at least its
size) plus ``ENTRY_BYTES`` (an inode and a directory slot), so empty files and directories count
too. A workspace holds at most ``settings.workspace_max_entries`` entries in at most
``settings.workspace_quota_mb`` MB, and paths have at most ``MAX_DEPTH`` parts.

``WorkspaceQuota`` keeps the usage of one workspace: measured by a walk when first needed, then
updated by each write made through it (``writing``: plan, check, write, charge what the write
really took). Cove also writes into a workspace elsewhere — channels save attachments and uploads
there, always as new names in the workspace's own directory (``Workspaces.save_attachments``
replaces a file by renaming a new one over it, after ``writing_all`` admitted them all) — so
before each write the workspace directory is
looked at (one ``stat``): when its modification time, change time, link count or identity moved
since the quota last wrote, the usage is measured again. A change that lands in the same clock
tick as one of the quota's own writes can go unnoticed until the next one.
"""

from __future__ import annotations

import contextlib
import os
import stat
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cove.config import SandboxSettings

ENTRY_BYTES = 1024
"""What each entry costs on top of its blocks on disk."""

MAX_DEPTH = 32
"""The most parts a path in a workspace may have (``a/b/c.txt`` has three)."""

_MB = 1024 * 1024
_BLOCK = 4096  # what a new file or directory is assumed to take per started block, before it exists


@dataclass(frozen=True)
class Usage:
    """What a workspace holds: bytes charged (blocks and entries) and the number of entries."""

    bytes: int
    entries: int

    def plus(self, other: Usage) -> Usage:
        """The sum of two usages."""
        return Usage(self.bytes + other.bytes, self.entries + other.entries)

    def minus(self, other: Usage) -> Usage:
        """This usage without ``other``."""
        return Usage(self.bytes - other.bytes, self.entries - other.entries)


NOTHING = Usage(0, 0)


def charge(info: os.stat_result) -> int:
    """What one entry costs: its blocks on disk, at least its size, plus ``ENTRY_BYTES``."""
    return max(info.st_size, info.st_blocks * 512) + ENTRY_BYTES


def measure(root: Path, *, limit: int) -> Usage:
    """Walk ``root`` (links not followed) and charge every entry under it.

    The walk stops once it has counted more than ``limit`` entries: past that, a workspace takes
    no new entry whatever the exact count is.
    """
    total, entries = 0, 0
    pending = [root]
    while pending and entries <= limit:
        try:
            with os.scandir(pending.pop()) as found:
                listed = list(found)
        except OSError:  # gone or unreadable: counts as empty
            continue
        for entry in listed:
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            total += charge(info)
            entries += 1
            if stat.S_ISDIR(info.st_mode):
                pending.append(Path(entry.path))
    return Usage(total, entries)


def _evidence(root: Path) -> tuple[int, ...] | None:
    """What changes when anything adds, removes or renames an entry of ``root`` itself."""
    try:
        info = os.stat(root)
    except OSError:
        return None
    return (info.st_dev, info.st_ino, info.st_mtime_ns, info.st_ctime_ns, info.st_nlink)


@dataclass(frozen=True)
class WritePlan:
    """What one write will add: the directories to create and the file's current cost."""

    directories: tuple[Path, ...]
    replaced: Usage


class WorkspaceQuota:
    """The running usage of one workspace, and the checks each write passes.

    Thread-safe: writes run in worker threads; a lock serialises them.

    Attributes:
        root: The workspace directory.
        quota_bytes: The most the workspace may hold.
        max_entries: The most entries it may hold.
        measurements: How many times the whole workspace was walked (a cost tests observe).
    """

    def __init__(self, root: Path, settings: SandboxSettings) -> None:
        self.root = root.resolve()
        self.quota_mb = settings.workspace_quota_mb
        self.quota_bytes = settings.workspace_quota_mb * _MB
        self.max_entries = settings.workspace_max_entries
        self.measurements = 0
        self._usage: Usage | None = None
        self._seen: tuple[int, ...] | None = None
        self._lock = threading.Lock()

    def usage(self) -> Usage:
        """The workspace's usage now (measured again if something else changed it)."""
        with self._lock:
            return self._current()

    @contextlib.contextmanager
    def writing(self, function: str, target: Path, size: int) -> Iterator[None]:
        """Admit a write of ``size`` bytes to ``target``, then charge what it took.

        The body makes the parent directories and writes the file. If it fails, the usage is
        measured again before the next write (it may have made some of it).

        Raises:
            OSError: The write would take the workspace past its quota or its entry limit.
        """
        with self._lock:
            usage = self._current()
            plan = self._plan(target)
            self._admit(f"{function}()", usage, [(plan, size)])
            try:
                yield
            except BaseException:
                self._usage = None
                raise
            made = self._made(plan, target)
            self._usage = usage.minus(plan.replaced).plus(made)
            self._seen = _evidence(self.root)

    @contextlib.contextmanager
    def writing_all(self, who: str, files: Sequence[tuple[Path, int]]) -> Iterator[None]:
        """Admit writing every ``(target, size)`` of ``files`` at once, or none of them; the body
        writes them (the usage is measured again afterwards).

        Raises:
            OSError: Together they would take the workspace past its quota or entry limit.
        """
        with self._lock:
            usage = self._current()
            self._admit(who, usage, [(self._plan(target), size) for target, size in files])
            try:
                yield
            finally:
                self._usage = None

    def _current(self) -> Usage:
        seen = _evidence(self.root)
        if self._usage is None or seen != self._seen:
            self._usage = measure(self.root, limit=self.max_entries)
            self._seen = seen
            self.measurements += 1
        return self._usage

    def _plan(self, target: Path) -> WritePlan:
        missing: list[Path] = []
        parent = target.parent
        while parent != self.root and parent != parent.parent and not parent.exists():
            missing.append(parent)
            parent = parent.parent
        try:
            info = target.lstat()
        except OSError:
            replaced = NOTHING
        else:
            replaced = Usage(charge(info), 1)
        return WritePlan(tuple(reversed(missing)), replaced)

    def _admit(self, who: str, usage: Usage, writes: list[tuple[WritePlan, int]]) -> None:
        needed = NOTHING
        for plan, size in writes:
            directories = len(plan.directories) * (_BLOCK + ENTRY_BYTES)
            file = -(-size // _BLOCK) * _BLOCK + ENTRY_BYTES
            needed = needed.plus(Usage(directories + file, len(plan.directories) + 1))
            needed = needed.minus(plan.replaced)
        if usage.entries + needed.entries > self.max_entries:
            raise OSError(
                f"{who}: the workspace may hold at most {self.max_entries:,} files and "
                f"directories ({usage.entries:,} now); write into fewer, larger files"
            )
        if usage.bytes + needed.bytes > self.quota_bytes:
            raise OSError(
                f"{who}: the workspace quota of {self.quota_mb} MB would be exceeded "
                f"({usage.bytes:,} bytes used by {usage.entries:,} entries, {needed.bytes:,} "
                f"more needed; every file and directory counts its disk blocks plus "
                f"{ENTRY_BYTES:,} bytes); write fewer or smaller files"
            )

    def _made(self, plan: WritePlan, target: Path) -> Usage:
        total, entries = 0, 0
        for path in (*plan.directories, target):
            try:
                total += charge(path.lstat())
                entries += 1
            except OSError:
                continue
        return Usage(total, entries)
