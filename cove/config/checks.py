"""What a section checks when it is built, and the flat key each of its errors names.

A field's *flat key* is its section's ``FLAT_PREFIX`` (``"web_"``, ``"telegram_"``; none for the
other sections) followed by its name, unless its metadata gives one (``FLAT_KEY``). Errors name
the flat key and carry it as ``ConfigError.setting``, so ``Settings.load`` can add where the value
came from.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from cove.errors import ConfigError

FLAT_KEY = "flat_key"  # field metadata: the flat key when it is not prefix + name


def flat_key(cls: type, name: str) -> str:
    """The flat key of field ``name`` of section class ``cls``."""
    for f in dataclasses.fields(cls):
        if f.name == name:
            given: str | None = f.metadata.get(FLAT_KEY)
            return given or f"{getattr(cls, 'FLAT_PREFIX', '')}{name}"
    raise KeyError(name)


def invalid(section: Any, name: str, problem: str) -> ConfigError:
    """The error for field ``name`` of ``section``: ``setting <flat key> <problem>``."""
    flat = flat_key(type(section), name)
    return ConfigError(f"setting {flat} {problem}", setting=flat)


def positive(section: Any, *names: str) -> None:
    """Each named field is above zero.

    Raises:
        ConfigError: One is zero or negative.
    """
    for name in names:
        value = getattr(section, name)
        if value <= 0:
            raise invalid(section, name, f"must be positive, got {value}")


def not_negative(section: Any, *names: str) -> None:
    """Each named field is zero or more.

    Raises:
        ConfigError: One is negative.
    """
    for name in names:
        value = getattr(section, name)
        if value < 0:
            raise invalid(section, name, f"must not be negative, got {value}")
