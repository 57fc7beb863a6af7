"""What the CLI shows of an iteration whose answer was refused, and of a cost nobody knows.

The fake endpoint's model has no price: its cost is unknown, never ``$0.0000`` or ``0.0``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.channels.cli.helpers import Cove, CoveProcess
from tests.fakes.openai_server import FakeOpenAI
from tests.scripted import reply

REFUSED = "answer refused: undefined placeholder(s) {{x}}"


def refused_then_answered(server: FakeOpenAI) -> None:
    server.add_replies(reply(answer="result={{x}}"), reply(["x = 3"], "result={{x}}"))


def test_show_and_export_give_the_reason_an_answer_was_refused(
    cli: Cove, server: FakeOpenAI
) -> None:
    refused_then_answered(server)
    ran = cli("run", "what is x?")
    assert ran.exit_code == 0 and ran.stdout.strip() == "result=3"
    [conv] = cli.json("list")
    shown = cli("show", conv["id"])
    first = shown.stdout.split("iteration 2")[0]
    assert "iteration 1" in first and REFUSED in first
    markdown = cli("export", conv["id"], "--format", "md").stdout
    assert REFUSED in markdown.split("### Iteration 2")[0]
    iterations = cli.json("show", conv["id"])["turns"][0]["iterations"]
    assert [it["status"] for it in iterations] == ["error", "ok"]
    assert iterations[0]["refusal"].startswith(REFUSED) and iterations[1]["refusal"] is None
    exported = json.loads(cli("export", conv["id"], "--format", "json").stdout)
    assert exported["turns"][0]["iterations"][0]["refusal"].startswith(REFUSED)


@pytest.mark.slow
def test_watch_shows_the_reason_an_answer_was_refused(
    cli: Cove, proc_cli: CoveProcess, server: FakeOpenAI
) -> None:
    refused_then_answered(server)
    assert cli("run", "what is x?").exit_code == 0
    [conv] = cli.json("list")
    watched = proc_cli("watch", conv["id"], "--after", "0", "--once")
    assert watched.returncode == 0, watched.stderr
    assert REFUSED in watched.stdout.split("iteration 2")[0]
    events = proc_cli("watch", conv["id"], "--events", "--after", "0", "--once").stdout
    refusals = [e for e in map(json.loads, events.splitlines()) if e["type"] == "answer_refused"]
    assert [(e["iteration"], e["reason"][: len(REFUSED)]) for e in refusals] == [(1, REFUSED)]


def test_an_unknown_cost_is_unknown_in_every_output(cli: Cove, server: FakeOpenAI) -> None:
    server.add_replies(reply(["x = 1"], "{{x}}"))
    ran = cli("run", "--json", "one")
    result = json.loads(ran.stdout)
    assert result["cost_known"] is False and result["cost_usd"] is None
    [conv] = cli.json("list")
    turn = cli.json("show", conv["id"])["turns"][0]
    assert turn["cost_known"] is False and turn["cost_usd"] is None
    assert all(it["cost_usd"] is None for it in turn["iterations"])
    markdown = cli("export", conv["id"], "--format", "md").stdout
    assert "$0.0000" not in markdown and "cost unknown" in markdown
    shown = cli("show", conv["id"]).stdout
    assert "$0.0000" not in shown and "cost unknown" in shown


def test_a_priced_model_shows_its_cost(tmp_path: Path, cli: Cove, server: FakeOpenAI) -> None:
    config = tmp_path / "priced.toml"
    config.write_text('[prices."fake-model"]\ninput = 1.0\noutput = 2.0\n')
    cli.env["COVE_CONFIG"] = str(config)
    server.add_replies(reply(["x = 1"], "{{x}}"))
    result = json.loads(cli("run", "--json", "one").stdout)
    assert result["cost_known"] is True and result["cost_usd"] > 0
    [conv] = cli.json("list")
    assert cli.json("show", conv["id"])["turns"][0]["cost_usd"] == result["cost_usd"]
    assert "$0.0" in cli("export", conv["id"], "--format", "md").stdout
