"""Shared fixtures: a fake OpenAI-compatible endpoint and settings pointing at it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from cove.config import Settings

# ``backend`` and ``database``: tests that run on SQLite and on PostgreSQL (tests/backends.py).
from tests.backends import backend, database, database_for, postgres_server
from tests.fakes.openai_server import FakeOpenAI

# Tests assert behaviour, never speed: on a loaded machine a slow example is not a failure.
settings.register_profile(
    "cove", deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
settings.load_profile("cove")

__all__ = ["backend", "database", "postgres_server"]

# Recognisable so tests can assert it never shows up where it must not.
FAKE_API_KEY = "sk-cove-test-DO-NOT-LEAK-4242"


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAI]:
    """A running fake endpoint; script it with ``add_replies``/``add_faults``/``unsupported``."""
    with FakeOpenAI() as server:
        yield server


@pytest.fixture
def openai_settings(fake_openai: FakeOpenAI, tmp_path: Path) -> Settings:
    """Settings aimed at ``fake_openai`` with a fake key, fast retries and a short timeout.

    As with ``settings_for``, the sandbox's data libraries are off (a second or more of CPU for
    every zygote); a module whose tests use them overrides this fixture to turn them on.
    """
    return Settings.load(
        env={},
        sandbox_libraries=False,
        data_dir=tmp_path,
        db_path=database_for(tmp_path, ""),
        base_url=fake_openai.base_url,
        api_key=FAKE_API_KEY,
        model="fake-model",
        request_timeout_s=5.0,
        max_retries=2,
        retry_base_delay_s=0.01,
    )
