"""Fixtures for the ``cove`` command tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.channels.cli.helpers import Cove, CoveProcess
from tests.fakes.openai_server import FakeOpenAI


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


@pytest.fixture
def cli(tmp_path: Path, server: FakeOpenAI) -> Cove:
    """``cove`` in this process, aimed at ``server``."""
    return Cove(tmp_path, server)


@pytest.fixture
def proc_cli(tmp_path: Path, server: FakeOpenAI) -> CoveProcess:
    """``cove`` as a subprocess, aimed at ``server``."""
    return CoveProcess(tmp_path, server)
