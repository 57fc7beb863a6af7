"""The access guards RestrictedPython calls from compiled sandbox code.

``a.b`` becomes ``_getattr_(a, "b")``, ``a[k]`` ``_getitem_(a, k)``, ``a.b = v`` becomes
``_write_(a).b = v`` and so on. The compiler already refuses names and attributes starting with
``_``; these guards repeat that check for names that arrive as strings (``getattr(x, name)``) and
add what the compiler cannot know: which objects are off limits whatever the attribute (modules,
frames, code objects, tracebacks), which public attribute names open doors (``gi_frame``,
``f_globals``, ``mro``...), that ``str.format`` must not look up attributes, and that a block sees
its recorded clock.
"""

from __future__ import annotations

import operator
import string
import types
import unicodedata
from collections.abc import Callable, Iterator
from datetime import UTC, date, datetime
from typing import Any, cast

from RestrictedPython.Guards import guarded_iter_unpack_sequence, guarded_unpack_sequence

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
_GENERATOR_ATTRIBUTES = frozenset({"send", "throw", "close"})
_MISSING: Any = object()


class ReadOnlyNamespace:
    """Marker base for objects the sandbox may read but never write (curated modules)."""

    __slots__ = ()


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
    """The guard functions of one worker, bound to that worker's block clock."""

    def __init__(self, clock: BlockClock) -> None:
        self.clock = clock

    def getattr(self, obj: object, name: str, default: Any = _MISSING) -> Any:
        """Guarded ``getattr``: the compiled form of ``obj.name`` and the sandbox's ``getattr``."""
        try:
            check_attribute(obj, name)
        except AttributeError:
            if default is not _MISSING:
                return default
            raise
        if name in ("format", "format_map") and _is_str(obj):
            function = safe_format if name == "format" else safe_format_map
            return function if isinstance(obj, type) else _bind(function, cast(str, obj))
        if name in ("now", "today", "utcnow"):
            replacement = self.clock.method(obj, name)
            if replacement is not None:
                return replacement
        if default is _MISSING:
            return getattr(obj, name)
        return getattr(obj, name, default)

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
            names.append(name)
        return names


def _is_str(obj: object) -> bool:
    return isinstance(obj, str) or (isinstance(obj, type) and issubclass(obj, str))


def _bind(function: Callable[..., str], template: str) -> Callable[..., str]:
    def bound(*args: Any, **kwargs: Any) -> str:
        return function(template, *args, **kwargs)

    return bound


def guarded_write(obj: Any) -> Any:
    """The ``_write_`` guard: what ``obj.x = v`` and ``obj[k] = v`` may target."""
    if isinstance(obj, (ReadOnlyNamespace, *_SEALED_TYPES)):
        raise TypeError(f"{type(obj).__name__} objects are read-only in the sandbox")
    return obj


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
