"""``fork``, ``delete``, ``replay`` and unusable databases, in process."""

from __future__ import annotations

import asyncio
import sqlite3

from cove.persistence.store import Store
from tests.channels.cli.helpers import Cove
from tests.fakes.openai_server import FakeOpenAI
from tests.scripted import reply


def test_fork_delete_and_replay(cli: Cove, server: FakeOpenAI) -> None:
    server.add_replies(
        reply(["import random\nr = random.random()"], "{{r}}"), reply(["r2 = r * 2"], "{{r2}}")
    )
    assert cli("run", "roll").exit_code == 0
    [conv] = cli.json("list")
    replayed = cli("replay", conv["id"])
    assert replayed.exit_code == 0, replayed.stdout + replayed.stderr
    assert "every block and variable matched" in replayed.stdout
    forked = cli.json("fork", conv["id"], "--at", "1")
    assert forked["parent_id"] == conv["id"]
    assert cli("run", "-c", forked["id"], "double").exit_code == 0
    refused = cli("delete", forked["id"])  # no terminal to confirm on
    assert refused.exit_code == 2 and "--yes" in refused.stderr
    assert cli("delete", conv["id"], "--yes").exit_code == 1  # a fork depends on it
    assert cli("delete", forked["id"], "--yes").exit_code == 0
    assert cli("delete", conv["id"], "--yes").exit_code == 0
    assert cli.json("list") == []


def test_a_fork_at_turn_0_is_another_first_turn(cli: Cove, server: FakeOpenAI) -> None:
    server.add_replies(reply(["x = 1"], "{{x}}"), reply(["y = 2"], "{{y}}"))
    assert cli("run", "first try").exit_code == 0
    [conv] = cli.json("list")
    forked = cli.json("fork", conv["id"], "--at", "0")
    assert forked["parent_id"] == conv["id"] and forked["fork_turn"] == 0
    assert cli("run", "-c", forked["id"], "second try").exit_code == 0
    shown = cli.json("show", forked["id"])
    assert [t["request"] for t in shown["turns"]] == ["second try"]
    assert "x" not in {v["name"] for v in cli.json("vars", forked["id"])}
    assert cli("fork", conv["id"], "--at", "-1").exit_code == 2


def test_a_file_that_is_not_a_database_is_refused_and_left_alone(cli: Cove) -> None:
    cli.db.write_bytes(b"my thesis, not a database\n" * 100)
    result = cli("list")
    assert result.exit_code == 9
    assert "not a cove database" in result.stderr
    assert cli.db.read_bytes() == b"my thesis, not a database\n" * 100


def test_a_database_from_a_newer_cove_is_refused(cli: Cove) -> None:
    async def make() -> None:
        async with Store.open(cli.db):
            pass

    asyncio.run(make())
    with sqlite3.connect(cli.db) as db:
        db.execute("INSERT INTO schema_migrations (version, name, applied_at) VALUES (99, 'x', 0)")
    db.close()
    result = cli("list")
    assert result.exit_code == 9
    assert "99" in result.stderr and "upgrade cove" in result.stderr
