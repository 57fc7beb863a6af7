"""``-o KEY=VALUE``: model options for a turn, checked before anything runs."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])

ModelOptions = dict[str, float | int | str | bool]

# The chat-completions parameters that tune a reply. Others (the messages, the reply format,
# streaming) are cove's to set.
KNOWN = {
    "temperature": float,
    "top_p": float,
    "max_tokens": int,
    "max_completion_tokens": int,
    "seed": int,
    "presence_penalty": float,
    "frequency_penalty": float,
}


def model_options(f: F) -> F:
    """Add ``-o/--option KEY=VALUE`` (repeatable) to a command, as the ``options`` argument."""
    return click.option(
        "-o",
        "--option",
        "options",
        multiple=True,
        metavar="KEY=VALUE",
        callback=lambda ctx, param, value: parse_options(value),
        help="A model option sent with every model call of the turn and recorded with it "
        f"(repeatable): {', '.join(KNOWN)}.",
    )(f)


def parse_options(items: tuple[str, ...]) -> ModelOptions:
    """``("temperature=0.2", "max_tokens=500")`` as typed values.

    Raises:
        click.BadParameter: An item is not KEY=VALUE, names an unknown option or has a value of
            the wrong type.
    """
    options: ModelOptions = {}
    for item in items:
        key, sep, text = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise click.BadParameter(f"{item!r} is not KEY=VALUE", param_hint="-o")
        kind = KNOWN.get(key)
        if kind is None:
            known = ", ".join(KNOWN)
            raise click.BadParameter(
                f"unknown model option {key!r} (known: {known})", param_hint="-o"
            )
        options[key] = _typed(key, text.strip(), kind)
    return options


def _typed(key: str, text: str, kind: type) -> float | int:
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if kind is int and type(value) is int:
        return int(value)
    if kind is float and type(value) in (int, float):
        return float(value)
    expected = "an integer" if kind is int else "a number"
    raise click.BadParameter(f"{key} expects {expected}, got {text!r}", param_hint="-o")
