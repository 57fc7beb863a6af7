"""A conversation's own approval policy: ``cove policy`` shows and sets it, and a live
environment (a service's warm one) takes a change in at its next turn."""

from __future__ import annotations

from pathlib import Path

import pytest

from cove.conversation import Conversations, scripted_factory
from cove.errors import ConfigError
from tests.channels.cli.helpers import CoveProcess
from tests.fakes.openai_server import FakeOpenAI
from tests.plugins.test_cli import cove, server  # noqa: F401 (fixtures: the plugin installed)
from tests.plugins.test_example_plugin import notes
from tests.scripted import reply, settings_for

pytestmark = pytest.mark.slow  # cove processes and sandbox workers


def test_cove_policy_shows_sets_and_refuses_bad_input(
    cove: CoveProcess,  # noqa: F811
    server: FakeOpenAI,  # noqa: F811
    tmp_path: Path,
) -> None:
    server.add_replies(
        reply(['notes_add("first")']),
        reply(answer="not allowed"),
        reply(['notes_add("second")']),
        reply(answer="added"),
    )
    assert cove("run", "note: first").returncode == 0  # off a terminal: ask denies
    cid = cove.json("list")[0]["id"]
    shown = cove.json("policy", cid)
    by_name = {f["name"]: f for f in shown["functions"]}
    assert by_name["notes_add"] == {
        "name": "notes_add",
        "extension": "notes_add",
        "effect": "write",
        "policy": "ask",
        "entry": "default",
        "from": "default",
    }
    assert shown["own"] == {} and shown["settings"] == {}

    changed = cove("policy", cid[:8], "notes_add", "allow")
    assert changed.returncode == 0, changed.stderr
    assert "set notes_add = allow" in changed.stdout
    assert (
        "notes_add  [notes_add: write] allow · by this conversation (notes_add)" in changed.stdout
    )
    cove.env["COVE_EXTENSION_POLICY"] = "write=deny"
    shown = cove.json("policy", cid)
    assert shown["own"] == {"notes_add": "allow"} and shown["settings"] == {"write": "deny"}
    rules = {f["name"]: (f["policy"], f["from"]) for f in shown["functions"]}
    assert rules["notes_add"] == ("allow", "own")  # its own entry wins over the settings'
    assert rules["write_file"] == ("deny", "settings")

    ran = cove("run", "--cid", cid, "note: second")
    assert ran.returncode == 0, ran.stderr
    assert notes(tmp_path / "n.json") == ["second"]
    shown_turns = cove("show", cid)
    assert "approval: notes_add('second') [write] approved by the policy" in shown_turns.stdout

    wrong_key = cove("policy", cid, "no_such_thing", "deny")
    assert wrong_key.returncode == 2
    assert "'no_such_thing' is not a function, an extension or an effect" in wrong_key.stderr
    no_rule = cove("policy", cid, "notes_add")
    assert no_rule.returncode == 2 and "give the rule too" in no_rule.stderr
    bad_rule = cove("policy", cid, "notes_add", "maybe")
    assert bad_rule.returncode == 2
    assert cove("policy", "ffffffffffff").returncode == 7
    assert cove.json("policy", cid)["own"] == {"notes_add": "allow"}  # nothing else changed


async def test_a_warm_environment_takes_a_policy_change_in_at_its_next_turn(
    tmp_path: Path, notes_file: Path
) -> None:
    factory = scripted_factory(
        [
            reply(['notes_add("one")']),
            reply(answer="first"),
            reply(['notes_add("two")']),
            reply(answer="second"),
            reply(['notes_add("three")']),
            reply(answer="third"),
        ]
    )
    settings = settings_for(tmp_path)
    async with await Conversations.open(settings, llm_factory=factory) as service:
        cid = (await service.create()).id
        await _finish(service, cid, "one")  # nobody to ask: denied
        # Another process (cove policy) changes the conversation's policy.
        async with await Conversations.open(settings) as other:
            with pytest.raises(ConfigError, match="is not NAME=allow, NAME=ask or NAME=deny"):
                await other.set_policy(cid, "notes_add", "sometimes")
            await other.set_policy(cid, "write", "allow")
        await _finish(service, cid, "two")
        async with await Conversations.open(settings) as other:
            await other.set_policy(cid, "notes_add", "deny")  # the function's entry wins
        await _finish(service, cid, "three")
        decided = await service.approvals(cid)
    assert notes(notes_file) == ["two"]
    assert [(a.turn_position, a.approved, a.reason) for a in decided] == [
        (1, False, "nobody"),
        (2, True, "policy"),
        (3, False, "policy"),
    ]


async def _finish(convs: Conversations, cid: str, text: str) -> None:
    async for _ in convs.send(cid, text):
        pass
