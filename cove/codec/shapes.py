"""Shared pieces of the value codec: what ``decode`` returns for values it does not rebuild itself,
the built-in types it can name, and the limits.

See ``cove.codec`` for the tag format.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from fractions import Fraction
from typing import Any, Literal

DEFAULT_MAX_BYTES = 1_000_000
"""Default ``max_bytes`` of ``encode`` (UTF-8 bytes of the encoded text)."""

DEFAULT_MAX_DEPTH = 100
"""Default ``max_depth`` of ``encode`` and ``decode`` (containers nested in containers)."""

DefinitionKind = Literal["function", "class"]

Reads = tuple[tuple[str, str], ...]
"""``(name, token)`` pairs: what a definition's statement read when it ran (see ``Definition``)."""


@dataclass(frozen=True)
class Definition:
    """A function or class defined in the sandbox, carried as its source text.

    The sandbox restores it by running ``source`` again and looking up ``name``. ``reads`` names
    what the statement read when it first ran, each with a token of the value it held, so the
    sandbox can refuse to run it again where those names now hold something else; None for a
    definition recorded without them.
    """

    kind: DefinitionKind
    name: str
    source: str
    reads: Reads | None = None


SourceOf = Callable[[object], "str | Definition | None"]
"""Returns the source of a function or class defined in the sandbox (or its recorded
``Definition``, whose source and reads are used), or None if unknown."""


@dataclass(frozen=True)
class Opaque:
    """A value the codec cannot restore: only its type, a cut repr and its size were kept."""

    type_name: str
    repr: str
    size: int | None = None


MakeDefinition = Callable[[Definition], Any]
"""Builds the live function or class for a decoded ``Definition``."""

# Types a value may hold as plain references (e.g. ``defaultdict(list)``, ``kinds = [int, str]``):
# they need no source because every sandbox has them.
BUILTIN_TYPES: dict[str, type] = {
    t.__name__: t
    for t in (
        bool,
        bytes,
        complex,
        dict,
        float,
        frozenset,
        int,
        list,
        set,
        str,
        tuple,
        date,
        datetime,
        time,
        timedelta,
        Decimal,
        Fraction,
    )
}
BUILTIN_TYPE_NAMES: dict[object, str] = {t: name for name, t in BUILTIN_TYPES.items()}

# One serializer for every piece of encoded text, so equal trees always give identical text.
dumps: Callable[[Any], str] = json.JSONEncoder(
    ensure_ascii=False, allow_nan=False, separators=(",", ":"), check_circular=False
).encode
