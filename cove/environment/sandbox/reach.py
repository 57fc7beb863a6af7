"""What a block can reach: the names and objects its code may read or change.

A block can only get at a user variable by naming it (its code's ``co_names``), by calling code
that names it (a function or method defined in the sandbox, whose own ``co_names`` count), or by
holding an object that is also part of another variable's value (an alias, a container element,
a closure cell, a bound method's ``self``). ``Reach`` follows all three from the block's code
objects: names lead to the namespace's values, values lead to the objects they reference (through
``gc.get_referents``, which runs no Python code, so a hostile object cannot steer the walk), and
every code object met adds its names. The walk never enters the namespace itself, the builtins,
curated module namespaces, classes or functions not made in the sandbox, or the frames of host
code: they hold no user value that a name would not also lead to.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterable
from types import CodeType, FrameType, FunctionType, ModuleType, TracebackType
from typing import Any

from cove.environment.sandbox.guards import ReadOnlyNamespace

# Types whose instances reference nothing a block could change (no ids worth recording).
_LEAVES: frozenset[type] = frozenset({int, float, complex, str, bytes, bool, type(None), CodeType})


class Reach:
    """A walk over objects reachable from sandbox code.

    Args:
        namespace: The sandbox's globals (never walked: names lead into it).
        builtins: The sandbox's builtins (never walked).
        is_sandbox_class: Whether a class was defined in the sandbox (its body is walked).
    """

    def __init__(
        self,
        namespace: dict[str, Any],
        builtins: dict[str, Any],
        is_sandbox_class: Callable[[type], bool],
    ) -> None:
        self.namespace = namespace
        self.builtins = builtins
        self.is_sandbox_class = is_sandbox_class
        self.names: list[str] = []  # in the order met: the block's own names come first
        self._named: set[str] = set()
        self.ids: set[int] = set()
        self.visited = 0
        self._seen: set[int] = set()
        self._stack: list[object] = []

    def from_code(self, codes: Iterable[CodeType]) -> None:
        """Walk everything the given code objects can reach, names transitively included."""
        self._stack.extend(codes)
        self._drain()
        walked = 0
        while walked < len(self.names):  # walking a value may name more (a function's globals)
            name = self.names[walked]
            walked += 1
            if not name.startswith("_") and name in self.namespace:
                self._stack.append(self.namespace[name])
                self._drain()

    def objects_of(self, value: object) -> set[int]:
        """The ids of the objects (``value`` included) that make up ``value``."""
        self._stack.append(value)
        self._drain()
        return self.ids

    def _drain(self) -> None:
        stack, seen, ids = self._stack, self._seen, self.ids
        while stack:
            obj = stack.pop()
            kind = type(obj)
            if kind in _LEAVES:
                if kind is CodeType:
                    self._code(obj)  # type: ignore[arg-type]
                continue
            key = id(obj)
            if key in seen:
                continue
            seen.add(key)
            self.visited += 1
            if obj is self.namespace or obj is self.builtins:
                continue
            if isinstance(obj, ModuleType | ReadOnlyNamespace):
                continue
            if kind is FunctionType:
                if obj.__globals__ is not self.namespace:  # type: ignore[attr-defined]
                    continue  # host code (an extension proxy, a curated function)
            elif issubclass(kind, type):
                if not self.is_sandbox_class(obj):  # type: ignore[arg-type]
                    continue
            elif kind is FrameType:
                self._frame(obj)  # type: ignore[arg-type]
                continue
            elif kind is TracebackType:
                stack.extend((obj.tb_frame, obj.tb_next))  # type: ignore[attr-defined]
                continue
            ids.add(key)
            stack.extend(gc.get_referents(obj))

    def _code(self, code: CodeType) -> None:
        key = id(code)
        if key in self._seen:
            return
        self._seen.add(key)
        for name in code.co_names:
            if name not in self._named:
                self._named.add(name)
                self.names.append(name)
        self._stack.extend(c for c in code.co_consts if type(c) is CodeType)

    def _frame(self, frame: FrameType) -> None:
        # Only a sandbox frame's locals; its caller (host code) is not followed.
        if frame.f_globals is not self.namespace:
            return
        self._code(frame.f_code)
        self._stack.extend(frame.f_locals.values())
