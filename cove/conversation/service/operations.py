"""What running cove as a service needs from the layers below: readiness checks, backups and
moving to another database.

``Readiness`` answers "can this process take turns now?" — the database is writable, the
sandbox can start a worker, the model endpoint answers — and caches the answer, because each
check costs real work (a worker start, an HTTP request). ``backup_database`` copies the live
database consistently while turns run. ``move_database`` copies every conversation, with its
history and its workspace files, to another database (``cove migrate``).
"""

from __future__ import annotations

import asyncio
import shutil
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from cove.config import Settings
from cove.conversation.service.health import Check, check_endpoint, check_sandbox
from cove.errors import CoveError
from cove.persistence.locations import backup, probe_writable, shown
from cove.persistence.maintenance import BackupReport
from cove.persistence.transfer import TransferReport, transfer

__all__ = [
    "BackupReport",
    "Readiness",
    "ReadinessReport",
    "TransferReport",
    "backup_database",
    "move_database",
]

#: How long a readiness answer is reused before the checks run again.
READY_CACHE_S = 15.0


@dataclass(frozen=True)
class ReadinessReport:
    """The checks' verdicts and when they ran (``time.time()``)."""

    checks: tuple[Check, ...]
    checked_at: float

    @property
    def ok(self) -> bool:
        """True when every check passed."""
        return all(check.ok for check in self.checks)


class Readiness:
    """Cached readiness checks of one database and configuration.

    Concurrent callers share one run of the checks; a result is reused for ``cache_s``.
    """

    def __init__(
        self,
        settings: Settings,
        *,
        cache_s: float = READY_CACHE_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings
        self.cache_s = cache_s
        self._clock = clock
        self._last: tuple[float, ReadinessReport] | None = None
        self._lock = asyncio.Lock()

    async def check(self) -> ReadinessReport:
        """The latest verdict, running the checks if the cached one is too old."""
        async with self._lock:
            if self._last is not None and self._clock() - self._last[0] < self.cache_s:
                return self._last[1]
            checks = await asyncio.gather(
                self._database(),
                check_sandbox(self.settings.sandbox),
                check_endpoint(self.settings.model),
            )
            report = ReadinessReport(tuple(checks), time.time())
            self._last = (self._clock(), report)
            return report

    async def _database(self) -> Check:
        return await _guarded("database", self._probe_database())

    async def _probe_database(self) -> Check:
        location = self.settings.store.database
        await probe_writable(location)
        return Check("database", True, f"{shown(location)} is writable")


async def _guarded(name: str, check: Awaitable[Check]) -> Check:
    try:
        return await check
    except CoveError as exc:
        return Check(name, False, str(exc))
    except OSError as exc:
        return Check(name, False, f"{type(exc).__name__}: {exc}")


async def backup_database(settings: Settings, target: str | Path) -> BackupReport:
    """Copy the configured database to ``target`` consistently, while it is in use.

    Raises:
        CoveError: ``target`` exists or is the database. StoreError: no database, not cove's,
            or the copy failed its integrity check.
    """
    return await backup(settings.store.database, str(target))


async def move_database(settings: Settings, target: str) -> TransferReport:
    """Copy every conversation of the configured database, with its whole history, to the
    database ``target`` (a SQLite path or a ``postgresql://`` URL; created if missing, empty
    otherwise), and its workspace files to where ``target``'s settings keep them.

    Stop every cove process using the database first: the copy is of what is committed when
    each table is read. The source is left as it was.

    Raises:
        CoveError: the target holds conversations already, or is the source.
        StoreError: either database cannot be opened, or the copy does not match the source.
    """
    report = await transfer(settings.store.database, target)
    source = settings.store.workspaces
    destination = settings.replace(db_path=target).store.workspaces
    if source.resolve() != destination.resolve() and source.is_dir():
        await asyncio.to_thread(_copy_workspaces, source, destination)
    return report


def _copy_workspaces(source: Path, destination: Path) -> None:
    """Copy each conversation's workspace folder that the destination does not have yet."""
    destination.mkdir(mode=0o700, parents=True, exist_ok=True)
    for folder in source.iterdir():
        if folder.is_dir() and not (destination / folder.name).exists():
            shutil.copytree(folder, destination / folder.name, symlinks=True)
