"""Every value-to-text path on the host survives any value the codec can hold.

``str()`` of an int past Python's digit limit raises ``ValueError``; so does ``repr`` of any
container holding one. Answers (``{{x}}``), previews and ``var_diff`` must still give text.
"""

from __future__ import annotations

import pytest

from cove.codec.preview import text_of
from cove.engine.answer import AnswerRefused, fill_answer
from cove.environment.extensions.shape import describe_shape
from tests.environment.test_environment import Harness, harness

__all__ = ["harness"]


async def test_huge_ints_give_text_for_answers_and_diffs(harness: Harness) -> None:
    env = await harness.open()
    await harness.turn(env, "x = 2**20000", "xs = [2**20000, 1]", "xs.append(2)")
    text = env.value_text("x")
    assert text is not None and text.startswith("39802") and len(text) == 6021
    assert env.value_text("xs") is not None
    filled = fill_answer("The value is {{x}}", env.value_text)
    assert filled == "The value is " + text
    ran = await harness.turn(env, "print(var_diff('xs', 1, 2))")
    assert ran[0][0].ok, ran[0][0].error
    assert "+" in ran[0][0].stdout
    await env.aclose()


def test_text_of_never_raises() -> None:
    assert text_of(2**20000).startswith("39802")
    assert text_of(-(2**20000)).startswith("-39802")
    assert text_of(2**400_000) == "<int with about 120,413 digits>"
    assert "int with about" in text_of([2**20000])
    assert text_of("a\ud800") == "a\\ud800"
    assert text_of("x" * 50, limit=10) == "x" * 9 + "…"


def test_an_answer_whose_value_has_no_text_is_refused_not_crashed() -> None:
    def lookup(name: str) -> str:
        return str(2**20000)  # raises ValueError, as an unguarded lookup did

    with pytest.raises(AnswerRefused, match="cannot be shown as text"):
        fill_answer("{{x}}", lookup)


def test_shape_of_values_with_huge_int_keys() -> None:
    assert describe_shape({2**20000: 1}) == "dict[1] {<int with about 6,021 digits>: int}"
    assert "6,021 digits" in describe_shape([{2**20000: 1}])
