"""Getting started: ``--version``, help with examples, ``models``, ``doctor``, ``demo``."""

from __future__ import annotations

import json
import re
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from cove import registered
from tests.channels.cli.helpers import Cove, CoveProcess
from tests.fakes.openai_server import FakeOpenAI


def test_version(cli: Cove) -> None:
    result = cli("--version")
    assert result.exit_code == 0
    name, version = result.stdout.split()
    assert name == "cove" and version[0].isdigit()


@pytest.mark.parametrize("name", sorted(registered.own("cove.commands")))
def test_every_command_has_help_with_examples(cli: Cove, name: str) -> None:
    result = cli(name, "--help")
    assert result.exit_code == 0
    assert "Examples:" in result.stdout and f"cove {name}" in result.stdout
    assert "--db" in result.stdout  # the global flags work after the command name too


def test_top_level_help_lists_examples_and_exit_codes(cli: Cove) -> None:
    result = cli("--help")
    assert result.exit_code == 0
    assert "Examples:" in result.stdout and "Exit codes:" in result.stdout
    assert "cat data.csv | cove run" in result.stdout


def test_models_lists_the_endpoint_s_models_and_marks_the_configured_one(
    cli: Cove, server: FakeOpenAI
) -> None:
    listed = cli("models")
    assert listed.exit_code == 0, listed.stderr
    assert listed.stdout == "* fake-model\n"
    assert cli.json("models") == ["fake-model"]
    cli.env["COVE_MODEL"] = "gpt-unlisted"
    other = cli("models")
    assert other.stdout == "  fake-model\n"
    assert "gpt-unlisted is not among them" in other.stderr


def test_models_without_an_endpoint_says_how_to_configure_one(tmp_path: Path) -> None:
    result = Cove(tmp_path, None)("models")
    assert result.exit_code == 2 and "OPENAI_API_KEY" in result.stderr


@pytest.mark.slow
def test_doctor_reports_each_check_and_warns_about_an_unlisted_model(
    cli: Cove, server: FakeOpenAI
) -> None:
    result = cli("doctor")
    assert result.exit_code == 0, result.stdout
    for name in ("configuration", "database", "sandbox", "model endpoint"):
        assert name in result.stdout
    assert "WARN" not in result.stdout
    cli.env["COVE_MODEL"] = "gpt-unlisted"
    warned = cli("doctor")
    assert warned.exit_code == 0  # a warning, not a failure
    assert "WARN model: gpt-unlisted is not among the 1 models" in warned.stdout
    cli.env["OPENAI_BASE_URL"] = "http://127.0.0.1:9/v1"
    failing = cli("doctor")
    assert failing.exit_code == 1 and "fix:" in failing.stdout


def test_demo_runs_offline_in_its_own_database(tmp_path: Path) -> None:
    cli = Cove(tmp_path, None)
    del cli.env["COVE_DB"]  # the user's history is the default database of the data dir
    result = cli("demo")
    assert result.exit_code == 0, result.stdout + result.stderr
    assert "fork" in result.stdout and "replay" in result.stdout
    demo_db = tmp_path / "data" / "demo.db"
    assert demo_db.exists()
    assert not (tmp_path / "data" / "cove.db").exists()
    assert f"--db {demo_db} show" in result.stdout  # the hints point at the demo database
    # Each turn's summary says how long it took: a turn of a few milliseconds is not "0.0s".
    took = re.findall(r"^done · .* · (\S+)$", result.stdout, re.M)
    assert len(took) == 4 and "0.0s" not in took
    assert all(re.fullmatch(r"[1-9]\d*ms|\d+\.\ds", t) for t in took), took
    assert cli.json("list") == []
    assert len(json.loads(cli("--db", str(demo_db), "list", "--json").stdout)) == 2


def test_demo_with_db_uses_that_database(tmp_path: Path) -> None:
    cli = Cove(tmp_path, None)
    chosen = tmp_path / "chosen.db"
    result = cli("demo", "--db", str(chosen))
    assert result.exit_code == 0, result.stdout + result.stderr
    assert len(json.loads(cli("--db", str(chosen), "list", "--json").stdout)) == 2
    assert not (tmp_path / "data" / "demo.db").exists()


def test_doctor_reports_the_environment_check(cli: Cove, server: FakeOpenAI) -> None:
    result = cli("doctor")
    assert "environment: no unknown COVE_* variables" in result.stdout


def test_an_unknown_cove_variable_is_warned_once_and_fails_the_doctor(
    cli: Cove, server: FakeOpenAI
) -> None:
    cli.env["COVE_MAX_ITERATONS"] = "3"
    listed = cli("list")
    assert listed.exit_code == 0
    assert listed.stderr.count("COVE_MAX_ITERATONS matches no setting") == 1
    doctor = cli("doctor")
    assert doctor.exit_code == 1
    assert "environment: unknown: COVE_MAX_ITERATONS" in doctor.stdout


def test_doctor_fails_live_environments_the_open_file_limit_cuts(
    tmp_path: Path, server: FakeOpenAI
) -> None:
    def limited() -> None:  # 300 files, and no raising them: room for 11 environments
        resource.setrlimit(resource.RLIMIT_NOFILE, (300, 300))

    doctor = subprocess.run(
        [sys.executable, "-m", "cove", "doctor"],
        env=CoveProcess(tmp_path, server).env,
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=limited,
    )
    assert doctor.returncode == 1
    assert "FAIL live environments: up to 11," in doctor.stdout
    assert "fix: raise the open-file limit (ulimit -n)" in doctor.stdout
