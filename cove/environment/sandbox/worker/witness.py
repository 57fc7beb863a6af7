"""The mutation witness: which objects sandbox code may have changed since the tracker last looked.

Sandbox code is compiled by the restricted compiler, so every in-place change it makes from its
own code passes through a guard the worker owns: ``obj[k] = v``, ``del obj[k]`` and ``obj.a = v``
through ``_write_``, ``x += y`` through ``_inplacevar_``, and a method call through ``_getattr_``
fetching the method first (``rows.append`` is fetched, then called). The guards tell the witness;
the tracker then skips the values none of whose objects were touched (``tracking.py``): deciding
that ``rows`` did not change in ``len(rows)`` costs nothing, not an identity check of its cells.

What is *touched*, by id: the target of a write or an augmented assignment; the receiver of a
method fetched from a list, dict, set or deque, unless the method only reads (``get``, ``keys``,
``count``, ``copy``...). Appending methods (``list.append``/``extend``, ``+=`` on a list) record
that the object only grew at its end, so the tracker compares its new tail only.

What cannot be attributed to one object sets ``anything``: a function fetched from a module whose
functions may change their arguments (``heapq``, ``bisect``, ``random.shuffle``, the data
libraries: anything but ``PURE_MODULES``), a method fetched from a class (``list.append(rows, 1)``),
a method of an object whose code is not the sandbox's (a library object, a ``ChainMap``), a write
to such an object, a ``from`` import of an impure module, and the end of a sandbox generator
that holds a ``try`` (its ``finally`` may run outside any block, when the generator is collected).
Callables stored earlier and called later without any guard (``push = rows.append`` then
``push(1)`` in a later block) are found by the tracker's walk of what the block reaches
(``reach.py``), which touches their receivers, or sets ``anything`` for callables it cannot see
through.

The witness is sticky: a guard records whenever it runs, inside a block or not; only the tracker
takes what was recorded (``take``), and puts back what it did not use.
"""

from __future__ import annotations

from collections import OrderedDict, defaultdict, deque
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from fractions import Fraction
from types import BuiltinMethodType, FunctionType, MethodDescriptorType, MethodType
from typing import Any

BLOCK_FILENAME = "<block>"

PURE_MODULES = frozenset(
    {"base64", "collections", "csv", "dataclasses", "datetime", "decimal", "enum", "fractions",
     "hashlib", "itertools", "json", "math", "random", "re", "statistics", "string", "textwrap",
     "time", "typing", "unicodedata", "uuid"}
)  # fmt: skip
"""Curated modules none of whose members changes an argument in place (bar ``MUTATING``)."""

MUTATING = frozenset({("random", "shuffle")})
"""Members of ``PURE_MODULES`` that do change an argument."""

IMMUTABLE: frozenset[type] = frozenset(
    {int, float, complex, str, bytes, bool, type(None), tuple, frozenset, range, Decimal,
     Fraction, date, datetime, time, timedelta}
)  # fmt: skip
"""Types whose instances (and whose methods' receivers) never change."""

CONTAINERS: frozenset[type] = frozenset(
    {list, dict, set, deque, OrderedDict, defaultdict}
)  # fmt: skip
"""Builtin containers whose methods change nothing but the receiver."""

READS = frozenset(
    {"copy", "count", "index", "get", "keys", "values", "items", "isdisjoint", "issubset",
     "issuperset", "union", "intersection", "difference", "symmetric_difference", "fromkeys",
     "most_common", "elements", "total"}
)  # fmt: skip
"""Methods of ``CONTAINERS`` that only read their receiver."""

GROWS = frozenset({"append", "extend"})
"""Methods of a list (or deque) that only add at its end."""

PLAIN_VALUES: frozenset[type] = IMMUTABLE | {list, dict, set, type}
"""Kinds of fetched attribute values that change nothing when called, or cannot be (classes:
constructors; data)."""


def pure_member(module: str, member: str) -> bool:
    """Whether ``module.member`` (a curated module's member) never changes an argument."""
    root = module.partition(".")[0]
    return root in PURE_MODULES and (root, member) not in MUTATING


def sandbox_function(value: object) -> bool:
    """Whether ``value`` is a function compiled from sandbox code (guarded as it runs)."""
    return type(value) is FunctionType and value.__code__.co_filename == BLOCK_FILENAME


class Witness:
    """What the guards saw since the tracker last took it."""

    __slots__ = ("anything", "touched")

    def __init__(self) -> None:
        self.touched: dict[int, bool] = {}
        """Ids of objects possibly changed; True when the object (a list) only grew at its end."""
        self.anything = False
        """Set when a change could not be attributed to an object."""

    def flag(self) -> None:
        """Something may have changed that no object names."""
        self.anything = True

    def wrote(self, obj: object) -> None:
        """``obj`` may have changed in any way."""
        self.touched[id(obj)] = False

    def grew(self, obj: object) -> None:
        """``obj`` (a list) may have grown at its end, and nothing else."""
        self.touched.setdefault(id(obj), True)

    def take(self) -> tuple[dict[int, bool], bool]:
        """What was recorded; the witness starts afresh (a guard running meanwhile records anew)."""
        touched, anything = self.touched, self.anything
        self.touched, self.anything = {}, False
        return touched, anything

    def put_back(self, touched: dict[int, bool]) -> None:
        """Record again ids the tracker took but could not use yet."""
        for key, grown in touched.items():
            if grown:
                self.touched.setdefault(key, True)
            else:
                self.touched[key] = False

    def write_target(self, obj: object, transparent: bool) -> None:
        """The target of ``_write_``: touched; if its code is not the sandbox's (a library object,
        a ``ChainMap`` that writes into the maps it holds), anything may have changed."""
        self.touched[id(obj)] = False
        if not transparent:
            self.anything = True

    def augmented(self, op: str, target: object, transparent: bool) -> None:
        """The target of ``target op= value`` (changed in place when it is mutable)."""
        kind = type(target)
        if kind in IMMUTABLE:
            return
        if kind is list and op == "+=":
            self.grew(target)
        else:
            self.write_target(target, transparent)

    def fetched(self, obj: object, value: object, name: str, module: str | None) -> None:
        """``obj.name`` was fetched and gave ``value``; ``module`` is ``obj``'s module name when
        ``obj`` is a curated module."""
        if type(obj) in IMMUTABLE:
            return
        kind = type(value)
        if module is not None:
            if kind not in PLAIN_VALUES and callable(value) and not pure_member(module, name):
                self.anything = True
            return
        if kind is BuiltinMethodType:
            method: Any = value
            self.receiver(method.__self__, method.__name__)
        elif kind is MethodType:
            if not sandbox_function(value.__func__):  # type: ignore[attr-defined]
                self.anything = True
        elif kind is FunctionType:
            if not sandbox_function(value):
                self.anything = True
        elif kind is MethodDescriptorType:
            if value.__objclass__ not in IMMUTABLE:  # type: ignore[attr-defined]
                self.anything = True
        elif kind not in PLAIN_VALUES and callable(value):
            self.anything = True

    def receiver(self, receiver: object, name: object) -> None:
        """A builtin method named ``name`` bound to ``receiver`` was fetched (or is held)."""
        kind = type(receiver)
        if kind in CONTAINERS:
            if name in READS:
                return
            if name in GROWS:
                self.touched.setdefault(id(receiver), True)
            else:
                self.touched[id(receiver)] = False
        elif kind not in IMMUTABLE and not isinstance(receiver, type):  # a class's: a constructor
            self.touched[id(receiver)] = False
            if not _array(receiver):
                self.anything = True  # a method of a subclass, a class, a module, a library


def _array(obj: Any) -> bool:
    """Whether ``obj`` is a numpy array: its methods change nothing but its own buffer."""
    kind = type(obj)
    return kind.__name__ == "ndarray" and type.__dict__["__module__"].__get__(kind) == "numpy"
