"""An unknown ``COVE_*`` variable is warned about on stderr and reported by ``cove doctor``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # cove processes, each with its sandbox workers


def test_a_mistyped_variable_is_warned_once_and_fails_the_doctor(tmp_path: Path) -> None:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path),
        "COVE_DATA_DIR": str(tmp_path / "data"),
        "OPENAI_BASE_URL": "http://127.0.0.1:9/v1",
        "COVE_MAX_ITERATONS": "3",
    }
    result = subprocess.run(
        [sys.executable, "-m", "cove", "doctor"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.stderr.count("COVE_MAX_ITERATONS matches no setting") == 1, result.stderr
    assert "environment: unknown: COVE_MAX_ITERATONS" in result.stdout
    assert result.returncode == 1
    fixed = {k: v for k, v in env.items() if k != "COVE_MAX_ITERATONS"}
    clean = subprocess.run(
        [sys.executable, "-m", "cove", "doctor"],
        env=fixed,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "matches no setting" not in clean.stderr
    assert "environment: no unknown COVE_* variables" in clean.stdout
