"""The instruction and model tests run on both backends: every test with a ``tmp_path`` (where
its settings put the database) runs once on SQLite and once on PostgreSQL (tests/backends.py),
unless its module says it uses no database (``ONE_BACKEND = True``)."""

from __future__ import annotations

import pytest

from tests.backends import BACKENDS


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if getattr(metafunc.module, "ONE_BACKEND", False):
        return
    if "tmp_path" in metafunc.fixturenames and "backend" not in metafunc.fixturenames:
        metafunc.fixturenames.append("backend")
        metafunc.parametrize("backend", BACKENDS)


@pytest.fixture(autouse=True)
def _database(request: pytest.FixtureRequest) -> None:
    """Create the test's PostgreSQL database before its settings look for it."""
    if "backend" in request.fixturenames:
        request.getfixturevalue("database")
