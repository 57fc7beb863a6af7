"""Running tests on both database backends: SQLite files and a private PostgreSQL server.

``backend`` is ``sqlite`` or ``postgres``; ``database`` is a new empty database of it (a file
under ``tmp_path``, or a database on the session's PostgreSQL server, started on first use as an
unprivileged user and stopped at the end). Suites that build settings from ``tmp_path``
(``tests.scripted.settings_for`` and the process tests' helpers) find the test's database with
``database_for``. Without the PostgreSQL binaries the ``postgres`` runs are skipped, except in
CI (``CI`` set), where ``.ci/run`` installs them and a missing server is a failure.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.postgres_server import BIN, PostgresServer, available

BACKENDS = ("sqlite", "postgres")
_databases: dict[str, str] = {}  # tmp_path -> the PostgreSQL database of the test using it


def database_for(tmp_path: Path, default: str | None = None) -> str | None:
    """The database of the test whose temporary folder is ``tmp_path`` (else ``default``)."""
    return _databases.get(str(tmp_path), default)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """A PostgreSQL 15 server for this test process."""
    require_postgres()
    with PostgresServer() as server:
        yield server


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """The backend under test."""
    return str(request.param)


@pytest.fixture
def database(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[str]:
    """A new, empty database of ``backend``; ``database_for(tmp_path)`` finds it too."""
    if backend == "sqlite":
        yield str(tmp_path / "cove.db")
        return
    server: PostgresServer = request.getfixturevalue("postgres_server")
    url = server.database()
    _databases[str(tmp_path)] = url
    try:
        yield url
    finally:
        _databases.pop(str(tmp_path), None)


def require_postgres() -> None:
    """Skip the calling test when PostgreSQL is not installed (fail in CI, which installs it)."""
    if not available():
        if os.environ.get("CI"):
            pytest.fail(f"PostgreSQL is not installed in {BIN}: .ci/run installs it")
        pytest.skip(f"PostgreSQL is not installed in {BIN}")
