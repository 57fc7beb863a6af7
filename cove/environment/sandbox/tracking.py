"""Variable tracking inside the worker: which user variables a block created, changed or deleted.

After every block each user variable is encoded with the codec and fingerprinted, so mutation in
place (``xs.append(1)``) counts as a change. Functions and classes defined at the top level of a
block keep the source of their definition (looked up by object, so ``g = f`` keeps ``f``'s source)
and are reported as ``kind="function"``. Values the codec refuses or that exceed the snapshot limit
are ``opaque``. Curated modules, their members and builtins (extension functions included) bound to
a name are import bindings, tracked separately and never reported as variables.
"""

from __future__ import annotations

import contextlib
import inspect
import weakref
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from fractions import Fraction
from types import FunctionType
from typing import Any

from cove.environment.sandbox.modules import ModuleTable
from cove.persistence import codec

MAX_DEPTH = 100
"""The deepest nesting of containers a snapshot may hold."""

REPORT_BUDGET_BYTES = 24 * 1024 * 1024
"""Encoded snapshots one report may carry (a frame holds 64 MiB); past it, changes are opaque."""

ImportRef = tuple[str, str | None]
"""``(module, member)``: ``("math", None)`` is ``import math``; module ``"builtins"`` names a
builtin or an extension function bound to another name."""

# Values of these exact types cannot change in place: the same object means the same value.
_IMMUTABLE = frozenset(
    {int, float, complex, str, bytes, bool, type(None), Decimal, Fraction, date, datetime, time,
     timedelta}
)  # fmt: skip


@dataclass
class _Tracked:
    value: object
    fingerprint: str


def deleted(name: str) -> dict[str, Any]:
    """The wire form of a ``deleted`` snapshot."""
    return {"name": name, "kind": "deleted", "encoded": None, "type_name": "", "preview": ""}


class VariableTracker:
    """The worker's record of user variables, definition sources and import bindings."""

    def __init__(self, *, snapshot_limit: int, modules: ModuleTable, builtins: dict[str, Any]):
        self.snapshot_limit = snapshot_limit
        self.modules = modules
        self.builtins = builtins
        self.sources: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()
        self.state: dict[str, _Tracked] = {}
        self.imports: dict[str, ImportRef] = {}

    def source_of(self, value: object) -> str | None:
        """The source of a function or class defined in the sandbox (the codec's ``source_of``)."""
        try:
            return self.sources.get(value)
        except TypeError:  # unhashable or not weak-referenceable
            return None

    def remember(self, made: list[tuple[object, str]]) -> None:
        """Record, for each object a top-level definition statement made, that statement's source.

        ``made`` comes from the statements themselves (``policy.DEFINE_HOOK``), in the order they
        ran, so the source is the one of the branch that actually ran, never another statement
        that merely binds the same name.
        """
        for value, source in made:
            if isinstance(value, FunctionType | type):
                with contextlib.suppress(TypeError):
                    self.sources[value] = source

    def resolve(self, ref: ImportRef) -> Any:
        """The object an import binding refers to.

        Raises:
            ImportError: The module or member no longer exists.
            KeyError: A builtin of that name no longer exists.
        """
        module, member = ref
        if module == "builtins":
            return self.builtins[member or ""]
        namespace = self.modules.get(module)
        return namespace if member is None else getattr(namespace, member)

    def changes(self, namespace: dict[str, Any]) -> list[dict[str, Any]]:
        """Snapshots of the variables created, changed or deleted since the last call."""
        index = self._import_index()
        imports: dict[str, ImportRef] = {}
        current: dict[str, Any] = {}
        for name, value in namespace.items():
            if name.startswith("_"):
                continue
            ref = index.get(id(value))
            if ref is not None:
                imports[name] = ref
            else:
                current[name] = value
        self.imports = imports
        found: list[dict[str, Any]] = []
        budget = REPORT_BUDGET_BYTES
        for name, value in current.items():
            old = self.state.get(name)
            if old is not None and old.value is value and type(value) in _IMMUTABLE:
                continue
            snapshot, fingerprint = self.snapshot(name, value)
            if old is None or old.fingerprint != fingerprint:
                budget -= len(snapshot["encoded"] or "")
                if budget < 0:  # too much changed at once to carry: keep the report sendable
                    snapshot.update(kind="opaque", encoded=None, signature=None)
                found.append(snapshot)
            self.state[name] = _Tracked(value, fingerprint)
        for name in [name for name in self.state if name not in current]:
            del self.state[name]
            found.append(deleted(name))
        return found

    def adopt(self, name: str, value: object, encoded: str) -> None:
        """Take a restored variable as unchanged."""
        self.state[name] = _Tracked(value, codec.fingerprint(encoded))

    def forget_all(self) -> None:
        """Drop every tracked variable and import binding (before a full restore)."""
        self.state.clear()
        self.imports.clear()

    def encode(self, value: object) -> str:
        """Encode ``value`` within the snapshot limits.

        Raises:
            CodecError: The value cannot be encoded (``ValueTooLarge`` when over the limits).
        """
        return codec.encode(
            value, source_of=self.source_of, max_bytes=self.snapshot_limit, max_depth=MAX_DEPTH
        )

    def snapshot(self, name: str, value: object) -> tuple[dict[str, Any], str]:
        """The wire form of ``value``'s snapshot and its fingerprint."""
        try:
            encoded: str | None = self.encode(value)
        except MemoryError:
            raise
        except Exception:  # CodecError, or a RecursionError from a hostile structure
            encoded = None
        source = self.source_of(value) if isinstance(value, FunctionType | type) else None
        snapshot: dict[str, Any] = {
            "name": name,
            "kind": "value",
            "encoded": encoded,
            "type_name": type(value).__name__,
            "preview": codec.preview(value),
            "size": codec.size_of(value),
        }
        if encoded is None:
            snapshot["kind"] = "opaque"
            return snapshot, codec.fingerprint(codec.encode_opaque(value))
        if source is not None:
            snapshot["kind"] = "function"
            snapshot["signature"] = snapshot["preview"] = signature_of(name, value)
        return snapshot, codec.fingerprint(encoded)

    def _import_index(self) -> dict[int, ImportRef]:
        index: dict[int, ImportRef] = {}
        for name, value in self.builtins.items():
            if not name.startswith("_") and callable(value):
                index[id(value)] = ("builtins", name)
        for module, namespace in self.modules.loaded().items():
            index[id(namespace)] = (module, None)
            for member_name, member in namespace.members().items():
                if callable(member):
                    index.setdefault(id(member), (module, member_name))
        return index


def signature_of(name: str, value: object) -> str:
    """``name(x, y=2)`` for a function or class bound to ``name``."""
    try:
        text = f"{name}{inspect.signature(value)}"  # type: ignore[arg-type]
    except (TypeError, ValueError):
        text = f"{name}(...)"
    return text if len(text) <= 200 else text[:199] + "…"
