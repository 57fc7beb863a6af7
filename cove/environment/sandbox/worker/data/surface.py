"""The audited surface of library objects: which attribute of which class sandbox code may use.

Sandbox code reads attributes only through ``Guards.getattr``. For an object whose class (or, for
a class object, the class itself) comes from a data library, the guard asks ``Surfaces.lookup``,
which finds the first class of its MRO that has a ``Surface``:

- a *listed* surface (``DataFrame``, ``Series``, ``Index``, ``ndarray``, ``Figure``, ``Axes``)
  names every attribute it hands out: kept, wrapped (a checked stand-in bound to the object) or
  removed (with the reason). An attribute it does not name is refused, so a method a newer
  library version adds stays out of reach until it is audited;
- a *rule* surface (group-by objects, windows, accessors, scalars, artists...) keeps every public
  attribute but the ones removed library-wide (``LIBRARY_REMOVED``: pickle, SQL, evaluation,
  raw memory, paths) and its own removed and wrapped ones.

A library object whose MRO has no surface gets no attribute at all. ``docs/sandbox-allowlist.md``
lists every verdict; ``tests/environment/sandbox/worker/test_allowlist_audit.py`` keeps it true.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

LIBRARY_REMOVED: dict[str, str] = {
    "to_pickle": "runs pickle",
    "to_sql": "a database connection",
    "to_clipboard": "the host's clipboard",
    "to_hdf": "a path, through a library that is not installed",
    "to_feather": "a path, through a library that is not installed",
    "to_parquet": "a path, through a library that is not installed",
    "to_orc": "a path, through a library that is not installed",
    "to_stata": "a path (not offered through the workspace)",
    "to_iceberg": "a catalog, through a library that is not installed",
    "to_xarray": "a library that is not installed",
    "to_latex": "renders through template files (Styler)",
    "to_xml": "a path, through a parser that is not installed",
    "to_markdown": "a library that is not installed",
    "eval": "evaluates expression strings that reach any attribute",
    "query": "evaluates expression strings that reach any attribute",
    "style": "Styler renders templates and writes paths",
    "tofile": "writes a path or an open file",
    "dump": "runs pickle and writes a path",
    "dumps": "runs pickle",
    "ctypes": "raw memory addresses and C types",
    "cffi": "raw memory addresses",
    "bit_generator": "the generator's raw state and its ctypes/cffi interfaces",
    "canvas": "the renderer's canvas prints to paths (print_figure, print_png)",
    "set_canvas": "replaces the renderer's canvas",
    "callbacks": "the event registry of the process",
    "ginput": "waits for mouse clicks",
    "waitforbuttonpress": "waits for input",
}
"""Attribute names refused on every library object, and why."""


class _NotLibrary:
    """What ``Surfaces.lookup`` answers for objects no library made (the ordinary guard applies)."""

    __slots__ = ()


NOT_LIBRARY: Any = _NotLibrary()


Verdict = tuple[str, str]
"""``(kept | wrapped | removed, why)``."""

Maker = Callable[[Any], Any]
"""Builds the stand-in of a wrapped attribute from the object it was read on."""


@dataclass(frozen=True)
class Wrapped:
    """A wrapped attribute: why, and the stand-in's maker (given the instance, or the class
    when ``on_class``: a class method such as ``Timestamp.now``)."""

    why: str
    make: Maker
    on_class: bool = False


@dataclass
class Surface:
    """The audited attributes of one library class.

    Attributes:
        path: The class as the audit table names it (``pandas.DataFrame``).
        kept: Attribute name -> why it is handed out unchanged.
        wrapped: Attribute name -> its stand-in.
        removed: Attribute name -> why it is refused.
        rule: For a rule surface, why every other public attribute is kept; None for a listed
            surface, where an unlisted attribute is refused.
    """

    path: str
    kept: dict[str, str] = field(default_factory=dict)
    wrapped: dict[str, Wrapped] = field(default_factory=dict)
    removed: dict[str, str] = field(default_factory=dict)
    rule: str | None = None

    def verdict(self, name: str) -> Verdict | None:
        """What this surface says about attribute ``name`` (None: not audited, refused)."""
        if name in self.wrapped:
            return "wrapped", self.wrapped[name].why
        if name in self.removed:
            return "removed", self.removed[name]
        if name in self.kept:
            return "kept", self.kept[name]
        if name in LIBRARY_REMOVED:
            return "removed", LIBRARY_REMOVED[name]
        if self.rule is not None:
            return "kept", self.rule
        return None


def keep(why: str, names: str) -> dict[str, str]:
    """``{name: why}`` for the whitespace-separated ``names``."""
    return dict.fromkeys(names.split(), why)


def remove(why: str, names: Iterable[str]) -> dict[str, str]:
    """``{name: why}`` for ``names``."""
    return dict.fromkeys(names, why)


_UNAUDITED = Surface(path="(unaudited)")
ROWS = Surface(
    path="pandas.DataFrame.itertuples()",
    rule="the fields of a row (DataFrame.itertuples) and tuple methods",
)


def _is_named_tuple(cls: type) -> bool:
    """A ``collections.namedtuple`` class (a library builds one per ``itertuples`` call)."""
    fields = cls.__dict__.get("_fields")
    return issubclass(cls, tuple) and type(fields) is tuple


class Surfaces:
    """Every surface, by class, and the lookup the attribute guard calls.

    Args:
        surfaces: ``(class, surface)`` pairs; the first class of an object's MRO that has one
            decides.
        roots: The top-level packages whose classes are library classes.
        columns: For objects with named columns (a DataFrame), reads ``obj.name`` as
            ``obj[name]`` when ``name`` is a column and not an audited attribute.
        writable: ``(class, attribute names)`` sandbox code may set on instances (the rest of
            a library object is read-only to it).
    """

    def __init__(
        self,
        surfaces: Iterable[tuple[type, Surface]],
        roots: Iterable[str],
        columns: Callable[[Any, str], Any] | None = None,
        writable: Iterable[tuple[type, frozenset[str]]] = (),
    ) -> None:
        self.by_class: dict[type, Surface] = dict(surfaces)
        self.writable_pairs = tuple(writable)
        self._roots = frozenset(roots)
        self._columns = columns
        self._cache: dict[type, Surface | None] = {}

    def surface_of(self, cls: type) -> Surface | None:
        """The surface deciding for instances of ``cls``; None when no library made ``cls``."""
        try:
            return self._cache[cls]
        except KeyError:
            pass
        found: Surface | None = None
        if self.is_library(cls):
            found = next((self.by_class[c] for c in cls.__mro__ if c in self.by_class), None)
            if found is None:
                found = ROWS if _is_named_tuple(cls) else _UNAUDITED
        self._cache[cls] = found
        return found

    def is_library(self, cls: type) -> bool:
        """Whether a class of ``cls``'s MRO (``object`` aside) comes from a library package."""
        for klass in type.__dict__["__mro__"].__get__(cls):
            module = type.__dict__["__module__"].__get__(klass)
            if type(module) is str and module.split(".")[0] in self._roots:
                return True
        return False

    def lookup(self, obj: Any, name: str) -> Any:
        """The value sandbox code gets for ``obj.name``, or ``NOT_LIBRARY``.

        Raises:
            AttributeError: The attribute is removed or not audited.
        """
        is_class = isinstance(obj, type)
        cls = obj if is_class else type(obj)
        surface = self.surface_of(cls)
        if surface is None:
            return NOT_LIBRARY
        verdict = surface.verdict(name)
        if verdict is None:
            if not is_class and self._columns is not None:
                column = self._columns(obj, name)
                if column is not NOT_LIBRARY:
                    return column
            raise AttributeError(_refusal(cls, name, "it is not part of the audited surface"))
        kind, why = verdict
        if kind == "removed":
            raise AttributeError(_refusal(cls, name, why))
        if kind == "wrapped":
            wrapped = surface.wrapped[name]
            if is_class and not wrapped.on_class:
                raise AttributeError(f"{cls.__name__}.{name} is only available on instances")
            return wrapped.make(obj)
        return getattr(obj, name)

    def writable(self, obj: Any, name: str) -> bool:
        """Whether sandbox code may set ``obj.name`` (the audited pairs of ``writable``)."""
        return any(isinstance(obj, cls) and name in names for cls, names in self.writable_pairs)

    def allows(self, obj: Any, name: str) -> bool:
        """Whether ``lookup`` hands out ``obj.name`` (for ``dir``)."""
        cls = obj if isinstance(obj, type) else type(obj)
        surface = self.surface_of(cls)
        if surface is None:
            return True
        verdict = surface.verdict(name)
        return verdict is not None and verdict[0] != "removed"


def _refusal(cls: type, name: str, why: str) -> str:
    return f"{cls.__name__}.{name} is not available in the sandbox: {why}"
