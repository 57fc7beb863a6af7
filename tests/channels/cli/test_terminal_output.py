"""On a terminal, ``cove`` draws tables, colours matches and shows progress; piped it does not
(the piped side is in test_reading.py and test_run.py)."""

from __future__ import annotations

import pytest

from tests.channels.cli.helpers import CoveProcess
from tests.channels.cli.terminal import on_terminal
from tests.fakes.openai_server import FakeOpenAI
from tests.scripted import reply

pytestmark = pytest.mark.slow  # cove processes on a pseudo-terminal


def test_on_a_terminal_run_shows_progress_on_stderr_and_list_draws_a_table(
    proc_cli: CoveProcess, server: FakeOpenAI
) -> None:
    server.add_replies(
        reply(["primes = [2, 3, 5]"]),
        reply(["total = sum(primes)"], "The sum is {{total}}."),
        reply(["n = len(primes)"], "{{n}}"),
    )
    code, terminal, stdout = on_terminal(proc_cli, "run", "add primes", stream="stderr")
    assert code == 0, terminal
    assert stdout == "The sum is 10.\n"  # the answer alone, on the pipe
    assert "iteration 1/10" in terminal and "iteration 2/10" in terminal
    assert "conversation " in terminal and "continue with:" in terminal

    code, quiet, answer = on_terminal(proc_cli, "run", "-q", "-c", "how many?", stream="stderr")
    assert code == 0 and answer == "3\n"
    assert "iteration" not in quiet and "continue with" not in quiet

    code, table, _ = on_terminal(proc_cli, "list")
    assert code == 0
    assert "┃" in table or "│" in table  # drawn, not tab-separated
    assert "\t" not in table


def test_on_a_terminal_search_colours_matches_instead_of_marking_them(
    proc_cli: CoveProcess, server: FakeOpenAI
) -> None:
    server.add_replies(reply(["fib = [1, 1, 2, 3]"], "fibonacci done"))
    assert proc_cli("run", "fibonacci numbers").returncode == 0
    code, screen, _ = on_terminal(proc_cli, "search", "fibonacci")
    assert code == 0
    assert "«" not in screen
    assert "\x1b[" in screen and "fibonacci" in screen
