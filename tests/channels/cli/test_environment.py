"""An unknown ``COVE_*`` variable is warned about on stderr and reported by ``cove doctor``."""

from __future__ import annotations

import pytest

from tests.channels.cli.helpers import CoveProcess

pytestmark = pytest.mark.slow  # cove processes, each with its sandbox workers


def test_a_mistyped_variable_is_warned_once_and_fails_the_doctor(proc_cli: CoveProcess) -> None:
    # A real process (the warning reads the process's own environment) against the fake
    # endpoint, so every other check passes at once and the typo is the one failure.
    proc_cli.env["COVE_MAX_ITERATONS"] = "3"
    result = proc_cli("doctor")
    assert result.stderr.count("COVE_MAX_ITERATONS matches no setting") == 1, result.stderr
    assert "environment: unknown: COVE_MAX_ITERATONS" in result.stdout
    assert result.returncode == 1
    assert [line for line in result.stdout.splitlines() if line.startswith("FAIL")] == [
        "FAIL environment: unknown: COVE_MAX_ITERATONS"
    ]
    del proc_cli.env["COVE_MAX_ITERATONS"]
    clean = proc_cli("doctor")
    assert "matches no setting" not in clean.stderr
    assert "environment: no unknown COVE_* variables" in clean.stdout
    assert clean.returncode == 0, clean.stdout + clean.stderr
