"""``cove`` on a PostgreSQL URL end to end: run, then list, show, vars, search, fork, replay and
migrate on the same URL, as real processes; the URL's password never shows."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.channels.cli.helpers import CoveProcess
from tests.fakes.openai_server import FakeOpenAI
from tests.postgres_server import PostgresServer
from tests.scripted import reply

SECRET = "pg-s3cret-DO-NOT-LEAK"


@pytest.fixture
def url(postgres_server: PostgresServer) -> str:
    """A new database; the password is never checked (the server trusts its socket)."""
    return postgres_server.database().replace("cove@", f"cove:{SECRET}@")


def test_every_command_works_on_a_postgresql_url(
    proc_cli: CoveProcess, server: FakeOpenAI, url: str, tmp_path: Path
) -> None:
    outputs: list[str] = []

    def cove(*args: str) -> str:
        result = proc_cli("--db", url, *args)
        outputs.append(result.stdout + result.stderr)
        assert result.returncode == 0, result.stderr
        return result.stdout

    server.add_replies(
        reply(["side = 12", "area = side * side"], "Area {{area}}", title="Squares"),
        reply(["cube = side ** 3"], "Cube {{cube}}"),
    )
    assert cove("run", "area of a 12 square").strip() == "Area 144"
    [listed] = proc_cli.json("--db", url, "list")
    cid = listed["id"]
    assert cove("run", "-c", cid, "and a cube").strip() == "Cube 1728"
    shown = proc_cli.json("--db", url, "show", cid)
    assert [t["answer"] for t in shown["turns"]] == ["Area 144", "Cube 1728"]
    assert "cube" in cove("vars", cid) and "144" in cove("vars", cid, "area")
    assert cid[:12] in cove("search", "cube")
    fork = proc_cli.json("--db", url, "fork", cid, "--at", "1")
    assert fork["id"] != cid
    cove("replay", cid)

    moved = tmp_path / "moved.db"
    assert "moved 2 conversations" in cove("migrate", "--to", str(moved))
    back = proc_cli("--db", str(moved), "show", cid, "--json")
    assert back.returncode == 0 and "Cube 1728" in back.stdout
    assert all(SECRET not in text for text in outputs)
