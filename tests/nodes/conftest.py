"""Fixtures of the multi-node tests: a PostgreSQL server of the test's own (which it may stop),
and a new database on the session's server."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.backends import require_postgres
from tests.postgres_server import PostgresServer


@pytest.fixture
def private_postgres() -> Iterator[PostgresServer]:
    """A PostgreSQL server for this test alone: it may halt and resume it."""
    require_postgres()
    with PostgresServer() as server:
        yield server


@pytest.fixture
def shared_url(postgres_server: PostgresServer) -> str:
    """A new, empty database on the session's PostgreSQL server, for every node of a test."""
    return postgres_server.database()
