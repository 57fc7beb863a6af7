"""Store fixtures: real SQLite files under tmp_path and a controllable clock."""

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
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "cove.db"


@pytest.fixture
def open_store(db_path: Path, clock: FakeClock) -> Callable[[], Opener[Store]]:
    """Factory: another ``Store`` on the same file and clock (like a second process)."""
    return lambda: Store.open(db_path, clock=clock)


@pytest.fixture
async def store(open_store: Callable[[], Opener[Store]]) -> AsyncIterator[Store]:
    async with open_store() as opened:
        yield opened
