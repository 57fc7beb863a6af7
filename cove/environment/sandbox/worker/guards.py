"""The access guards RestrictedPython calls from compiled sandbox code.

``a.b`` becomes ``_getattr_(a, "b")``, ``a[k]`` ``_getitem_(a, k)``, ``a.b = v`` becomes
``_write_(a).b = v`` and so on. The compiler already refuses names and attributes starting with
``_``; these guards repeat that check for names that arrive as strings (``getattr(x, name)``) and
add what the compiler cannot know: which objects are off limits whatever the attribute (modules,
frames, code objects, tracebacks), which public attribute names open doors (``gi_frame``,
``f_globals``, ``mro``...), that ``str.format`` must not look up attributes, that
``ABCMeta.register`` (a process-wide registry, reachable through ``typing``'s aliases) is out of
reach, and that a block sees its recorded clock.

The ``str.format`` guard sits on the operation, not on one attribute path: whatever attribute
lookup yields the real ``str.format``/``str.format_map`` (bound or unbound, through a ``str``
subclass, ``super()``, a ``StrEnum`` member...) hands out the field-safe version instead. Attribute
writes are limited to objects sandbox code made itself (its classes, their instances, its
functions) and a few stdlib types meant to be configured: a stdlib object's public attributes
(``dataclasses.Field.name``, a class's methods) are state other stdlib code trusts.
"""

from __future__ import annotations

import abc
import builtins
import collections
import decimal
import operator
import string
import textwrap
import types
import unicodedata
from collections.abc import Callable, Iterator
from datetime import UTC, date, datetime
from typing import Any

from RestrictedPython.Guards import guarded_iter_unpack_sequence, guarded_unpack_sequence

from cove.environment.sandbox.worker import witness as witness_module
from cove.environment.sandbox.worker.data.surface import NOT_LIBRARY, Surfaces
from cove.environment.sandbox.worker.witness import (
    CONTAINERS,
    GROWS,
    IMMUTABLE,
    PLAIN_VALUES,
    READS,
    Witness,
)

DENIED_ATTRIBUTES = frozenset(
    {
        # generators, coroutines, async generators
        "gi_frame", "gi_code", "gi_yieldfrom", "gi_running", "gi_suspended",
        "cr_frame", "cr_code", "cr_await", "cr_origin", "cr_running", "cr_suspended",
        "ag_frame", "ag_code", "ag_await", "ag_running",
        # frames and tracebacks
        "f_back", "f_globals", "f_locals", "f_builtins", "f_code", "f_trace", "f_generator",
        "f_lasti", "f_lineno", "tb_frame", "tb_next", "tb_lasti", "tb_lineno",
        # Python 2 era function / method internals still found in some objects
        "func_globals", "func_code", "func_closure", "func_defaults", "func_dict",
        "im_func", "im_self", "im_class",
        # class hierarchy walks and attribute-reaching formatting
        "mro",
    }
)  # fmt: skip
"""Public attribute names that are refused on every object."""

DENIED_PREFIXES = ("co_", "gi_", "cr_", "ag_", "tb_")
"""Attribute-name prefixes of code, generator, coroutine and traceback internals."""

_SEALED_TYPES: tuple[type, ...] = (
    types.ModuleType,
    types.FrameType,
    types.CodeType,
    types.TracebackType,
    types.CoroutineType,
    types.AsyncGeneratorType,
)
BLOCK_FILENAME = witness_module.BLOCK_FILENAME
"""The file name of every code object compiled from sandbox code (how tracebacks find them)."""

SANDBOX_MODULE = "sandbox"
"""The ``__module__`` of classes defined by sandbox code."""

_GENERATOR_ATTRIBUTES = frozenset({"send", "throw", "close"})
_MISSING: Any = object()


class ReadOnlyNamespace:
    """Marker base for objects the sandbox may read but never write (curated modules)."""

    __slots__ = ()


class ModuleNamespaceLike(ReadOnlyNamespace):
    """Marker base for curated module namespaces (``modules.ModuleNamespace``)."""

    __slots__ = ()

    @property
    def module_name(self) -> str:
        """The name the sandbox imports this namespace under."""
        raise NotImplementedError


def check_attribute(obj: object, name: str) -> None:
    """Refuse attribute ``name`` of ``obj`` when it could lead out of the sandbox.

    Raises:
        TypeError: ``name`` is not a string.
        AttributeError: The attribute is off limits.
    """
    if type(name) is not str:
        raise TypeError("attribute name must be a string")
    folded = unicodedata.normalize("NFKC", name)
    if folded.startswith("_") or name.startswith("_"):
        raise AttributeError(f'"{name}" is an invalid attribute name because it starts with "_"')
    if folded in DENIED_ATTRIBUTES or folded.startswith(DENIED_PREFIXES):
        raise AttributeError(f'"{name}" is a restricted attribute')
    if isinstance(obj, _SEALED_TYPES):
        raise AttributeError(f"attributes of {type(obj).__name__} objects are not accessible")
    if isinstance(obj, BaseException) and folded == "obj":
        # AttributeError.obj hands out the object whose lookup failed: possibly a host internal.
        raise AttributeError('"obj" of exceptions is not accessible')
    if isinstance(obj, types.GeneratorType) and folded not in _GENERATOR_ATTRIBUTES:
        raise AttributeError(f'generator attribute "{name}" is not accessible')


class BlockClock:
    """The wall-clock time a block sees: its recorded start time, not the real clock."""

    def __init__(self) -> None:
        self.now = 0.0

    def method(self, owner: object, name: str) -> Callable[..., Any] | None:
        """A clock-bound replacement for ``owner.name`` (``now``/``today``/``utcnow``), if any."""
        cls = owner if isinstance(owner, type) else type(owner)
        if not issubclass(cls, date):
            return None
        clock = self
        if name == "today":
            return lambda: cls.fromtimestamp(clock.now)
        if name == "now" and issubclass(cls, datetime):
            return lambda tz=None: cls.fromtimestamp(clock.now, tz)
        if name == "utcnow" and issubclass(cls, datetime):
            return lambda: cls.fromtimestamp(clock.now, UTC).replace(tzinfo=None)
        return None


class _FieldSafeFormatter(string.Formatter):
    """``str.format`` semantics, minus attribute and index lookups inside replacement fields."""

    def get_field(self, field_name: str, args: Any, kwargs: Any) -> Any:
        if not (field_name == "" or field_name.isidentifier() or field_name.isdigit()):
            raise ValueError(
                f"format field {{{field_name}}} is not allowed: only plain names and positions "
                "may be used (compute the value first, or use an f-string)"
            )
        return super().get_field(field_name, args, kwargs)


_FORMATTER = _FieldSafeFormatter()


def safe_format(template: str, /, *args: Any, **kwargs: Any) -> str:
    """``template.format(*args, **kwargs)`` without attribute or index lookups in fields."""
    return _FORMATTER.vformat(str(template), args, kwargs)


def safe_format_map(template: str, mapping: Any, /) -> str:
    """``template.format_map(mapping)`` without attribute or index lookups in fields."""
    return _FORMATTER.vformat(str(template), (), mapping)


class Guards:
    """The guard functions of one worker, bound to that worker's block clock.

    Args:
        clock: The worker's block clock.
        surfaces: The audited surface of the data libraries' objects (``data/surface.py``);
            None when the libraries are not installed.
    """

    def __init__(
        self, clock: BlockClock, surfaces: Surfaces | None = None, witness: Witness | None = None
    ) -> None:
        self.clock = clock
        self.surfaces = surfaces
        self.witness = Witness() if witness is None else witness
        self._transparent: dict[type, bool] = {}

    def getattr(self, obj: object, name: str, default: Any = _MISSING) -> Any:
        """Guarded ``getattr``: the compiled form of ``obj.name`` and the sandbox's ``getattr``.

        What it hands out is told to the witness (``witness.py``): a method fetched from a
        container touches it, a function that may change its arguments flags the block."""
        try:
            check_attribute(obj, name)
            if self.surfaces is not None:
                found = self.surfaces.lookup(obj, name)
                if found is not NOT_LIBRARY:
                    self._tell(obj, name, found)
                    return found
        except AttributeError:
            if default is not _MISSING:
                return default
            raise
        if name in ("now", "today", "utcnow"):
            replacement = self.clock.method(obj, name)
            if replacement is not None:
                return replacement  # reads the block clock, changes nothing
        value = getattr(obj, name) if default is _MISSING else getattr(obj, name, default)
        kind = type(value)
        if kind is types.BuiltinMethodType and value.__self__ is obj and type(obj) in CONTAINERS:
            # The hot path, ``rows.append(x)``: a method of a list, dict, set or deque.
            if name not in READS:
                touched = self.witness.touched
                if name in GROWS:
                    touched.setdefault(id(obj), True)
                else:
                    touched[id(obj)] = False
            return value
        if kind in _FORMAT_KINDS:
            value = _safe_formatting(value)
        elif kind is types.MethodType and value.__func__ is _ABC_REGISTER:
            if default is not _MISSING:
                return default
            raise AttributeError(_ABC_REGISTER_REFUSAL)
        self._tell(obj, name, value)
        return value

    def _tell(self, obj: object, name: str, value: object) -> None:
        """Tell the witness ``obj.name`` was handed out as ``value`` (unless nothing it could
        change: data, a class, a member of an immutable object or of an immutable type)."""
        kind = type(obj)
        if type(value) in PLAIN_VALUES or kind in IMMUTABLE or (kind is type and obj in IMMUTABLE):
            return
        module = obj.module_name if isinstance(obj, ModuleNamespaceLike) else None
        self.witness.fetched(obj, value, name, module)

    def hasattr(self, obj: object, name: str) -> bool:
        """Guarded ``hasattr``: False for attributes the sandbox may not read."""
        try:
            self.getattr(obj, name)
        except Exception:
            return False
        return True

    def dir(self, obj: object = _MISSING) -> list[str]:
        """``dir`` limited to the attributes the sandbox may read."""
        if obj is _MISSING:
            raise TypeError("dir() needs an argument in the sandbox")
        names = []
        for name in dir(obj):
            try:
                check_attribute(obj, name)
            except AttributeError:
                continue
            if self.surfaces is None or self.surfaces.allows(obj, name):
                names.append(name)
        return names

    def write(self, obj: Any) -> Any:
        """The ``_write_`` guard: ``guarded_write`` plus the audited attribute writes of library
        objects (``df.columns = [...]``: ``Surfaces.writable``)."""
        if type(obj) in _PLAIN_CONTAINERS:  # the hot path: ``d[k] = v``
            self.witness.touched[id(obj)] = False
            return obj
        target = guarded_write(obj)
        self.witness.write_target(obj, self.transparent(obj))
        if type(target) is _ItemWrites and self.surfaces is not None:
            object.__setattr__(target, "_writable", self.surfaces.writable)
        return target

    def transparent(self, obj: object) -> bool:
        """Whether writing ``obj`` runs only sandbox code or changes only ``obj``: a sandbox
        function, or an instance of classes made by sandbox code (bar ``object``)."""
        if type(obj) is types.FunctionType:
            return True
        cls = obj if isinstance(obj, type) else type(obj)
        found = self._transparent.get(cls)
        if found is None:
            mro = type.__dict__["__mro__"].__get__(cls)
            found = all(klass is object or made_by_sandbox(klass) for klass in mro)
            self._transparent[cls] = found
        return found

    def inplace(self, op: str, target: Any, value: Any) -> Any:
        """The ``_inplacevar_`` guard: ``x += y`` and friends (a mutable ``x`` is touched)."""
        function = _INPLACE.get(op)
        if function is None:
            raise SyntaxError(f"unsupported augmented assignment {op}")
        if type(target) not in IMMUTABLE:
            self.witness.augmented(
                op, target, type(target) in _PLAIN_CONTAINERS or self.transparent(target)
            )
        return function(target, value)

    def augmented_item(self, target: Any, key: Any, op: str, value: Any) -> None:
        """``target[key] op= value`` (``df['x'] += 1``, ``arr[:, 1] += 10``): read, combine,
        write back, each through its guard."""
        current = guarded_getitem(target, key)
        self.write(target)[key] = self.inplace(op, current, value)

    def augmented_attribute(self, target: Any, name: str, op: str, value: Any) -> None:
        """``target.name op= value``: read and write through the attribute guards."""
        current = self.getattr(target, name)
        setattr(self.write(target), name, self.inplace(op, current, value))

    def build_class(self, function: Any, name: str, *bases: Any, **kwargs: Any) -> Any:
        """``__build_class__`` refusing library bases: subclassing a DataFrame or an array would
        let a class decide how library code treats its instances."""
        if self.surfaces is not None:
            for base in bases:
                if isinstance(base, type) and self.surfaces.is_library(base):
                    raise TypeError(f"subclassing {base.__name__} is not available in the sandbox")
        return builtins.__build_class__(function, name, *bases, **kwargs)


# ``ABCMeta.register`` changes a class for the whole worker: registered under a stdlib ABC (or
# under a sandbox subclass of one, which the ABC consults too), any class would pass
# ``isinstance(x, Mapping)`` checks in the worker's own code. ``typing``'s aliases hand it out by
# forwarding their attributes to the ``collections.abc`` class they stand for.
_ABC_REGISTER = abc.ABCMeta.register
_ABC_REGISTER_REFUSAL = (
    "register() of abstract base classes is not available in the sandbox: it would change "
    "isinstance() for the whole worker; subclass the ABC instead"
)

_UNBOUND_FORMATS: dict[Any, Callable[..., str]] = {
    str.format: safe_format,
    str.format_map: safe_format_map,
}
_FORMAT_KINDS = frozenset({types.BuiltinMethodType, types.MethodDescriptorType})


def _safe_formatting(value: Any) -> Any:
    """``value`` itself, unless it is the real ``str.format``/``format_map`` (then the safe one)."""
    if type(value) is types.MethodDescriptorType:
        return _UNBOUND_FORMATS.get(value, value)
    template = getattr(value, "__self__", None)
    name = getattr(value, "__name__", None)
    if isinstance(template, str) and name in ("format", "format_map"):
        function = safe_format if name == "format" else safe_format_map
        return _bind(function, template)
    return value


def _bind(function: Callable[..., str], template: str) -> Callable[..., str]:
    def bound(*args: Any, **kwargs: Any) -> str:
        return function(template, *args, **kwargs)

    return bound


# Item writes on these need no check at all (the hot path: ``d[k] = v``).
_PLAIN_CONTAINERS = frozenset({list, dict, set})
# Stdlib types whose public attributes exist to be set by their users.
_CONFIGURABLE: tuple[type, ...] = (
    textwrap.TextWrapper,
    decimal.Context,
    collections.defaultdict,
    BaseException,
)


class _ItemWrites:
    """What ``_write_`` hands back for objects sandbox code may index but not set attributes on
    (bar the audited pairs of ``_writable``)."""

    __slots__ = ("_target", "_writable")
    _target: Any
    _writable: Callable[[Any, str], bool] | None

    def __init__(self, target: Any) -> None:
        object.__setattr__(self, "_target", target)
        object.__setattr__(self, "_writable", None)

    def __setitem__(self, key: Any, value: Any) -> None:
        self._target[key] = value

    def __delitem__(self, key: Any) -> None:
        del self._target[key]

    def __setattr__(self, name: str, value: Any) -> None:
        if self._writable is not None and type(name) is str and self._writable(self._target, name):
            setattr(self._target, name, value)
            return
        raise TypeError(_refusal(self._target, name))

    def __delattr__(self, name: str) -> None:
        raise TypeError(_refusal(self._target, name))


def _refusal(target: Any, name: str) -> str:
    return (
        f"cannot set attribute {name!r} of {type(target).__name__} objects: in the sandbox only "
        "objects made by your own code (classes, instances, functions) can be written"
    )


def made_by_sandbox(obj: Any) -> bool:
    """Whether ``obj`` is a class defined by sandbox code, an instance of one, or its function."""
    if type(obj) is types.FunctionType:
        return obj.__code__.co_filename == BLOCK_FILENAME
    cls = obj if isinstance(obj, type) else type(obj)
    return getattr(cls, "__module__", None) == SANDBOX_MODULE


def guarded_write(obj: Any) -> Any:
    """The ``_write_`` guard: what ``obj.x = v`` and ``obj[k] = v`` may target."""
    if type(obj) in _PLAIN_CONTAINERS:
        return obj
    if isinstance(obj, (ReadOnlyNamespace, *_SEALED_TYPES)):
        raise TypeError(f"{type(obj).__name__} objects are read-only in the sandbox")
    if made_by_sandbox(obj) or (not isinstance(obj, type) and isinstance(obj, _CONFIGURABLE)):
        return obj
    return _ItemWrites(obj)


def guarded_getitem(obj: Any, key: Any) -> Any:
    """The ``_getitem_`` guard (every reachable container is safe to index)."""
    return obj[key]


def guarded_iter(obj: Any) -> Iterator[Any]:
    """The ``_getiter_`` guard (iteration yields only what the object already holds)."""
    return iter(obj)


def apply(function: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
    """The ``_apply_`` guard: calls with ``*args``/``**kwargs`` unpacking."""
    return function(*args, **kwargs)


_INPLACE: dict[str, Callable[[Any, Any], Any]] = {
    "+=": operator.iadd,
    "-=": operator.isub,
    "*=": operator.imul,
    "/=": operator.itruediv,
    "//=": operator.ifloordiv,
    "%=": operator.imod,
    "**=": operator.ipow,
    "<<=": operator.ilshift,
    ">>=": operator.irshift,
    "|=": operator.ior,
    "^=": operator.ixor,
    "&=": operator.iand,
    "@=": operator.imatmul,
}


def inplace_var(op: str, target: Any, value: Any) -> Any:
    """The ``_inplacevar_`` guard: ``x += y`` and friends."""
    try:
        function = _INPLACE[op]
    except KeyError:
        raise SyntaxError(f"unsupported augmented assignment {op}") from None
    return function(target, value)


def unpack_sequence(it: Any, spec: Any, getiter: Any) -> Any:
    """The ``_unpack_sequence_`` guard (RestrictedPython's protected unpacking)."""
    return guarded_unpack_sequence(it, spec, getiter)  # type: ignore[no-untyped-call]


def iter_unpack_sequence(it: Any, spec: Any, getiter: Any) -> Any:
    """The ``_iter_unpack_sequence_`` guard (unpacking targets of ``for`` loops)."""
    return guarded_iter_unpack_sequence(it, spec, getiter)  # type: ignore[no-untyped-call]
