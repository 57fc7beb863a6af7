"""What running cove as a service needs from the layers below: readiness checks, backups and
moving to another database.

``Readiness`` answers "can this process take turns now?" — the database is writable, the
sandbox can start a worker, the model endpoint answers. The sandbox and endpoint answers are
cached for long (each costs a worker start or an HTTP request); the database's only for a
moment, so a node that lost its database leaves a load balancer's rotation at its next check.
``backup_database`` copies the live database consistently while turns run.
``move_database`` copies every conversation, with its history and its workspace files, to
another database (``cove migrate``).
"""

from __future__ import annotations

import asyncio
import shutil
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar

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

T = TypeVar("T")

#: How long the sandbox's and the model endpoint's answers are reused before they run again.
READY_CACHE_S = 15.0
#: How long the database's answer is reused: a probe is one connection and a query, and a
#: node that cannot reach its database must not look ready for long.
DATABASE_CACHE_S = 1.0


@dataclass(frozen=True)
class ReadinessReport:
    """The checks' verdicts and when they ran (``time.time()``)."""

    checks: tuple[Check, ...]
    checked_at: float

    @property
    def ok(self) -> bool:
        """True when every check passed."""
        return all(check.ok for check in self.checks)

    @property
    def failing(self) -> tuple[str, ...]:
        """The names of the checks that failed (no details: safe to tell anyone)."""
        return tuple(check.name for check in self.checks if not check.ok)


class Readiness:
    """Cached readiness checks of one database and configuration.

    Concurrent callers share one run of the checks. The database's answer is reused for
    ``database_cache_s``, the sandbox's and the model endpoint's for ``cache_s``.
    """

    def __init__(
        self,
        settings: Settings,
        *,
        cache_s: float = READY_CACHE_S,
        database_cache_s: float = DATABASE_CACHE_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings
        self.cache_s = cache_s
        self.database_cache_s = database_cache_s
        self._clock = clock
        self._database: _Cached[Check] | None = None
        self._costly: _Cached[tuple[Check, Check]] | None = None
        self._last: ReadinessReport | None = None
        self._lock = asyncio.Lock()

    async def check(self) -> ReadinessReport:
        """The latest verdict, running each check whose cached answer is too old."""
        async with self._lock:
            now = self._clock()
            database, costly = self._database, self._costly
            if database is None or now - database.at >= self.database_cache_s:
                database = None
            if costly is None or now - costly.at >= self.cache_s:
                costly = None
            if self._last is not None and database is not None and costly is not None:
                return self._last
            fresh_database, fresh_costly = await asyncio.gather(
                _Cached.of(now, self._check_database()) if database is None else _kept(database),
                _Cached.of(now, self._check_costly()) if costly is None else _kept(costly),
            )
            self._database, self._costly = fresh_database, fresh_costly
            checks = (fresh_database.value, *fresh_costly.value)
            self._last = ReadinessReport(checks, time.time())
            return self._last

    async def _check_database(self) -> Check:
        return await _guarded("database", self._probe_database())

    async def _check_costly(self) -> tuple[Check, Check]:
        sandbox, endpoint = await asyncio.gather(
            check_sandbox(self.settings.sandbox), check_endpoint(self.settings.model)
        )
        return sandbox, endpoint

    async def _probe_database(self) -> Check:
        location = self.settings.store.database
        await probe_writable(location)
        return Check("database", True, f"{shown(location)} is writable")


@dataclass(frozen=True)
class _Cached(Generic[T]):
    """A check's answer and when (the readiness clock) it was found."""

    at: float
    value: T

    @staticmethod
    async def of(at: float, running: Awaitable[T]) -> _Cached[T]:
        return _Cached(at, await running)


async def _kept(cached: _Cached[T]) -> _Cached[T]:
    return cached


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
