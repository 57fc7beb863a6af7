"""Turning text (environment) and loosely typed values (TOML, overrides) into a field's type.

The type comes from ``typing.get_type_hints`` of the section class, never from annotation text.
A value of the wrong type is a ``ConfigError`` naming the setting, not a ``TypeError`` deep in
the core.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cove.config.keys import Key
from cove.config.sections import Endpoint, Price
from cove.errors import ConfigError

TRUE_WORDS = ("1", "true", "yes", "on")
FALSE_WORDS = ("0", "false", "no", "off", "")


def describe(hint: Any) -> str:
    """A short readable name for a type hint (``int``, ``str | None``, ``tuple[str, ...]``)."""
    if isinstance(hint, type) and not typing.get_args(hint):
        return hint.__name__
    return str(hint).replace("typing.", "").replace("collections.abc.", "")


def coerce(key: Key, value: Any, source: str | None = None) -> Any:
    """``value`` as the type of setting ``key``; ``source`` says where it came from.

    Text is parsed (numbers, booleans such as ``yes``/``off``, comma-separated tuples); other
    values must already have the type (an int is accepted for a float).

    Raises:
        ConfigError: The value cannot be read as that type. It names the setting and the
            source, and quotes the value unless the setting is a secret.
    """
    try:
        return _coerce(key.hint, value)
    except (TypeError, ValueError) as exc:
        got = "" if key.secret else f", got {value!r}"
        where = f" ({source})" if source else ""
        raise ConfigError(
            f"setting {key.flat} expects {describe(key.hint)}{got}{where}", setting=key.flat
        ) from exc


def _coerce(hint: Any, value: Any) -> Any:
    origin = typing.get_origin(hint)
    if origin in (types.UnionType, typing.Union):
        (inner,) = [arg for arg in typing.get_args(hint) if arg is not type(None)]
        if value is None or (value == "" and inner is not str):  # an empty variable: unset
            return None
        return _coerce(inner, value)
    if origin is tuple:
        return _tuple(typing.get_args(hint)[0], value)
    if origin is Mapping:
        return _table(typing.get_args(hint)[1], value)
    if hint in (int, float, bool):
        return _scalar(hint, value)
    if hint is str and isinstance(value, str):
        return value
    if hint is Path and isinstance(value, (str, Path)):
        return Path(value).expanduser()
    raise TypeError(value)


def _scalar(hint: Any, value: Any) -> Any:
    if isinstance(value, str):
        if hint is bool:
            word = value.strip().lower()
            if word in TRUE_WORDS or word in FALSE_WORDS:
                return word in TRUE_WORDS
            raise ValueError(value)
        return hint(value)
    if type(value) is hint or (hint is float and type(value) is int):
        return hint(value)
    raise TypeError(value)


def _tuple(item: Any, value: Any) -> tuple[Any, ...]:
    if isinstance(value, str):
        value = [part.strip() for part in value.split(",") if part.strip()]
    if not isinstance(value, (list, tuple)):
        raise TypeError(value)
    return tuple(_coerce(item, part) for part in value)


def _table(item: type[Price] | type[Endpoint], value: Any) -> dict[str, Any]:
    """A table of prices or endpoints: already built (TOML files are read into them)."""
    if not isinstance(value, Mapping) or not all(isinstance(p, item) for p in value.values()):
        raise TypeError(value)
    return dict(value)
