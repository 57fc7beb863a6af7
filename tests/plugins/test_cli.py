"""The command line with the example plugin installed: ``cove extensions``, ``cove run``'s
approval flags, ``cove chat`` asking on its terminal, ``cove show`` listing the decisions.

Each ``cove`` is a real process finding the plugin through ``PYTHONPATH``, as an installed
package is found.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest
from click.testing import CliRunner

from cove.channels.cli.exits import EXIT_FAILED
from cove.channels.cli.plugin_commands import GROUP, load_command
from tests.channels.cli.helpers import CoveProcess
from tests.fakes.openai_server import FakeOpenAI
from tests.plugins.test_example_plugin import notes
from tests.scripted import reply

pytestmark = pytest.mark.slow  # cove processes with sandbox workers


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


@pytest.fixture
def cove(tmp_path: Path, server: FakeOpenAI, notes_site: Path) -> CoveProcess:
    """``cove`` as a process with the example plugin installed and its notebook in tmp_path."""
    process = CoveProcess(tmp_path, server)
    process.env |= {"PYTHONPATH": str(notes_site), "NOTEBOOK_FILE": str(tmp_path / "n.json")}
    return process


def test_cove_extensions_lists_the_plugin_its_source_effects_and_policy(cove: CoveProcess) -> None:
    listed = cove.json("extensions")
    by_name = {e["name"]: e for e in listed["extensions"]}
    assert list(by_name) == ["core", "files", "llm", "notes_add", "notes_search"]
    assert by_name["notes_add"]["source"] == "cove-notes 0.1.0: cove_notes:notes_add"
    assert by_name["notes_add"]["functions"] == [
        {"name": "notes_add", "effect": "write", "policy": "ask"}
    ]
    assert by_name["notes_search"]["functions"][0]["policy"] == "allow"
    assert listed["problems"] == []
    cove.env["COVE_EXTENSION_POLICY"] = "write=deny"
    text = cove("extensions")
    assert text.returncode == 0, text.stderr
    assert "notes_add  effect write · deny" in text.stdout
    assert "write_file  effect write · deny" in text.stdout  # the policy covers built-ins too


def test_run_with_reject_all_refuses_and_the_model_is_told_why(
    cove: CoveProcess, server: FakeOpenAI, tmp_path: Path
) -> None:
    server.add_replies(
        reply(['notes_add("buy milk")'], "added"),
        reply(answer="I was not allowed to add the note."),
    )
    result = cove("run", "--reject-all", "note: buy milk")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "I was not allowed to add the note.\n"
    told = server.requests[-1]["messages"][-1]["content"]
    assert "PermissionError: notes_add() was not run: its effect is 'write' and approval " in told
    assert "was refused for the whole run (--reject-all)" in told
    assert notes(tmp_path / "n.json") == []
    shown = cove("show", cove.json("list")[0]["id"])
    assert "approval: notes_add('buy milk') [write] denied for the whole run" in shown.stdout


def test_run_approves_all_or_off_a_terminal_denies_and_show_lists_each_decision(
    cove: CoveProcess, server: FakeOpenAI, tmp_path: Path
) -> None:
    server.add_replies(
        reply(['notes_add("one")'], "added"),
        reply(['notes_add("two")'], "added"),
        reply(answer="no one could approve it"),
    )
    assert cove("run", "--approve-all", "note: one").returncode == 0
    quiet = cove("run", "-c", "note: two")  # stdin is not a terminal: nobody to ask
    assert quiet.stdout == "no one could approve it\n", quiet.stderr
    assert notes(tmp_path / "n.json") == ["one"]
    [conversation] = cove.json("list")
    shown = cove.json("show", conversation["id"])
    decisions = [(a["turn"], a["approved"], a["reason"]) for a in shown["approvals"]]
    assert decisions == [(1, True, "flag"), (2, False, "nobody")]
    assert shown["approvals"][1]["why"] == "nobody to ask"
    assert [(a["iteration"], a["block"], a["call"]) for a in shown["approvals"]] == [(1, 1, 1)] * 2
    exported = json.loads(cove("export", conversation["id"], "--format", "json").stdout)
    assert exported["approvals"] == shown["approvals"]
    listed = cove("notes")  # the plugin's own command (group cove.commands)
    assert (listed.returncode, listed.stdout) == (0, "one\n"), listed.stderr
    assert cove("notes", "nothing like it").returncode == 1
    assert "notes" in cove("--help").stdout
    both = cove("run", "--approve-all", "--reject-all", "x")
    assert both.returncode == 2
    assert "--approve-all and --reject-all exclude each other" in both.stderr


class Terminal:
    """``cove ARGS`` with its stdin, stdout and stderr on one pseudo-terminal."""

    def __init__(self, cove: CoveProcess, *args: str) -> None:
        self.main, child = os.openpty()
        self.seen = b""
        self.changed = threading.Condition()
        env = dict(cove.env, TERM="xterm-256color", COLUMNS="200")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "cove", *args],
            env=env,
            stdin=child,
            stdout=child,
            stderr=child,
            start_new_session=True,
        )
        os.close(child)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        while True:
            try:
                data = os.read(self.main, 65536)
            except OSError:
                data = b""
            with self.changed:
                self.seen += data
                self.changed.notify_all()
            if not data:
                return

    def wait_for(self, text: str, after: int = 0, seconds: float = 60.0) -> int:
        """Wait until ``text`` shows after offset ``after``; the offset just past it."""
        deadline = time.monotonic() + seconds
        needle = text.encode()
        with self.changed:
            while (found := self.seen.find(needle, after)) < 0:
                left = deadline - time.monotonic()
                if left <= 0 or (self.proc.poll() is not None and not self.changed.wait(0.5)):
                    raise AssertionError(f"{text!r} never showed; the terminal: {self.seen!r}")
                self.changed.wait(left)
            return found + len(needle)

    def type(self, text: str) -> None:
        os.write(self.main, text.encode())

    def close(self) -> int:
        code = self.proc.wait(timeout=60)
        os.close(self.main)
        return code


def test_chat_asks_on_its_terminal_and_an_answer_to_remember_is_not_asked_again(
    cove: CoveProcess, server: FakeOpenAI, tmp_path: Path
) -> None:
    server.add_replies(
        reply(['notes_add("one")'], "added one"),
        reply(['notes_add("two")'], "added two"),
    )
    term = Terminal(cove, "chat")
    try:
        at = term.wait_for("you › ")
        term.type("note one\n")
        at = term.wait_for("allow? [y]es", at)
        assert b"approval needed" in term.seen
        assert b"notes_add('one') [notes_add: write]" in term.seen
        term.type("a\n")
        at = term.wait_for("added one", at)
        at = term.wait_for("you › ", at)
        term.type("note two\n")
        at = term.wait_for("added two", at)
        term.wait_for("you › ", at)
        assert term.seen.count(b"approval needed") == 1  # the second call was not asked about
        term.type("\x04")  # Ctrl-D leaves
        assert term.close() == 0
    finally:
        if term.proc.poll() is None:
            term.proc.kill()
    assert notes(tmp_path / "n.json") == ["one", "two"]
    [conversation] = cove.json("list")
    shown = cove.json("show", conversation["id"])
    decisions = [(a["approved"], a["reason"], a["remember"]) for a in shown["approvals"]]
    assert decisions == [(True, "person", True), (True, "remembered", False)]
    assert json.loads((tmp_path / "n.json").read_text())[0]["text"] == "one"


def test_a_command_that_cannot_be_loaded_says_why_when_run() -> None:
    missing = EntryPoint(name="ghost", value="no_such_module:cmd", group=GROUP)
    not_a_command = EntryPoint(name="odd", value="json:dumps", group=GROUP)
    for point, why in [
        (missing, "it cannot be imported: ModuleNotFoundError: No module named 'no_such_module'"),
        (not_a_command, "it is a function, not a click command"),
    ]:
        result = CliRunner().invoke(load_command(point), [], standalone_mode=False)
        assert result.return_value == EXIT_FAILED  # the cove group exits with it
        assert f"cove: the command {point.name!r} from {point.value} cannot be loaded: {why}" in (
            result.stderr
        )
