"""Reading commands: ``list``, ``show``, ``vars``, ``search``, ``export``; piped output is plain
text (tables tab-separated), ``--json`` numbers everything by position from 1."""

from __future__ import annotations

import asyncio
import json

import pytest

from cove.config import Settings
from cove.conversation import Conversations
from tests.channels.cli.helpers import Cove
from tests.fakes.openai_server import FakeOpenAI
from tests.scripted import reply


@pytest.fixture
def squares(cli: Cove, server: FakeOpenAI) -> str:
    """A conversation of two turns; the first has two iterations, the second two blocks."""
    server.add_replies(
        reply(["def square(v):\n    return v * v"]),
        reply(["area = square(12)"], "Area {{area}}", title="Squares"),
        reply(["side = 3", "cube = side ** 3"], "Cube [1] {{cube}}"),
    )
    assert cli("run", "area of a 12 square").exit_code == 0
    [conv] = cli.json("list")
    assert cli("run", "-c", conv["id"], "and a cube").exit_code == 0
    return str(conv["id"])


def test_list_piped_is_tab_separated_with_a_header(cli: Cove, squares: str) -> None:
    listed = cli("list")
    header, row = listed.stdout.splitlines()
    headers = ["id", "title", "status", "channel", "turns", "updated", "forked from"]
    assert header.split("\t") == headers
    cells = row.split("\t")
    assert cells[:5] == [squares[:12], "Squares", "done", "cli", "2"]
    assert "\x1b[" not in listed.stdout and "┃" not in listed.stdout and "│" not in listed.stdout


def test_show_separates_consecutive_blocks_and_numbers_iterations_from_1(
    cli: Cove, squares: str
) -> None:
    shown = cli("show", squares[:6]).stdout
    assert "def square" in shown and "Area 144" in shown and "area v1" in shown
    assert "iteration 1" in shown and "iteration 2" in shown and "iteration 0" not in shown
    second_turn = shown.split("turn 2")[1]
    assert "── block 1 of 2" in second_turn and "── block 2 of 2" in second_turn
    assert second_turn.index("side = 3") < second_turn.index("── block 2 of 2")
    assert second_turn.index("── block 2 of 2") < second_turn.index("cube = side ** 3")
    assert "\x1b[" not in shown
    exact = cli("show", squares, "--prompts").stdout
    assert "ONE JSON object" in exact and "[iteration 1/" in exact


def test_show_lists_the_variables_an_iteration_wrote_under_that_iteration(
    cli: Cove, squares: str
) -> None:
    first_turn = cli("show", squares).stdout.split("turn 2")[0]
    one, two = first_turn.split("iteration 2")
    assert "variables written: square v1 (function)" in one  # iteration 1's block wrote it
    assert "square v1" not in two
    assert "variables written: area v1 (int)" in two


def test_show_format_md_is_the_markdown_export(cli: Cove, squares: str) -> None:
    markdown = cli("show", squares, "--format", "md").stdout
    assert markdown == cli("export", squares).stdout
    assert markdown.startswith("# Squares")
    assert "Block 1 of 2:" in markdown and "Block 2 of 2:" in markdown


def test_json_numbers_turns_iterations_and_blocks_by_position_from_1(
    cli: Cove, squares: str
) -> None:
    transcript = cli.json("show", squares)
    turns = transcript["turns"]
    assert [t["position"] for t in turns] == [1, 2]
    assert [it["position"] for it in turns[0]["iterations"]] == [1, 2]
    assert [b["position"] for b in turns[1]["iterations"][0]["blocks"]] == [1, 2]
    for turn in turns:
        assert "id" not in turn and "conversation_id" in turn
        for it in turn["iterations"]:
            assert "id" not in it and "turn_id" not in it
            assert all("id" not in b and "iteration_id" not in b for b in it["blocks"])
    iteration = turns[0]["iterations"][1]
    assert json.loads(iteration["raw_reply"])["title"] == "Squares"
    assert iteration["context_message"].startswith("[iteration 2/")
    exported = json.loads(cli("export", squares, "--format", "json").stdout)
    assert exported == transcript
    only_second = cli.json("show", squares, "--turn", "2")
    assert [t["position"] for t in only_second["turns"]] == [2]


def test_vars_piped_is_tab_separated(cli: Cove, squares: str) -> None:
    lines = cli("vars", squares).stdout.splitlines()
    assert lines[0].split("\t") == ["name", "version", "kind", "type", "size", "turn", "preview"]
    names = [line.split("\t")[0] for line in lines[1:]]
    assert names == ["area", "cube", "side", "square"]
    [area] = cli.json("vars", squares, "area")
    assert area["version"] == 1
    # Written by turn 1, iteration 2, block 1: counted from 1 like everything else.
    assert (area["turn_position"], area["iteration_position"], area["block_position"]) == (1, 2, 1)
    [cube] = [v for v in cli.json("show", squares)["var_versions"] if v["name"] == "cube"]
    assert (cube["turn_position"], cube["iteration_position"], cube["block_position"]) == (2, 1, 2)


def test_search_marks_matches_with_guillemets_when_piped_and_offsets_in_json(
    cli: Cove, squares: str
) -> None:
    piped = cli("search", "cube").stdout
    header, *rows = piped.splitlines()
    assert header.split("\t") == ["conversation", "title", "turn", "kind", "match"]
    assert any("«cube»" in row for row in rows)
    assert "[cube]" not in piped
    [answer] = [row for row in rows if row.split("\t")[3] == "answer"]
    assert answer.endswith("«Cube» [1] 27")  # the text's own brackets are not match markers
    hits = cli.json("search", "cube")
    assert hits and all(h["conversation_id"] == squares for h in hits)
    for hit in hits:
        assert "«" not in hit["text"] and "[cube]" not in hit["text"]
        assert hit["matches"]
        for start, end in hit["matches"]:
            assert hit["text"][start:end].lower() == "cube"
    assert {h["turn"] for h in hits} == {2}


def test_an_ambiguous_prefix_is_a_usage_error_listing_the_candidates(cli: Cove) -> None:
    async def create(count: int) -> None:
        async with Conversations.open(Settings.load(env=cli.env)) as convs:
            for _ in range(count):
                await convs.create(channel="cli")

    asyncio.run(create(40))  # ids are random hex: among 40, two share a first digit
    ids = {c["id"] for c in cli.json("list")}
    digit = max("0123456789abcdef", key=lambda d: sum(i.startswith(d) for i in ids))
    matching = sorted(i for i in ids if i.startswith(digit))
    assert len(matching) > 1
    result = cli("show", digit)
    assert result.exit_code == 2
    assert "ambiguous" in result.stderr
    assert all(i in result.stderr for i in matching[:10])
    assert cli("show", "does-not-exist").exit_code == 7


def test_terminal_escapes_from_the_sandbox_and_the_model_are_shown_not_obeyed(
    cli: Cove, server: FakeOpenAI
) -> None:
    # A clipboard write (OSC 52), a window title (OSC 0) and a C1 CSI that clears the screen.
    hostile = "\\x1b]52;c;SGVsbG8=\\x07\\x1b]0;owned\\x07\\x9b2J"
    server.add_replies(reply([f"print('{hostile}')\nx = '{hostile}'\nx"], "done"))
    assert cli("run", "be hostile").exit_code == 0
    [conv] = cli.json("list")
    shown = cli("show", conv["id"], "--prompts").stdout
    assert "print(" in shown and "␛]52;c;SGVsbG8=␇" in shown and "\\x9b2J" in shown
    for code in ("\x1b]", "\x07", "\x9b"):
        assert code not in shown


def test_show_and_doctor_tell_what_values_take(cli: Cove, server: FakeOpenAI) -> None:
    server.add_replies(
        reply(["nums = list(range(100_000))", "nums.append(-1)"], "Done {{nums}}"),
    )
    assert cli("run", "numbers").exit_code == 0
    [conv] = cli.json("list")
    shown = cli("show", conv["id"]).stdout
    line = next(x for x in shown.splitlines() if x.startswith("values: "))
    assert "live " in line and "of a 1,024.0 MB budget (2 versions, 0 thinned)" in line
    figures = cli.json("show", conv["id"])["values"]
    assert figures["live_bytes"] > 600_000 and 0 < figures["history_bytes"] < 16 * 1024
    assert figures["budget_bytes"] == 1024 * 1024 * 1024
    doctor = cli("doctor").stdout
    assert "history budget 1,024 MB per conversation" in doctor
    assert f"{conv['id'][:12]}: live 0.6 MB, history 0.0 MB (0% of the budget), 0 of 2" in doctor
