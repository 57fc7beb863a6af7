"""``cove chat`` read from stdin, in process: requests, chat commands, multi-line input, recap."""

from __future__ import annotations

from tests.channels.cli.helpers import Cove
from tests.fakes.openai_server import FakeOpenAI
from tests.scripted import reply


def test_chat_reads_lines_until_end_of_input(cli: Cove, server: FakeOpenAI) -> None:
    server.add_replies(reply(["x = 5"], "x is {{x}}"), reply(["x * 2"], "doubled {{x}}"))
    result = cli("chat", stdin="set x\n\nuse x\n")
    assert result.exit_code == 0, result.stderr
    assert "x is 5" in result.stdout and "doubled 5" in result.stdout
    [conv] = cli.json("list")
    assert conv["turn_count"] == 2
    assert f"conversation {conv['id']} saved" in result.stdout


def test_chat_commands(cli: Cove, server: FakeOpenAI) -> None:
    server.listed = ["fake-model", "other-model"]
    server.add_replies(
        reply(["x = 5", "y = [1, 2]"], "set"),
        reply(["x = x + 1"], "x is {{x}}"),
        reply(["z = x * 100"], "z is {{z}}"),
    )
    script = "\n".join(
        [
            "/help",
            "/vars",  # nothing yet
            "set x and y",
            "bump x",
            "/vars",
            "/var x",
            "/show",
            "/model other-model",
            "/model",
            "/model fake-model",
            "/fork 1",
            "/vars",
            "scale x",
            "/cancel",
            "/nonsense",
            "/exit",
            "never sent",
        ]
    )
    result = cli("chat", stdin=script + "\n")
    assert result.exit_code == 0, result.stderr
    out = result.stdout
    assert "/fork N" in out and "!multi" in out  # /help
    assert "nothing yet: the conversation starts with your first request" in out
    assert "x is 6" in out
    vars_tables = out.split("name\tversion\ttype\tturn\tpreview\n")
    assert len(vars_tables) == 3  # /vars twice with variables (piped: tab-separated)
    assert "x\t2\tint\t2\t6" in vars_tables[1]
    assert "version\tkind\ttype\tturn\tpreview\n1\tvalue\tint\t1\t5\n2\tvalue\tint\t2\t6" in out
    assert "── block 2 of 2" in out  # /show
    assert "model other-model for the next turns" in out and "model other-model;" in out
    assert "the endpoint offers: fake-model, other-model" in out
    assert "now in fork" in out
    assert "x\t1\tint\t1\t5" in vars_tables[2]  # the fork starts from turn 1: x is 5
    assert "z is 500" in out
    assert "nothing to cancel" in out and "unknown command /nonsense" in out
    assert len(server.requests) == 3  # "never sent" was after /exit
    models = [r["model"] for r in server.requests]
    assert models == ["fake-model", "fake-model", "fake-model"]
    original, fork = cli.json("list")[::-1]
    assert original["turn_count"] == 2 and fork["parent_id"] == original["id"]


def test_fork_0_continues_in_a_branch_before_the_first_turn(cli: Cove, server: FakeOpenAI) -> None:
    server.add_replies(reply(["x = 5"], "x is {{x}}"), reply(["y = 7"], "y is {{y}}"))
    result = cli("chat", stdin="set x\n/fork 0\n/vars\nset y instead\n/fork -1\n")
    assert result.exit_code == 0, result.stderr
    assert "now in fork" in result.stdout and "y is 7" in result.stdout
    assert "no variables yet" in result.stdout  # none of the original's
    assert "usage: /fork N" in result.stdout  # not a turn number
    original, fork = cli.json("list")[::-1]
    assert (fork["parent_id"], fork["fork_turn"]) == (original["id"], 0)
    assert [t["request"] for t in cli.json("show", fork["id"])["turns"]] == ["set y instead"]


def test_model_switch_is_used_for_the_next_turn(cli: Cove, server: FakeOpenAI) -> None:
    server.listed = ["fake-model", "other-model"]
    server.add_replies(reply(["a = 1"], "one"), reply([], "two"))
    result = cli("chat", stdin="/model nope\n/model other-model\nhello\nquit\n")
    assert result.exit_code == 0, result.stderr
    assert "the endpoint does not offer the model 'nope'" in result.stdout
    [conv] = cli.json("list")
    # The conversation remembers its model: continuing it (no -m) keeps asking for it.
    again = cli("chat", conv["id"][:8], stdin="more\nquit\n")
    assert again.exit_code == 0, again.stderr
    assert "model other-model" in again.stdout
    assert [r["model"] for r in server.requests] == ["other-model", "other-model"]


def test_instructions_in_chat_are_shown_set_cleared_and_refused_over_the_limit(
    cli: Cove, server: FakeOpenAI
) -> None:
    server.add_replies(reply([], "one"), reply([], "two"))
    long = "x" * 4001
    script = [
        "/instructions",
        "/instructions Speak like a pirate.",
        "/instructions",
        "hello",
        f"/instructions {long}",
        "/instructions clear",
        "again",
        "quit",
    ]
    result = cli("chat", stdin="\n".join(script) + "\n")
    assert result.exit_code == 0, result.stderr
    out = result.stdout
    assert "no instructions; /instructions TEXT sets them" in out
    assert "instructions: Speak like a pirate." in out
    assert "the instructions are 4,001 characters long" in out
    assert "instructions cleared" in out
    first, second = (r["messages"][0]["content"] for r in server.requests)
    assert "Speak like a pirate." in first and "Speak like a pirate." not in second


def test_multi_line_input_and_dropping_it(cli: Cove, server: FakeOpenAI) -> None:
    server.add_replies(reply(["n = 3"], "three lines"))
    script = "!multi\nfirst line\n/cancel\n!multi\nline one\n\nline three\n!end\nexit\n"
    result = cli("chat", stdin=script)
    assert result.exit_code == 0, result.stderr
    assert "dropped" in result.stdout
    [conv] = cli.json("list")
    [turn] = cli.json("show", conv["id"])["turns"]
    assert turn["request"] == "line one\n\nline three"


def test_resuming_a_chat_prints_a_recap_of_the_last_turns(cli: Cove, server: FakeOpenAI) -> None:
    server.add_replies(*(reply([f"v{i} = {i}"], f"answer {i}") for i in range(1, 5)))
    first = cli("chat", stdin="request 1\nrequest 2\nrequest 3\nrequest 4\n")
    assert first.exit_code == 0, first.stderr
    [conv] = cli.json("list")
    resumed = cli("chat", conv["id"][:8], stdin="")
    assert resumed.exit_code == 0, resumed.stderr
    out = resumed.stdout
    assert f"conversation {conv['id']}" in out
    assert "the last 3 turn(s) of 4" in out
    assert "turn 1 · you" not in out
    for i in (2, 3, 4):
        assert f"turn {i} · you: request {i}" in out and f"cove: answer {i}" in out


def test_a_chat_left_at_once_creates_nothing(cli: Cove) -> None:
    for script in ("", "\n   \n/quit\n", "exit\n"):
        result = cli("chat", stdin=script)
        assert result.exit_code == 0, result.stderr
        assert "saved" not in result.stdout
    assert cli.json("list") == []


def test_chat_checks_the_model_exists_before_the_first_prompt(
    cli: Cove, server: FakeOpenAI
) -> None:
    """What ``make run`` starts: a model the endpoint does not offer is named at once, with the
    setting to change, instead of failing on the first message."""
    cli.env["COVE_MODEL"] = "gpt-missing"
    result = cli("chat", stdin="hello\n")
    assert result.exit_code == 2, result.stdout + result.stderr
    assert "gpt-missing" in result.stderr and "fake-model" in result.stderr
    assert "COVE_MODEL" in result.stderr and "--model" in result.stderr
    assert "you ›" not in result.stdout  # no prompt was offered
    assert server.requests == [] and cli.json("list") == []
