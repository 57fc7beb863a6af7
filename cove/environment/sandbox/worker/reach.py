"""What a block can reach: the names and objects its code may read or change.

A block can only get at a user variable by naming it (its code's ``co_names``), by calling code
that names it (a function or method defined in the sandbox, whose own ``co_names`` count), or by
holding an object that is also part of another variable's value (an alias, a container element,
a closure cell, a bound method's ``self``). ``Reach`` follows the first two from the block's code
objects: names lead to the namespace's values, values lead to the objects they reference (through
``gc.get_referents``, which runs no Python code, so a hostile object cannot steer the walk), and
every code object met adds its names. It returns, per name, the ids of the objects its value is
made of; the tracker's index of which variable holds which object supplies the third path.

The walk never enters the namespace itself, the builtins, curated module namespaces, classes or
functions not made in the sandbox, or the frames of host code: they hold no user value that a name
would not also lead to.
"""

from __future__ import annotations

import gc
import sys
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable
from collections.abc import Set as AbstractSet
from itertools import chain
from types import (
    BuiltinMethodType,
    ClassMethodDescriptorType,
    CodeType,
    FrameType,
    FunctionType,
    GeneratorType,
    MethodDescriptorType,
    MethodType,
    MethodWrapperType,
    ModuleType,
    TracebackType,
    WrapperDescriptorType,
)
from typing import Any

from cove.environment.sandbox.worker.data.libraries import LIBRARY_ROOTS
from cove.environment.sandbox.worker.guards import BLOCK_FILENAME, SANDBOX_MODULE, ReadOnlyNamespace
from cove.environment.sandbox.worker.witness import IMMUTABLE, Witness, sandbox_function

# Types whose instances reference nothing a block could change: never walked, never recorded.
_LEAVES: frozenset[type] = frozenset({int, float, complex, str, bytes, bool, type(None), CodeType})
# Containers whose referents are exactly their contents: walked in bulk, level by level.
_PLAIN: frozenset[type] = frozenset(
    {list, dict, tuple, set, frozenset, deque, OrderedDict, bytearray}
)
# Wrappers of the functions of a class body: walked, the function they wrap judged by itself.
_WRAPPERS: frozenset[type] = frozenset({staticmethod, classmethod, property})
# Unbound methods of builtin types: ``list.append`` held in a variable changes its argument.
_DESCRIPTORS: frozenset[type] = frozenset(
    {MethodDescriptorType, WrapperDescriptorType, ClassMethodDescriptorType, MethodWrapperType}
)
# Kinds whose code the walk judges (``Reach._code``).
_CODE_KINDS: frozenset[type] = frozenset(
    {FunctionType, GeneratorType, BuiltinMethodType, MethodType, *_DESCRIPTORS}
)


class Reach:
    """Walks over the objects sandbox code can reach.

    Args:
        namespace: The sandbox's globals (never walked: names lead into it).
        builtins: The sandbox's builtins (never walked).
        is_sandbox_class: Whether a class was defined in the sandbox (its body is walked).
        known: The ids of a variable's value when it holds no code (a container of scalars
            still bound to the name): such a value is not walked again.
        pure: Whether a callable not made in the sandbox (an import binding) never changes its
            arguments.

    Callables the walk meets are told to ``witness``: a builtin method held somewhere (``push =
    rows.append``, a ``map`` over one, a default argument) touches its receiver, since a call of
    it later passes no guard; a callable it cannot see through (an unbound ``list.append``, a
    function of ``heapq``, a library object that may hold one) flags the block.
    """

    def __init__(
        self,
        namespace: dict[str, Any],
        builtins: dict[str, Any],
        is_sandbox_class: Callable[[type], bool],
        known: Callable[[str, object], AbstractSet[int] | None] = lambda name, value: None,
        pure: Callable[[object], bool] = lambda value: False,
    ) -> None:
        self.namespace = namespace
        self.known = known
        self.pure = pure
        self.witness = Witness()
        self.armed: set[str] = set()
        """The names whose values hold a callable the witness was told of (a bound method, a
        function of an impure module): calling it later passes no guard, even once the value
        no longer holds it, so the tracker flags any block reaching them again."""
        self.met = 0  # callables told to the witness so far
        self.builtins = builtins
        self.is_sandbox_class = is_sandbox_class
        self.names: list[str] = []  # in the order met: the block's own names come first
        self.walked: dict[str, tuple[object, AbstractSet[int]]] = {}  # name -> (value, its ids)
        self._named: set[str] = set()
        self._codes: set[int] = set()

    def from_code(self, codes: Iterable[CodeType]) -> None:
        """Collect every name the given code can reach, walking each name's value once."""
        for code in codes:
            self._add_code(code)
        index = 0
        while index < len(self.names):  # walking a value may name more (a function's globals)
            name = self.names[index]
            index += 1
            if name.startswith("_") or name not in self.namespace:
                continue
            value = self.namespace[name]
            known = self.known(name, value)
            if known is not None:
                self.walked[name] = (value, known)
                continue
            met = self.met
            ids, found = self.objects_of(value)
            if self.met != met:
                self.armed.add(name)
            self.walked[name] = (value, ids)
            for code in found:
                self._add_code(code)

    def objects_of(self, value: object) -> tuple[frozenset[int], list[CodeType]]:
        """The ids of the objects ``value`` is made of, and the sandbox code objects among them."""
        flat = _table_objects(value)
        if flat is not None:
            return flat, []
        seen: set[int] = {id(self.namespace), id(self.builtins)}
        ids: set[int] = set()
        codes: list[CodeType] = []
        level: list[object] = [value]
        while level:
            found = {id(o): o for o in level if type(o) not in _LEAVES}
            fresh = found.keys() - seen
            if not fresh:
                break
            seen |= fresh
            objects = [found[key] for key in fresh] if len(fresh) < len(found) else found.values()
            plain = [o for o in objects if type(o) in _PLAIN]
            ids.update(map(id, plain))
            level = gc.get_referents(*plain) if plain else []
            for obj in objects:
                if type(obj) not in _PLAIN and self._special(obj, level, codes):
                    ids.add(id(obj))
        return frozenset(ids), codes

    def _special(self, obj: object, level: list[object], codes: list[CodeType]) -> bool:
        """Queue what ``obj`` (not a plain container) leads to; whether it is worth recording."""
        kind = type(obj)  # by type, never ``__class__``: a hostile object cannot pose as another
        if issubclass(kind, ModuleType | ReadOnlyNamespace):
            return False
        if kind in _CODE_KINDS:
            if not self._code(obj, kind, codes):
                return False
        elif issubclass(kind, type):
            if not self.is_sandbox_class(obj):  # type: ignore[arg-type]
                return False
        elif kind is FrameType:
            frame: FrameType = obj  # type: ignore[assignment]
            if frame.f_globals is self.namespace:  # a sandbox frame; its host caller is not
                codes.append(frame.f_code)
                scope = frame.f_locals
                if scope is not self.namespace:  # a block's own frame: its names say enough
                    level.extend(scope.values())
            return False
        elif kind is TracebackType:
            level.extend((obj.tb_frame, obj.tb_next))  # type: ignore[attr-defined]
            return False
        elif _from_library(kind):
            # Arrays, frames, figures: compared by their buffers (or recorded opaque), never
            # walked. A view leads to the array it views, whose change it shares. Anything but
            # an array of numbers may hold what the walk does not see (a bound method).
            root = _viewed_array(obj)
            if root is not None:
                level.append(root)
            held = _array_objects(obj)
            if held is not None:
                level.extend(held)  # an array of Python objects: what it holds, walked
            elif not _numeric_array(obj):
                self._flag()
            return True
        elif callable(obj) and kind not in _WRAPPERS and not self.is_sandbox_class(kind):
            self._flag()  # a callable object of host code
        level.extend(gc.get_referents(obj))
        return True

    def _code(self, obj: Any, kind: type, codes: list[CodeType]) -> bool:
        """A function, method or generator met: its sandbox code is queued, a callable whose
        code no guard watches is told to the witness; whether to walk it."""
        if kind is FunctionType:
            scope = obj.__globals__
            if scope is not self.namespace:
                if scope is not _sandbox_module_globals() and not self.pure(obj):
                    self._flag()
                return False  # host code: an extension proxy, a curated function
            codes.append(obj.__code__)
            return True
        if kind is GeneratorType:
            # Its code, even once it ran to its end (its frame, walked below, is then gone).
            if obj.gi_code.co_filename == BLOCK_FILENAME:
                codes.append(obj.gi_code)
            return True
        if kind in _DESCRIPTORS:
            if obj.__objclass__ not in IMMUTABLE:
                self._flag()
            return False
        return self._method(obj, kind)

    def _method(self, obj: Any, kind: type) -> bool:
        """A bound method met: its receiver is touched (a builtin method: ``rows.append``), or
        the block flagged (a method whose code the sandbox did not write); whether to walk it."""
        if self.pure(obj):
            return False  # an import binding that changes nothing (``random.randint``)
        if kind is MethodType:
            if not sandbox_function(obj.__func__):
                self._flag()
        else:
            receiver = obj.__self__
            if isinstance(receiver, ModuleType | ReadOnlyNamespace) or receiver is None:
                self._flag()  # a module's function held under another name
                return False
            self.met += 1
            self.witness.receiver(receiver, obj.__name__)
        return True

    def _flag(self) -> None:
        self.met += 1
        self.witness.flag()

    def _add_code(self, code: CodeType) -> None:
        stack = [code]
        while stack:
            current = stack.pop()
            if id(current) in self._codes:
                continue
            self._codes.add(id(current))
            for name in current.co_names:
                if name not in self._named:
                    self._named.add(name)
                    self.names.append(name)
            stack.extend(c for c in current.co_consts if type(c) is CodeType)


_LIBRARY_KINDS: dict[type, bool] = {}


def _from_library(kind: type) -> bool:
    """Whether ``kind`` comes from a data library (numpy, pandas, matplotlib...)."""
    found = _LIBRARY_KINDS.get(kind)
    if found is None:
        module = type.__dict__["__module__"].__get__(kind)
        found = type(module) is str and module.partition(".")[0] in LIBRARY_ROOTS
        _LIBRARY_KINDS[kind] = found
    return found


def _viewed_array(obj: object) -> object | None:
    """The array an ndarray view ultimately views (None for an array that owns its data)."""
    numpy = sys.modules.get("numpy")
    if numpy is None or not isinstance(obj, numpy.ndarray):
        return None
    root, base = None, obj.base
    while isinstance(base, numpy.ndarray):
        root, base = base, base.base
    return root


def _sandbox_module_globals() -> dict[str, Any] | None:
    """The globals of module ``sandbox``: the code ``dataclasses`` generates for a sandbox class
    (``__init__``, ``__eq__``...) runs with them; it sets its instance's fields and calls the
    fields' factories (held by the class's ``Field`` objects, which the walk sees)."""
    module = sys.modules.get(SANDBOX_MODULE)
    return vars(module) if module is not None else None


def _array_objects(obj: Any) -> list[Any] | None:
    """The Python objects a numpy array of them holds (None for any other object)."""
    numpy = sys.modules.get("numpy")
    if numpy is None or type(obj) is not numpy.ndarray or not obj.dtype.hasobject:
        return None
    if obj.dtype.names is not None:
        return None  # a structured array: flagged, not walked
    return list(obj.ravel(order="K"))


def _numeric_array(obj: object) -> bool:
    """Whether ``obj`` is a numpy array that holds no Python objects."""
    numpy = sys.modules.get("numpy")
    return numpy is not None and isinstance(obj, numpy.ndarray) and not obj.dtype.hasobject


_SCALARS: frozenset[type] = _LEAVES - {CodeType}


def _table_objects(value: object) -> frozenset[int] | None:
    """The objects of a container of scalars, or of a table of them, found at C speed; else None.

    The common shapes of data (a list of numbers, rows of a CSV) need no object-by-object walk:
    a few passes over their contents' types prove there is nothing else to find.
    """
    if type(value) is dict:
        rows: Any = value
        if set(map(type, rows)) <= _SCALARS and set(map(type, rows.values())) <= _SCALARS:
            return frozenset((id(value),))
        return None
    if type(value) is not list:
        return None
    items: list[Any] = value
    kinds = set(map(type, items))
    if kinds <= _SCALARS:
        return frozenset((id(value),))
    if kinds == {dict}:
        keys = set(map(type, chain.from_iterable(items)))
        values = set(map(type, chain.from_iterable(map(dict.values, items))))
        if not (keys <= _SCALARS and values <= _SCALARS):
            return None
    elif not (kinds <= {list, tuple} and set(map(type, chain.from_iterable(items))) <= _SCALARS):
        return None
    return frozenset((id(value), *map(id, items)))
