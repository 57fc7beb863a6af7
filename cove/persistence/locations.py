"""Where a database is: a SQLite path (the embedded default) or a ``postgresql://`` URL."""

from __future__ import annotations

import asyncio
from types import ModuleType

from cove.errors import StoreError
from cove.persistence import maintenance
from cove.persistence.database import Database
from cove.persistence.maintenance import BackupReport
from cove.persistence.postgres.url import is_postgres, redacted

__all__ = ["backup", "is_postgres", "open_database", "probe_writable", "shown"]
from cove.persistence.sqlite import open_sqlite

INSTALL_POSTGRES = "pip install 'cove[postgres]'"


def _postgres(location: str) -> ModuleType:
    """The PostgreSQL backend's opening module, imported only for a PostgreSQL URL (asyncpg is
    an optional extra)."""
    try:
        from cove.persistence.postgres import opening
    except ImportError as exc:
        raise StoreError(
            f"{redacted(location)} is a PostgreSQL database, and its driver is not installed: "
            f"{INSTALL_POSTGRES}"
        ) from exc
    return opening


def shown(location: str) -> str:
    """``location`` as messages show it (a URL's password replaced)."""
    return redacted(location) if is_postgres(location) else location


async def open_database(location: str, *, read_only: bool) -> Database:
    """Open the database at ``location`` with the backend its form names.

    Raises:
        NotADatabase, SchemaTooNew: refused. StoreError: it cannot be opened or reached, or
            the PostgreSQL driver is not installed.
    """
    if not is_postgres(location):
        return await open_sqlite(location, read_only=read_only)
    db: Database = await _postgres(location).open_postgres(location, read_only=read_only)
    return db


async def probe_writable(location: str) -> None:
    """Raise ``StoreError`` unless the database at ``location`` can be written now; nothing is
    written (SQLite: its write lock taken and given back; PostgreSQL: not a standby or a
    read-only server)."""
    if is_postgres(location):
        await _postgres(location).probe_postgres(location)
    else:
        await asyncio.to_thread(maintenance.probe_writable, location)


async def backup(location: str, target: str) -> BackupReport:
    """Copy the SQLite database at ``location`` to the new file ``target``, consistently while
    it is in use (``maintenance.backup``).

    Raises:
        CoveError: ``target`` exists or is the database. StoreError: the copy failed its
            check, or the database is PostgreSQL's (its operators back it up with pg_dump or
            the server's own backups).
    """
    if is_postgres(location):
        raise StoreError(
            f"{redacted(location)} is a PostgreSQL database: back it up with pg_dump or the "
            "server's own backups (cove backup copies SQLite files)"
        )
    return await asyncio.to_thread(maintenance.backup, location, target)
