"""Built-in nudges: each fires on its condition and stays quiet otherwise."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from cove.engine.budgets import MAX_NUDGES, NUDGE_CHARS, VAR_INDEX_ROWS
from cove.engine.nudges import (
    ERROR_STREAK_NUDGE,
    LOST_NAMES_SHOWN,
    REPEAT_LIMIT,
    NudgeState,
    builtin_nudges,
)


def nudges(**changes: Any) -> list[str]:
    return [note.text for note in builtin_nudges(dataclasses.replace(NudgeState(), **changes))]


def only(**changes: Any) -> str:
    found = nudges(**changes)
    assert len(found) == 1, found
    return found[0]


def test_a_quiet_turn_gets_no_nudges() -> None:
    assert nudges() == []
    assert nudges(iteration=5, budget=10, var_count=VAR_INDEX_ROWS, error_streak=1) == []


def test_iterations_nearly_exhausted() -> None:
    assert nudges(iteration=8, budget=10) == []
    assert only(iteration=9, budget=10).startswith("2 iterations left, this one included")
    last = only(iteration=10, budget=10)
    assert last.startswith("This is the last iteration")
    assert "request_more_iterations(n)" in last


def test_repeated_code_and_results() -> None:
    assert nudges(repeated=REPEAT_LIMIT - 1) == []
    assert "same code with the same results" in only(repeated=REPEAT_LIMIT)


def test_error_streak_counts_down_to_the_strategy_restart() -> None:
    assert nudges(error_streak=ERROR_STREAK_NUDGE - 1, error_budget=5) == []
    text = only(error_streak=3, error_budget=5)
    assert text.startswith("The last 3 iterations failed")
    assert "2 more failed iterations and your strategy is restarted" in text
    assert "1 more failed iteration and" in only(error_streak=4, error_budget=5)
    assert "restarted" not in only(error_streak=3, error_budget=0)


def test_variable_index_overflowing() -> None:
    assert nudges(var_count=VAR_INDEX_ROWS) == []
    text = only(var_count=VAR_INDEX_ROWS + 1)
    assert text.startswith(f"{VAR_INDEX_ROWS + 1} variables exist")
    assert "forget(*names)" in text


def test_missing_title_after_the_first_iteration() -> None:
    assert nudges(has_title=False, iteration=1) == []
    assert nudges(has_title=True, iteration=2) == []
    assert '"title"' in only(has_title=False, iteration=2)


def test_refused_answer_says_why_once() -> None:
    text = only(refusal="answer refused: undefined placeholder(s) {{total}}")
    assert text.startswith("Your answer was refused: undefined placeholder(s) {{total}}.")
    assert text.lower().count("refused") == 1
    assert len(only(refusal="x" * 5_000)) < NUDGE_CHARS


def test_sandbox_restart_names_lost_variables() -> None:
    text = only(sandbox_restarted=True, restart_reason="timeout", lost_variables=("a", "b"))
    assert text.startswith("The sandbox was restarted (timeout); lost variables: a, b.")
    assert only(sandbox_restarted=True) == "The sandbox was restarted; all variables were restored."
    many = [f"name{i}" for i in range(LOST_NAMES_SHOWN + 5)]
    text = only(lost_variables=many)
    assert f"name{LOST_NAMES_SHOWN - 1} and 5 more." in text
    assert f"name{LOST_NAMES_SHOWN}," not in text


def test_strategy_restart() -> None:
    assert "start over" in only(strategy_restart=True)


@pytest.mark.parametrize("iteration", [9, 10])
def test_everything_at_once_is_bounded_and_ordered_by_importance(iteration: int) -> None:
    found = nudges(
        strategy_restart=True,
        sandbox_restarted=True,
        refusal="answer refused: block 1 failed",
        error_streak=4,
        error_budget=5,
        repeated=REPEAT_LIMIT,
        iteration=iteration,
        budget=10,
        has_title=False,
        var_count=10_000,
    )
    assert len(found) == MAX_NUDGES
    assert "start over" in found[0] and "sandbox was restarted" in found[1]
    assert all(len(text) <= NUDGE_CHARS for text in found)
