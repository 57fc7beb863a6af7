"""Numbered plain-SQL migrations, applied in order, each atomically with its record.

Migration files live in ``cove/persistence/migrations/`` as ``NNNN_name.sql`` and are loaded as
package data. Each one runs inside its own ``BEGIN IMMEDIATE`` transaction together with the
``schema_migrations`` row that records it, so a crash leaves either the old or the new schema.

Numbers must be unique but may have gaps, and a migration is applied when its number is not
recorded yet (not merely when it is above the highest recorded one): branches that add
migrations in parallel can land in any order and every database still gets all of them.
"""

from __future__ import annotations

import re
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from importlib import resources

from cove.errors import SchemaTooNew, StoreError

_FILE_NAME = re.compile(r"^(\d{4})_(\w+)\.sql$")


@dataclass(frozen=True)
class Migration:
    """One migration file: its number, name and statements in order."""

    version: int
    name: str
    statements: tuple[str, ...]


def split_statements(script: str) -> tuple[str, ...]:
    """Split a SQL script into complete statements (triggers with ``BEGIN ... END`` included).

    ``executescript`` would be simpler but it commits any open transaction first, which would
    break the "migration and its record in one transaction" rule.
    """
    statements: list[str] = []
    buffer: list[str] = []
    for line in script.splitlines(keepends=True):
        buffer.append(line)
        text = "".join(buffer)
        if sqlite3.complete_statement(text):
            statements.append(text.strip())
            buffer = []
    leftover = [line for line in buffer if line.strip() and not line.strip().startswith("--")]
    if leftover:
        raise StoreError(f"incomplete SQL statement at the end of a migration: {leftover[0]!r}")
    return tuple(statements)


@cache
def migrations(kind: str = "sqlite") -> tuple[Migration, ...]:
    """Return the packaged migrations of a backend (``sqlite`` or ``postgres``) in order.

    Raises:
        StoreError: two files share a number.
    """
    found: list[Migration] = []
    folder = resources.files("cove.persistence").joinpath("migrations")
    if kind != "sqlite":
        folder = folder.joinpath(kind)
    for entry in folder.iterdir():
        match = _FILE_NAME.match(entry.name)
        if match is None:
            continue
        script = entry.read_text(encoding="utf-8")
        statements = split_statements(script) if kind == "sqlite" else (script,)
        found.append(Migration(int(match[1]), match[2], statements))
    found.sort(key=lambda migration: migration.version)
    versions = [migration.version for migration in found]
    if len(set(versions)) != len(versions) or (versions and versions[0] < 1):
        raise StoreError("cove's migration files must have distinct numbers from 0001 up")
    return tuple(found)


def latest_version() -> int:
    """The schema version this code writes (the highest migration number).

    Both backends share the numbering: PostgreSQL's first migration is the schema SQLite's
    migrations had built by then, and later ones come in pairs.
    """
    known = migrations()
    return known[-1].version if known else 0


@contextmanager
def _immediate(conn: sqlite3.Connection) -> Iterator[None]:
    """One ``BEGIN IMMEDIATE`` transaction, rolled back on any exception."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def _applied(conn: sqlite3.Connection) -> set[int]:
    conn.execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations ("
        " version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at REAL NOT NULL)"
    )
    return {int(row[0]) for row in conn.execute("SELECT version FROM schema_migrations")}


def check_supported(conn: sqlite3.Connection, path: str) -> int:
    """Read the schema version without writing anything; return it (0 for a fresh file).

    Raises:
        SchemaTooNew: the database was written by a newer cove.
    """
    has_table = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'"
    ).fetchone()
    if not has_table:
        return 0
    row = conn.execute("SELECT max(version) FROM schema_migrations").fetchone()
    found = int(row[0] or 0)
    if found > latest_version():
        raise SchemaTooNew(path, found, latest_version())
    return found


def migrate(
    conn: sqlite3.Connection,
    path: str,
    *,
    before_commit: Callable[[sqlite3.Connection], None] | None = None,
) -> int:
    """Bring the schema up to date; return the resulting version.

    Each pending migration runs in its own transaction that first re-reads the current
    version, so two processes opening a fresh database at once cannot apply one twice.
    ``before_commit`` runs inside every one of those transactions, the last one included (the
    store tags the database as cove's there, together with its first tables).

    Raises:
        SchemaTooNew: the database was written by a newer cove; nothing is changed.
    """
    known = migrations()
    supported = latest_version()
    while True:
        with _immediate(conn):
            applied = _applied(conn)
            current = max(applied, default=0)
            if current > supported:
                raise SchemaTooNew(path, current, supported)
            pending = [m for m in known if m.version not in applied]
            if before_commit is not None:
                before_commit(conn)
            if not pending:
                return current
            migration = pending[0]
            for statement in migration.statements:
                conn.execute(statement)
            conn.execute(
                "INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)",
                (migration.version, migration.name, time.time()),
            )
