"""Opening a PostgreSQL database: reaching the server, refusing what is not cove's, migrating.

A database whose schema holds tables but not cove's is another application's: refused and never
touched. An empty one is cove's to fill. Migrations (``migrations/postgres/``, numbered like
SQLite's) are applied one per transaction together with their record, under a
transaction-scoped advisory lock, so two nodes starting at once never apply one twice; a
database newer than the code raises ``SchemaTooNew``. A read-only open writes nothing: an
empty database then reads as empty (a private in-memory SQLite database stands in), and an
older schema is upgraded first. Credentials never appear in messages: the URL is shown with its
password replaced (``url.redacted``).
"""

from __future__ import annotations

import time

import asyncpg

from cove.errors import NotADatabase, SchemaTooNew, StoreError
from cove.persistence.database import Database
from cove.persistence.migrate import latest_version, migrations
from cove.persistence.postgres.database import PostgresDatabase
from cove.persistence.postgres.url import redacted
from cove.persistence.sqlite import open_sqlite

#: The advisory lock migrators take ("cove" + "migr" in ASCII).
MIGRATION_LOCK = 0x636F76656D69
#: How long connecting may take before the server counts as unreachable.
CONNECT_TIMEOUT_S = 10.0
POOL_SIZE = 10
_COVE_TABLES = {"schema_migrations", "conversation", "turn"}


async def _tables(conn: asyncpg.Connection) -> set[str]:
    rows = await conn.fetch(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
    )
    return {str(row[0]) for row in rows}


async def _version(conn: asyncpg.Connection, location: str) -> int:
    """The schema version, refusing a database that is not cove's or is newer (reads only)."""
    tables = await _tables(conn)
    if not tables:
        return 0
    if not tables >= _COVE_TABLES:
        raise NotADatabase(location, "a PostgreSQL database of another application")
    found = int(await conn.fetchval("SELECT coalesce(max(version), 0) FROM schema_migrations"))
    if found > latest_version():
        raise SchemaTooNew(location, found, latest_version())
    return found


async def migrate(conn: asyncpg.Connection, location: str) -> int:
    """Bring the schema up to date, one migration per transaction; the version reached."""
    while True:
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock($1)", MIGRATION_LOCK)
            current = await _version(conn, location)
            await conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations (version BIGINT PRIMARY KEY,"
                " name TEXT NOT NULL, applied_at DOUBLE PRECISION NOT NULL)"
            )
            applied = {int(r[0]) for r in await conn.fetch("SELECT version FROM schema_migrations")}
            pending = [m for m in migrations("postgres") if m.version not in applied]
            if not pending:
                return current
            migration = pending[0]
            for script in migration.statements:
                await conn.execute(script)
            await conn.execute(
                "INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)",
                migration.version,
                migration.name,
                time.time(),
            )


async def _keep_session(conn: asyncpg.Connection) -> None:
    """What a connection going back to the pool needs beyond asyncpg's rollback of an open
    transaction: nothing (units change no session state, and their advisory locks end with
    their transactions), so no reset query costs a round trip on every release."""


async def _connect(url: str, location: str) -> asyncpg.Connection:
    try:
        return await asyncpg.connect(url, timeout=CONNECT_TIMEOUT_S)
    except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
        raise StoreError(f"cannot reach the PostgreSQL database {location}: {exc}") from exc


async def open_postgres(url: str, *, read_only: bool) -> Database:
    """Open (migrating unless ``read_only``) the PostgreSQL database at ``url``.

    Raises:
        NotADatabase: another application's database (not modified).
        SchemaTooNew: written by a newer cove (not modified).
        StoreError: the server cannot be reached, or refuses the connection or a migration.
    """
    location = redacted(url)
    conn = await _connect(url, location)
    try:
        found = await _version(conn, location)
        if read_only and found == 0:
            # Nothing to read, and nothing may be created: an empty private database answers.
            blank = await open_sqlite(":memory:", read_only=False)
            blank.location = location
            return blank
        current = read_only and found == latest_version()
        version = found if current else await migrate(conn, location)
    except asyncpg.PostgresError as exc:
        raise StoreError(f"cannot open the PostgreSQL database {location}: {exc}") from exc
    finally:
        await conn.close()
    try:
        pool = await asyncpg.create_pool(
            url,
            min_size=1,
            max_size=POOL_SIZE,
            reset=_keep_session,
            timeout=CONNECT_TIMEOUT_S,
            statement_cache_size=1000,
            server_settings={
                "application_name": "cove",
                "default_transaction_read_only": "on" if read_only else "off",
            },
        )
    except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
        raise StoreError(f"cannot reach the PostgreSQL database {location}: {exc}") from exc
    db = PostgresDatabase(pool, url, location, version=version, read_only=read_only)
    db.created = found == 0
    return db


async def probe_postgres(url: str) -> None:
    """Raise ``StoreError`` unless the server at ``url`` takes writes now (writes nothing)."""
    location = redacted(url)
    conn = await _connect(url, location)
    try:
        if await conn.fetchval("SELECT pg_is_in_recovery()"):
            raise StoreError(f"{location} is a standby server: it takes no writes")
        if await conn.fetchval("SHOW transaction_read_only") == "on":
            raise StoreError(f"{location} takes no writes (transaction_read_only is on)")
    except asyncpg.PostgresError as exc:
        raise StoreError(f"cannot use the PostgreSQL database {location}: {exc}") from exc
    finally:
        await conn.close()
