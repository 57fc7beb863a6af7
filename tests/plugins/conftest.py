"""The example plugin (``examples/cove-notes``) installed the way a third party would be.

It is built and installed from a copy of its source with pip, offline (``--no-index``,
``--no-deps``, ``--no-build-isolation``: setuptools from this environment), into a directory of
its own; putting that directory on ``sys.path`` (or ``PYTHONPATH`` for a ``cove`` process) is
what makes ``importlib.metadata`` find its entry points.
"""

from __future__ import annotations

import importlib
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).parents[2] / "examples" / "cove-notes"


@pytest.fixture(scope="session")
def notes_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory holding the installed ``cove-notes`` distribution and its package."""
    root = tmp_path_factory.mktemp("cove-notes")
    source, target = root / "source", root / "site"
    shutil.copytree(EXAMPLE, source, ignore=shutil.ignore_patterns("build", "*.egg-info"))
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-index",
            "--no-deps",
            "--no-build-isolation",
            "--target",
            str(target),
            str(source),
        ],
        check=True,
        capture_output=True,
    )
    return target


@pytest.fixture
def notes_file(notes_site: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The example plugin on this process's path, its notebook a file under ``tmp_path``."""
    monkeypatch.syspath_prepend(str(notes_site))
    importlib.invalidate_caches()
    path = tmp_path / "notes.json"
    monkeypatch.setenv("NOTEBOOK_FILE", str(path))
    yield path
