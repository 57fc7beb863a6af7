"""``cove run --system`` and ``-m``: kept with the conversation, changed by ``-c``; a real
``cove`` process for the fallback list read from a config file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.channels.cli.helpers import Cove, CoveProcess
from tests.fakes.openai_server import FakeOpenAI, Fault
from tests.scripted import reply

pytestmark = pytest.mark.slow
ONE_BACKEND = True  # cove run on its SQLite file; the store's both backends are tested elsewhere


@pytest.fixture
def server() -> FakeOpenAI:
    with FakeOpenAI() as fake:
        yield fake  # type: ignore[misc]


def system_of(request: dict[str, object]) -> str:
    messages = request["messages"]
    assert isinstance(messages, list)
    return str(messages[0]["content"])


def test_system_and_model_are_kept_with_the_conversation_and_changed_by_continue(
    tmp_path: Path, server: FakeOpenAI
) -> None:
    cli = Cove(tmp_path, server)
    server.listed = ["fake-model", "big-model"]
    server.respond_with(reply([], "ok"))
    first = cli("run", "--system", "Answer as a haiku.", "-m", "big-model", "one")
    assert first.exit_code == 0, first.stderr
    assert cli("run", "-c", "two").exit_code == 0  # the same instructions and model
    changed = cli("run", "-c", "--system", "Answer in French.", "three")
    assert changed.exit_code == 0, changed.stderr
    cleared = cli("run", "-c", "--system", "", "--model", "fake-model", "four")
    assert cleared.exit_code == 0, cleared.stderr
    refused = cli("run", "-c", "-m", "no-such-model", "five")
    assert refused.exit_code != 0
    assert "does not offer the model 'no-such-model'" in refused.stderr
    too_long = cli("run", "--system", "x" * 4001, "six")
    assert too_long.exit_code != 0 and "at most 4,000" in too_long.stderr
    [conv] = cli.json("list")  # the refused runs created nothing and sent nothing
    turns = cli.json("show", conv["id"])["turns"]
    assert [t["request"] for t in turns] == ["one", "two", "three", "four"]
    assert [r["model"] for r in server.requests] == [
        "big-model",
        "big-model",
        "big-model",
        "fake-model",
    ]
    systems = [system_of(r) for r in server.requests]
    assert "Answer as a haiku." in systems[0] and systems[0] == systems[1]
    assert "Answer in French." in systems[2] and "haiku" not in systems[2]
    assert "# Instructions for this conversation" not in systems[3]


def test_a_fallback_list_in_the_config_file_carries_a_turn_past_a_failing_model(
    tmp_path: Path, server: FakeOpenAI
) -> None:
    with FakeOpenAI(model="backup-model") as backup:
        config = tmp_path / "cove.toml"
        config.write_text(
            "[model]\n"
            'models = ["fake-model", "backup-model"]\n'
            "max_retries = 1\n"
            '[model.endpoints."backup-model"]\n'
            f'base_url = "{backup.base_url}"\n'
            'api_key = "sk-backup"\n'
        )
        cove = CoveProcess(tmp_path, server)
        cove.env["COVE_CONFIG"] = str(config)
        server.add_faults(Fault.rate_limit(0.01), Fault.rate_limit(0.01))
        backup.add_replies(reply([], "answered by the backup"))
        result = cove("run", "--events", "go")
        assert result.returncode == 0, result.stderr
        assert [r["model"] for r in backup.requests] == ["backup-model"]
    assert '"model": "backup-model"' in result.stdout  # the model_reply event names it
    assert "fake-model is unavailable" in result.stdout  # the model_retry event says why
    listed = cove("list", "--json")
    conversation_id = json.loads(listed.stdout)[0]["id"]
    shown = json.loads(cove("show", conversation_id, "--json").stdout)
    [iteration] = shown["turns"][0]["iterations"]
    assert iteration["model"] == "backup-model"
    printed = cove("show", conversation_id).stdout
    assert "backup-model model" in printed  # the iteration line names the model that answered
