"""Proof that a container of scalars still holds what it held, by identity, without encoding it.

Reading data is the common block (``len(rows)``, ``rows[:5]``, a sum): the value is reached, so it
must be checked, but encoding 50,000 rows to learn that nothing changed costs tens of
milliseconds. For the shapes data usually has — a list, dict or tuple of scalars, or a table (a
list of dicts, lists or tuples of scalars) — a ``Shallow`` record keeps the very objects the value
held when it was last encoded; comparing them by identity runs at C speed. Scalars (int, float,
str, bytes, bool, None) cannot change in place, so the same objects in the same order mean the
same value. Anything else is left to the encoding's fingerprint.
"""

from __future__ import annotations

from itertools import chain
from operator import is_
from typing import Any

MAX_ELEMENTS = 1_000_000
"""The most references one record keeps (8 MB of pointers); bigger values are encoded."""


class Shallow:
    """The objects a container of scalars (or a table of them) held, in order."""

    __slots__ = ("_keys", "_lens", "_rows", "_values")

    def __init__(
        self,
        rows: list[Any] | None,
        lens: list[int] | None,
        keys: list[Any] | None,
        values: list[Any] | None,
    ) -> None:
        self._rows, self._lens, self._keys, self._values = rows, lens, keys, values

    @classmethod
    def take(cls, value: object, ids: frozenset[int]) -> Shallow | None:
        """A record of ``value`` if it has one of the recorded shapes, else None.

        Args:
            value: The value just encoded.
            ids: The ids of the non-scalar objects it is made of (``Reach.objects_of``).
        """
        if id(value) not in ids:
            return None
        if type(value) is tuple and len(ids) == 1:
            return cls(None, None, None, None)  # a tuple of scalars cannot change at all
        if isinstance(value, dict) and type(value) is dict:
            if len(ids) != 1 or len(value) > MAX_ELEMENTS:
                return None
            return cls(None, None, list(value), list(value.values()))
        if not (isinstance(value, list) and type(value) is list):
            return None
        if len(ids) == 1:
            return cls(None, None, value.copy(), None) if len(value) <= MAX_ELEMENTS else None
        # A table: distinct rows (one id each), all dicts or all lists/tuples, of scalars only.
        kinds = set(map(type, value))
        if len(ids) != len(value) + 1 or not (kinds == {dict} or kinds <= {list, tuple}):
            return None
        lens = list(map(len, value))
        if sum(lens) + len(value) > MAX_ELEMENTS:
            return None
        values = list(chain.from_iterable(map(dict.values, value))) if kinds == {dict} else None
        return cls(value.copy(), lens, list(chain.from_iterable(value)), values)

    def holds(self, value: Any) -> bool:
        """Whether ``value`` (the recorded object) holds the same objects in the same order."""
        keys, values, rows = self._keys, self._values, self._rows
        if keys is None:
            return True  # a tuple
        if rows is None:
            if len(value) != len(keys) or not all(map(is_, value, keys)):
                return False
            return values is None or all(map(is_, value.values(), values))
        if len(value) != len(rows) or not all(map(is_, value, rows)):
            return False
        if list(map(len, value)) != self._lens:
            return False
        if not all(map(is_, chain.from_iterable(value), keys)):
            return False
        return values is None or all(map(is_, chain.from_iterable(map(dict.values, value)), values))
