"""Escape sequences in what the model or the sandbox wrote are shown, never obeyed, by everything
``cove`` writes to a terminal (``run``, ``chat``, ``watch``, ``export``, ``list``, ``search``), in
an exported Markdown file and in JSON; ``run`` into a pipe stays byte-exact.

Through a real pseudo-terminal: the bytes checked are the bytes a terminal would have acted on.
"""

from __future__ import annotations

import json

import pytest

from tests.channels.cli.helpers import CoveProcess
from tests.channels.cli.terminal import on_terminal
from tests.fakes.openai_server import FakeOpenAI
from tests.scripted import reply

pytestmark = pytest.mark.slow  # cove processes on a pseudo-terminal

# A clipboard write (OSC 52), a window title (OSC 0), clear screen (CSI 2J), a C1 CSI.
HOSTILE = "\x1b]52;c;ZWNobyBvd25lZA==\x07\x1b]0;owned\x07\x1b[2J\x9b31m"
RAW = ("\x1b]52", "\x1b]0;", "\x1b[2J", "\x9b", "\x07")
SHOWN = "␛]52;c;ZWNobyBvd25lZA==␇"  # how the clipboard write reads once made visible
CODE = "x = " + repr(HOSTILE) + "\nprint(x)\nx"


def obeyable(text: str) -> list[str]:
    """The raw control sequences in ``text`` a terminal would act on."""
    return [code for code in RAW if code in text]


def hostile_turn(answer: str) -> list[str]:
    """One turn: hostile code, output, value and title, then an answer naming ``x``."""
    return [
        reply([CODE], thinking=f"thinking {HOSTILE}", title=f"title {HOSTILE}"),
        reply(answer=answer, thinking=f"done {HOSTILE}"),
    ]


def test_run_on_a_terminal_shows_escapes_and_into_a_pipe_stays_byte_exact(
    proc_cli: CoveProcess, server: FakeOpenAI
) -> None:
    server.add_replies(*hostile_turn("value: {{x}}"), reply(answer="again {{x}}"))
    code, terminal, stderr = on_terminal(proc_cli, "run", "be hostile")
    assert code == 0, stderr
    assert obeyable(terminal) == [] and SHOWN in terminal and "value: " in terminal

    piped = proc_cli("run", "-c", "once more")
    assert piped.returncode == 0 and piped.stdout == f"again {HOSTILE}\n"  # byte-exact


def test_run_json_and_events_on_a_terminal_carry_no_raw_controls(
    proc_cli: CoveProcess, server: FakeOpenAI
) -> None:
    server.add_replies(*hostile_turn("value: {{x}}"), *hostile_turn("{{x}}"))
    code, terminal, _ = on_terminal(proc_cli, "run", "--json", "be hostile")
    assert code == 0 and obeyable(terminal) == []
    assert json.loads(terminal.replace("\r\n", "\n"))["answer"] == f"value: {HOSTILE}"
    code, terminal, _ = on_terminal(proc_cli, "run", "--events", "-c", "again")
    assert code == 0 and obeyable(terminal) == []
    events = [json.loads(line) for line in terminal.replace("\r\n", "\n").splitlines()]
    assert events[-1]["answer"] == HOSTILE


def test_export_list_search_watch_and_chat_show_escapes_on_a_terminal(
    proc_cli: CoveProcess, server: FakeOpenAI
) -> None:
    server.add_replies(*hostile_turn("value: {{x}}"))
    assert proc_cli("run", "-q", "be hostile").returncode == 0
    [conv] = proc_cli.json("list")
    cid = conv["id"]
    for args in (
        ("export", cid),
        ("export", cid, "--format", "json"),
        ("show", cid, "--format", "md"),
        ("list",),
        ("search", "owned"),
        ("watch", cid, "--after", "0", "--once"),
    ):
        code, terminal, stderr = on_terminal(proc_cli, *args)
        assert code == 0, (args, stderr)
        assert obeyable(terminal) == [], args
        assert "owned" in terminal, args

    server.add_replies(*hostile_turn("chat: {{x}}"))
    code, terminal, stderr = on_terminal(proc_cli, "chat", cid, stdin="be hostile again\n")
    assert code == 0, stderr
    assert obeyable(terminal) == [] and "chat: " in terminal and SHOWN in terminal


def test_an_exported_file_has_its_escapes_made_visible(
    proc_cli: CoveProcess, server: FakeOpenAI
) -> None:
    server.add_replies(*hostile_turn("value: {{x}}"))
    assert proc_cli("run", "-q", "be hostile").returncode == 0
    [conv] = proc_cli.json("list")
    markdown = proc_cli("export", conv["id"]).stdout  # into a file, as `> notes.md`
    assert obeyable(markdown) == [] and SHOWN in markdown
    assert "thinking ␛]52" in markdown and "value: ␛]52" in markdown and "title ␛]52" in markdown
    exported = proc_cli("export", conv["id"], "--format", "json").stdout
    assert obeyable(exported) == []  # escaped in the JSON text, the same string once parsed
    [turn] = json.loads(exported)["turns"]
    assert turn["answer"] == f"value: {HOSTILE}"
