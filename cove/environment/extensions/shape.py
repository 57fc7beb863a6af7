"""``shape(value)``: a compact, one-line structural description of a value.

Examples::

    shape([1, 2, 3])                       -> 'list[3] of int'
    shape({"a": 1, "b": [1.5]})            -> 'dict[2] {a: int, b: list[1] of float}'
    shape([{"id": 1, "name": "x"}] * 40)   -> 'list[40] of dict rows {id: int, name: str}'
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from cove.codec.preview import preview

MAX_DEPTH = 3
MAX_KEYS = 12
SAMPLE = 200
MAX_CHARS = 600

_SEQUENCES = (list, tuple, set, frozenset)


def describe_shape(value: Any, depth: int = MAX_DEPTH) -> str:
    """Describe ``value``'s structure: type, length, keys/columns and element types.

    Args:
        value: Any value.
        depth: How many container levels to open.

    Returns:
        One line of at most ``MAX_CHARS`` characters.
    """
    text = _shape(value, depth)
    return text if len(text) <= MAX_CHARS else text[: MAX_CHARS - 1] + "…"


def _shape(value: Any, depth: int) -> str:
    name = type(value).__name__
    if isinstance(value, (str, bytes)):
        return f"{name}[{len(value)}]"
    if isinstance(value, dict):
        if depth <= 0 or not value:
            return f"{name}[{len(value)}]"
        return f"{name}[{len(value)}] {_fields(value.items(), len(value), depth - 1)}"
    if isinstance(value, _SEQUENCES):
        head = f"{name}[{len(value)}]"
        if depth <= 0 or not value:
            return head
        return f"{head} of {_elements(value, depth - 1)}"
    return name


def _fields(items: Iterable[tuple[Any, Any]], total: int, depth: int) -> str:
    parts = []
    for count, (key, item) in enumerate(items):
        if count == MAX_KEYS:
            parts.append(f"… +{total - MAX_KEYS} more")
            break
        label = key if isinstance(key, str) else preview(key, 60)  # repr may fail (huge int)
        parts.append(f"{label}: {_shape(item, depth)}")
    return "{" + ", ".join(parts) + "}"


def _elements(values: Iterable[Any], depth: int) -> str:
    sample = []
    for count, item in enumerate(values):
        if count == SAMPLE:
            break
        sample.append(item)
    if all(isinstance(item, dict) for item in sample):
        return _rows(sample, depth)
    kinds = {_shape(item, depth) for item in sample}
    if len(kinds) == 1:
        return kinds.pop()
    names = list(dict.fromkeys(type(item).__name__ for item in sample))
    shown = "|".join(names[:5]) + ("|…" if len(names) > 5 else "")
    return f"mixed {shown}"


def _rows(rows: list[dict[Any, Any]], depth: int) -> str:
    """Dicts in a sequence read best as rows with columns (union of keys, in first-seen order)."""
    columns: dict[Any, set[str]] = {}
    for row in rows:
        for key, item in row.items():
            columns.setdefault(key, set()).add(_shape(item, depth))
    described = ((key, "|".join(sorted(kinds))) for key, kinds in columns.items())
    parts = []
    for count, (key, kinds) in enumerate(described):
        if count == MAX_KEYS:
            parts.append(f"… +{len(columns) - MAX_KEYS} more")
            break
        label = key if isinstance(key, str) else preview(key, 60)  # repr may fail (huge int)
        parts.append(f"{label}: {kinds}")
    return "dict rows {" + ", ".join(parts) + "}"
