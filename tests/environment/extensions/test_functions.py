"""A plain typed function as an extension: its documentation, its checked arguments, its effect."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cove.environment.extensions.approval import Ruling, decide, parse_policy
from cove.environment.extensions.docs import render_docs
from cove.environment.extensions.functions import BadPlugin, from_function
from cove.errors import ConfigError
from cove.plugins import effect

CALLS: list[tuple[Any, ...]] = []


def lookup(word: str, limit: int = 3, *, tags: list[str] | None = None) -> list[str]:
    """Look a word up in the glossary.

    A longer description that stays out of the prompt.

    Args:
        word: The word to look up.
        limit: How many senses to give,
            at most ten.
        tags: Only senses filed under these.

    Returns:
        The senses.
    """
    CALLS.append((word, limit, tags))
    return [word] * limit


@effect("network")
def fetch(url: str, headers: dict[str, str] | None = None, weights: tuple[float, ...] = ()) -> str:
    """Fetch a page."""
    CALLS.append((url, headers, weights))
    return url


async def call(fn: Any, *args: Any, **kwargs: Any) -> Any:
    [function] = from_function(fn.__name__, fn).functions
    return await function.implementation(None, *args, **kwargs)


def test_the_prompt_shows_the_summary_the_typed_signature_and_the_arguments() -> None:
    docs = render_docs([from_function("lookup", lookup)])
    assert docs.splitlines() == [
        "## lookup: Look a word up in the glossary.",
        "- lookup(word: str, limit: int = 3, tags: list[str] | None = None) -> list[str]",
        "    word: The word to look up.",
        "    limit: How many senses to give, at most ten.",
        "    tags: Only senses filed under these.",
    ]
    assert "stays out of the prompt" not in docs and "Returns" not in docs


async def test_arguments_are_checked_against_the_signature_before_the_function_runs() -> None:
    CALLS.clear()
    assert await call(lookup, "cove", 2, tags=["x"]) == ["cove", "cove"]
    bad = [
        ((1,), {}, "argument 'word' must be str, got int"),
        (("w", True), {}, "argument 'limit' must be int, got bool"),
        (("w",), {"tags": ["a", 2]}, "argument 'tags' must be list[str] | None, got list"),
        (("w",), {"tags": ("a",)}, "argument 'tags' must be list[str] | None, got tuple"),
        ((), {}, "missing a required argument: 'word'"),
        (("w",), {"colour": 1}, "got an unexpected keyword argument 'colour'"),
    ]
    for args, kwargs, message in bad:
        with pytest.raises(TypeError, match=message.replace("|", r"\|").replace("[", r"\[")):
            await call(lookup, *args, **kwargs)
    assert CALLS == [("cove", 2, ["x"])]  # none of the bad calls reached the function


async def test_values_that_are_not_plain_data_never_reach_the_function() -> None:
    class Sneaky(str):
        def lower(self) -> str:
            raise AssertionError("a method of a value from the sandbox ran on the host")

    CALLS.clear()
    for value in (Sneaky("x"), Path("/etc/passwd"), b"bytes", None, object()):
        with pytest.raises(TypeError, match="argument 'word' must be str"):
            await call(lookup, value)
    with pytest.raises(TypeError, match="argument 'headers'"):
        await call(fetch, "u", {1: "x"})
    assert await call(fetch, "u", {"a": "b"}, weights=(1, 2.5)) == "u"  # an int is a float
    assert CALLS == [("u", {"a": "b"}, (1, 2.5))]


def test_the_effect_is_declared_by_the_decorator_or_defaults_to_read() -> None:
    assert from_function("fetch", fetch).effect == "network"
    assert from_function("lookup", lookup).effect == "read"
    with pytest.raises(ValueError, match="not a short lowercase word"):
        effect("Write Things")


def untyped(x):  # type: ignore[no-untyped-def]
    """No hints."""


def starred(*words: str) -> None:
    """Any number of words."""


def undocumented(x: int) -> int:
    return x


def odd_type(x: Path) -> None:
    """A path."""


@pytest.mark.parametrize(
    ("fn", "message"),
    [
        (untyped, r"parameter\(s\) without a type hint: x"),
        (starred, r"\*args and \*\*kwargs are not supported"),
        (undocumented, "needs a docstring"),
        (odd_type, "parameter 'x': type Path is not supported"),
    ],
)
def test_a_function_cove_cannot_check_is_refused_with_the_reason(fn: Any, message: str) -> None:
    with pytest.raises(BadPlugin, match=message):
        from_function(fn.__name__, fn)


def test_policy_entries_go_from_the_most_specific_to_the_default() -> None:
    policy = parse_policy(["write=ask", "notes=deny", "notes_add=allow"])

    def rule(function: str, extension: str, effect: str, builtin: bool = False) -> Ruling:
        return decide(
            policy, function=function, extension=extension, effect=effect, builtin=builtin
        )

    assert rule("notes_add", "notes", "write") == Ruling("allow", "notes_add")
    assert rule("notes_drop", "notes", "write") == Ruling("deny", "notes")
    assert rule("write_file", "files", "write", builtin=True) == Ruling("ask", "write")
    assert rule("send", "mail", "network") == Ruling("ask", "default")  # a plugin's effect
    assert rule("llm_query", "llm", "spend", builtin=True) == Ruling("allow", "default")
    assert not rule("search", "mail", "read").needs_turn
    with pytest.raises(ConfigError, match="'write=maybe' is not NAME=allow"):
        parse_policy(["write=maybe"])
