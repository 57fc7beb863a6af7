"""One-line previews and sizes of arbitrary values, safe on hostile objects.

Containers and strings of the built-in types are walked with item and length limits, so a preview
of a ten-million-item list or a gigantic string costs about as much as a short one. Other objects
are shown with their own ``repr``; an exception from it (or a non-string result) gives a
placeholder instead. The time a user-defined ``__repr__`` takes cannot be bounded from inside the
process: the sandbox's per-block timeout covers that.
"""

from __future__ import annotations

import decimal
import itertools
from collections import deque
from collections.abc import Iterable, Sized
from typing import Any, cast

from cove.codec import arrays

_MAX_ITEMS = 12  # items shown per container before "..."
_MAX_LEVEL = 4  # containers nested deeper show as "[...]" etc.
_LARGE_INT_BITS = 2_000  # beyond, show the digit count (int/str conversion may be limited)


def preview(value: object, limit: int = 80) -> str:
    """A one-line repr of ``value``, at most ``limit`` characters, ending in "…" when cut.

    Never raises (except ``KeyboardInterrupt``).

    Args:
        value: Any object.
        limit: The maximum length of the result (at least 1).
    """
    limit = max(1, limit)
    summary = arrays.preview(value, limit + 1)
    text = summary if summary is not None else _safe_show(value, limit)
    text = utf8_safe(text.replace("\r", "\\r").replace("\n", "\\n"))
    return text if len(text) <= limit else text[: limit - 1] + "…"


def display(value: object, limit: int = 4_000) -> str:
    """What a block's value shows: an array's or a DataFrame's own (multi-line) text, cut to
    ``limit``; for other values their ``preview``. Never raises."""
    text = arrays.display(value, limit)
    return utf8_safe(text) if text is not None else preview(value)


def _safe_show(value: object, limit: int) -> str:
    try:
        text = _Previewer(limit + 1).show(value, 0)
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # a hostile __repr__ may raise anything, SystemExit included
        text = f"<{_type_name(value)} object (repr failed: {type(exc).__name__})>"
    return text


_TEXT_INT_BITS = 170_000  # ~51,000 digits: exact decimal text still costs well under a second


def text_of(value: object, limit: int = 1_000_000) -> str:
    """The full text of a value (``str(value)``), for answers and diffs; never raises.

    Ints past Python's digit limit for ``str`` are written out exactly up to about 51,000
    digits (through ``decimal``, which has no such limit) and summarised beyond; a value whose
    ``str`` fails for any other reason (a container holding such an int, say) falls back to its
    bounded ``preview``. At most ``limit`` characters, ending in "…" when cut.
    """
    try:
        if type(value) is str:
            text = value
        elif type(value) is int and value.bit_length() > _LARGE_INT_BITS:
            if value.bit_length() > _TEXT_INT_BITS:
                digits = int(value.bit_length() * 0.30103) + 1
                text = f"<int with about {digits:,} digits>"
            else:
                text = str(decimal.Decimal(value))
        else:
            text = str(value)
            if type(text) is not str:
                text = str.__str__(text)
    except KeyboardInterrupt:
        raise
    except BaseException:
        text = preview(value, limit)
    text = utf8_safe(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def utf8_safe(text: str) -> str:
    """``text`` with any lone surrogates written as ``\\udxxx`` escapes, so it can be stored."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def size_of(value: object) -> int | None:
    """The length of a sized value (characters, bytes, items), or None when it has none.

    Never raises: a ``__len__`` that fails counts as unsized.
    """
    try:
        return len(cast(Sized, value))
    except KeyboardInterrupt:
        raise
    except BaseException:
        return None


def _type_name(value: object) -> str:
    return type(value).__name__


class _Previewer:
    """Builds a preview, stopping each part once ``budget`` characters are reached."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.path: set[int] = set()

    def show(self, value: Any, level: int) -> str:
        kind = type(value)
        if kind is str or kind is bytes or kind is bytearray:
            cut = value[: self.budget]
            return repr(cut) if len(cut) == len(value) else repr(cut) + "..."
        if kind is int and value.bit_length() > _LARGE_INT_BITS:
            digits = int(value.bit_length() * 0.30103) + 1
            return f"<int with about {digits:,} digits>"
        for base, (opening, closing) in _BRACKETS.items():
            if isinstance(value, base):
                return self._container(value, base, opening, closing, level)
        text = repr(value)
        if type(text) is not str:  # a str subclass could override slicing and replacing
            text = str.__str__(text)
        return text[: self.budget]

    def _container(self, value: Any, base: type, opening: str, closing: str, level: int) -> str:
        kind = type(value)
        if base in (set, frozenset) and not value:
            return f"{kind.__name__}()"
        if id(value) in self.path or level >= _MAX_LEVEL:
            return f"{opening}...{closing}"
        self.path.add(id(value))
        parts = self._parts(value, base, level)
        self.path.discard(id(value))
        if len(parts) < len(value):
            parts.append("...")
        return _enclosed(value, base, opening, closing, parts)

    def _parts(self, value: Any, base: type, level: int) -> list[str]:
        """The previews of a container's first entries, until the budget is reached."""
        if base is dict:
            entries: Iterable[str] = (
                f"{self.show(k, level + 1)}: {self.show(v, level + 1)}"
                for k, v in itertools.islice(value.items(), _MAX_ITEMS)
            )
        else:
            entries = (self.show(v, level + 1) for v in itertools.islice(value, _MAX_ITEMS))
        parts: list[str] = []
        used = 0
        for entry in entries:
            parts.append(entry)
            used += len(entry) + 2
            if used > self.budget:
                break
        return parts


def _enclosed(value: Any, base: type, opening: str, closing: str, parts: list[str]) -> str:
    """A container's entry previews in its brackets, named when it is a subclass."""
    kind = type(value)
    body = ", ".join(parts)
    if base is tuple and len(value) == 1:
        body += ","
    fields = getattr(kind, "_fields", None) if base is tuple else None
    if isinstance(fields, tuple) and len(fields) == len(parts):  # a namedtuple
        body = ", ".join(f"{name}={part}" for name, part in zip(fields, parts, strict=True))
        return f"{kind.__name__}({body})"
    text = f"{opening}{body}{closing}"
    is_plain = kind is base or (kind is deque)
    if base in (frozenset, deque) or not is_plain:
        return f"{kind.__name__}({text})"
    return text


_BRACKETS: dict[type, tuple[str, str]] = {
    list: ("[", "]"),
    tuple: ("(", ")"),
    dict: ("{", "}"),
    set: ("{", "}"),
    frozenset: ("{", "}"),
    deque: ("[", "]"),
}
