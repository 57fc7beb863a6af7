"""Store fixtures: a new database of each backend (tests/backends.py) and a controllable clock.

A test that takes ``store`` or ``open_store`` runs on SQLite and on PostgreSQL; one that also
looks at the SQLite file itself (``db_path``) runs on SQLite only.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from cove.persistence.opener import Opener
from cove.persistence.store import Store
from tests.persistence.store_helpers import FakeClock


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def db_path(tmp_path: Path, request: pytest.FixtureRequest) -> Path:
    """The SQLite file a test looks at directly (SQLite runs only)."""
    if "backend" in request.fixturenames and request.getfixturevalue("backend") != "sqlite":
        pytest.skip("looks at the SQLite file itself")
    return tmp_path / "cove.db"


@pytest.fixture
def open_store(database: str, clock: FakeClock) -> Callable[[], Opener[Store]]:
    """Factory: another ``Store`` on the same database and clock (like a second process)."""
    return lambda: Store.open(database, clock=clock)


@pytest.fixture
async def store(open_store: Callable[[], Opener[Store]]) -> AsyncIterator[Store]:
    async with open_store() as opened:
        yield opened
