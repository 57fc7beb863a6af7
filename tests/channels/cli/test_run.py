"""``cove run``: the answer on stdout, the conversation id and how to continue on stderr."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.channels.cli.helpers import Cove
from tests.fakes.openai_server import FakeOpenAI, Fault
from tests.scripted import reply


def test_run_prints_the_answer_on_stdout_and_the_id_and_how_to_continue_on_stderr(
    cli: Cove, server: FakeOpenAI
) -> None:
    server.add_replies(
        reply(["total = sum([1, 2, 3])"], "The total is {{total}}.", title="Sums"),
        reply(["total = total * 10"], "Now {{total}}."),
    )
    result = cli("run", "add 1, 2 and 3")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == "The total is 6.\n"
    [conv] = cli.json("list")
    assert f"conversation {conv['id']}" in result.stderr
    assert f'run -c {conv["id"][:12]} "…"' in result.stderr
    quiet = cli("run", "-q", "-c", conv["id"], "times ten")
    assert quiet.stdout == "Now 60.\n" and quiet.stderr == ""


@pytest.mark.slow
def test_dash_c_continues_the_most_recent_conversation_or_a_given_one(
    cli: Cove, server: FakeOpenAI
) -> None:
    server.add_replies(
        reply(["a = 1"], "a={{a}}"),
        reply(["b = 10"], "b={{b}}"),
        reply(["b = b + 1"], "b is {{b}}"),
        reply(["a = a + 1"], "a is {{a}}"),
        reply(["a = a + 1"], "a is {{a}}"),
        reply(["a = a + 1"], "a is {{a}}"),
    )
    assert cli("run", "start a").exit_code == 0
    assert cli("run", "start b").exit_code == 0
    newest, oldest = cli.json("list")
    latest = cli("run", "-c", "add one to b")  # -c TEXT alone: TEXT is the question
    assert latest.stdout == "b is 11\n", latest.stderr
    by_prefix = cli("run", "-c", oldest["id"][:8], "add one to a")
    assert by_prefix.stdout == "a is 2\n", by_prefix.stderr
    by_cid = cli("run", "--cid", oldest["id"], "add one to a")
    assert by_cid.stdout == "a is 3\n", by_cid.stderr
    trailing = cli("run", "add one to a", "-c")  # the most recent is a's conversation now
    assert trailing.stdout == "a is 4\n", trailing.stderr
    assert [c["turn_count"] for c in cli.json("list")] == [4, 2]
    assert newest["id"] != oldest["id"]


def test_dash_c_with_no_conversation_yet_is_a_usage_error(cli: Cove) -> None:
    result = cli("run", "-c", "hello")
    assert result.exit_code == 2
    assert "no conversation to continue" in result.stderr


def test_piped_stdin_is_attached_to_the_request(cli: Cove, server: FakeOpenAI) -> None:
    server.add_replies(reply(["n = len(read_file('stdin.txt').splitlines())"], "{{n}} lines"))
    result = cli("run", "how many lines?", stdin="alpha\nbeta\ngamma\n")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.strip() == "3 lines"
    said = "\n".join(m["content"] for m in server.requests[0]["messages"])
    assert "how many lines?" in said and "stdin.txt (17 bytes)" in said
    [conv] = cli.json("list")
    turn = cli.json("show", conv["id"])["turns"][0]
    assert turn["request"] == "how many lines?"
    assert turn["attachments"] == [["stdin.txt", 17]]


def test_run_dash_reads_the_whole_request_from_stdin(cli: Cove, server: FakeOpenAI) -> None:
    server.add_replies(reply(["x = 7"], "seven"))
    result = cli("run", "-", stdin="a request\nover two lines\n")
    assert result.exit_code == 0, result.stderr
    [conv] = cli.json("list")
    turn = cli.json("show", conv["id"])["turns"][0]
    assert turn["request"] == "a request\nover two lines\n"
    assert turn["attachments"] == []
    empty = cli("run", "-", stdin="  \n")
    assert empty.exit_code == 2 and "the request is empty" in empty.stderr


@pytest.mark.slow
def test_run_json_numbers_the_turn_by_position_and_events_stream_json_lines(
    cli: Cove, server: FakeOpenAI
) -> None:
    server.add_replies(
        reply(["x = 2 ** 10"], "{{x}}"), reply(["y = 1"], "one"), reply(["z = 1"], "z")
    )
    result = cli.json("run", "power")
    assert result["status"] == "done" and result["answer"] == "1024"
    assert result["turn"] == 1 and "turn_id" not in result
    assert result["conversation_id"] and result["iterations"] == 1
    again = cli.json("run", "-c", result["conversation_id"], "again")
    assert again["turn"] == 2
    events = cli("run", "--events", "new one")
    streamed = [json.loads(line) for line in events.stdout.splitlines()]
    kinds = [event["type"] for event in streamed]
    assert kinds[0] == "turn_started" and kinds[-1] == "turn_finished"
    assert all(e["turn"] == 1 and "turn_id" not in e for e in streamed if "turn" in e)
    assert {e["iteration"] for e in streamed if "iteration" in e} == {1}
    assert {"iteration_started", "model_reply", "block_finished", "vars_changed"} <= set(kinds)


def test_progress_is_not_written_when_stderr_is_not_a_terminal(
    cli: Cove, server: FakeOpenAI
) -> None:
    server.add_replies(reply(["x = 1"]), reply(["y = 2"], "done"))
    result = cli("run", "two iterations")
    assert result.exit_code == 0
    assert "iteration" not in result.stderr
    [conv] = cli.json("list")
    assert (
        result.stderr.splitlines()[1:]
        == [  # after "created a new database": nothing else
            f'conversation {conv["id"]} · continue with: cove run -c {conv["id"][:12]} "…"'
        ]
    )


def test_exit_codes_of_run(cli: Cove, server: FakeOpenAI) -> None:
    server.respond_with(reply(["n = 1"]))
    ran_out = cli("run", "--max-iterations", "2", "loop forever")
    assert ran_out.exit_code == 3
    assert "max_iterations" in ran_out.stderr
    assert cli("run").exit_code == 2
    assert cli("run", "  ").exit_code == 2
    assert cli("run", "--max-iterations", "0", "x").exit_code == 2
    assert cli("run", "--attach", "/nonexistent/file", "x").exit_code == 2
    assert cli.json("list") != []  # the run that ran out of iterations is recorded


def test_an_unreachable_endpoint_fails_with_1_and_names_it(tmp_path: Path) -> None:
    cli = Cove(tmp_path, None)
    cli.env |= {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "OPENAI_API_KEY": "x"}
    cli.env |= {"COVE_MAX_RETRIES": "0", "COVE_REQUEST_TIMEOUT_S": "2"}
    failed = cli("run", "hi")
    assert failed.exit_code == 1
    assert "127.0.0.1:9" in failed.stderr


def test_run_without_an_endpoint_says_how_to_configure_one(tmp_path: Path) -> None:
    cli = Cove(tmp_path, None)
    result = cli("run", "hello")
    assert result.exit_code == 2
    assert "OPENAI_API_KEY" in result.stderr and "cove demo" in result.stderr
    assert cli.json("list") == []  # nothing half-made was left behind


def test_attached_files_are_announced_recorded_and_replayed(
    tmp_path: Path, cli: Cove, server: FakeOpenAI
) -> None:
    sales = tmp_path / "sales.csv"
    sales.write_text("month,units\nJan,3\nFeb,9\n")
    size = len(sales.read_bytes())
    server.add_replies(
        reply(["rows = read_file('sales.csv').splitlines()[1:]"]),
        reply(["best = max(rows, key=lambda r: int(r.split(',')[1]))"], "{{best}}"),
    )
    result = cli("run", "--attach", str(sales), "Which month sold most?")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.strip() == "Feb,9"
    for request in server.requests:
        said = "\n".join(m["content"] for m in request["messages"])
        assert f"- sales.csv ({size:,} bytes)" in said
    [conv] = cli.json("list")
    turn = cli.json("show", conv["id"])["turns"][0]
    assert turn["attachments"] == [["sales.csv", size]]
    replayed = cli("replay", conv["id"])
    assert replayed.exit_code == 0, replayed.stdout + replayed.stderr


def test_model_options_are_sent_and_recorded_with_the_turn(cli: Cove, server: FakeOpenAI) -> None:
    server.add_replies(reply(["x = 1"], "ok"))
    result = cli("run", "-o", "temperature=0.2", "-o", "max_tokens=300", "careful")
    assert result.exit_code == 0, result.stderr
    [request] = server.requests
    assert request["temperature"] == 0.2 and request["max_tokens"] == 300
    [conv] = cli.json("list")
    turn = cli.json("show", conv["id"])["turns"][0]
    assert turn["model_options"] == {"temperature": 0.2, "max_tokens": 300}


def test_bad_model_options_are_usage_errors_before_anything_runs(
    cli: Cove, server: FakeOpenAI
) -> None:
    for given, said in (
        ("temp=1", "unknown model option 'temp'"),
        ("temperature=hot", "temperature expects a number"),
        ("max_tokens=2.5", "max_tokens expects an integer"),
        ("temperature", "is not KEY=VALUE"),
    ):
        result = cli("run", "-o", given, "hello")
        assert result.exit_code == 2
        assert said in result.stderr
    assert server.requests == []
    assert not cli.db.exists()


@pytest.mark.slow
def test_every_ending_names_its_real_reason_on_stdout_and_stderr(
    cli: Cove, server: FakeOpenAI
) -> None:
    """What a script captures says why the turn ended: the iteration budget only when that is
    what ran out; unusable replies (the error budget) with the last problem."""
    server.respond_with("this is not a reply cove can use")
    unusable = cli("run", "--max-iterations", "25", "never usable")
    assert unusable.exit_code == 4, unusable.stderr
    assert "iteration budget" not in unusable.stdout
    assert "could not be used" in unusable.stdout and "error budget" in unusable.stdout
    assert "not a JSON object" in unusable.stdout or "no JSON" in unusable.stdout
    assert "error_budget" in unusable.stderr

    server.respond_with(reply(["1 / 0"], thinking="dividing"))
    failing = cli("run", "--max-iterations", "25", "always failing code")
    assert failing.exit_code == 4, failing.stderr
    assert "iteration budget" not in failing.stdout
    assert "failed iterations in a row" in failing.stdout and "error budget" in failing.stdout

    server.respond_with(reply(["n = 1"], thinking="still counting"))
    ran_out = cli("run", "--max-iterations", "2", "loop forever")
    assert ran_out.exit_code == 3, ran_out.stderr
    assert "iteration budget (2 iterations)" in ran_out.stdout
    assert "still counting" in ran_out.stdout


def test_a_turn_against_a_dead_endpoint_or_an_unknown_model_is_recorded_failed(
    tmp_path: Path, cli: Cove, server: FakeOpenAI
) -> None:
    """The conversation stays (the request is kept), recognisable by its failed turn."""
    server.listed = ["fake-model", "gpt-nowhere"]  # listed, yet refused when asked for
    server.add_faults(Fault.error(404, "The model `gpt-nowhere` does not exist"))
    unknown = cli("run", "--model", "gpt-nowhere", "hello")
    assert unknown.exit_code == 1
    dead = Cove(tmp_path, None)
    dead.env |= {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "OPENAI_API_KEY": "x"}
    dead.env |= {"COVE_MAX_RETRIES": "0", "COVE_REQUEST_TIMEOUT_S": "2"}
    assert dead("run", "hello again").exit_code == 1
    shown = [cli.json("show", c["id"])["turns"] for c in cli.json("list")]
    assert [[(t["request"], t["status"]) for t in turns] for turns in shown] == [
        [("hello again", "failed")],
        [("hello", "failed")],
    ]
    errors = [turns[0]["error"] for turns in shown]
    assert "127.0.0.1:9" in errors[0] and "gpt-nowhere" in errors[1]
