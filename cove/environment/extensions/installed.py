"""The installed extensions: cove's built-ins and those packages add through entry points.

A package adds an extension with an entry point in the group ``cove.extensions``; its name is
the extension's name, its object either an ``Extension`` (of the same name) or a plain typed
function (``functions.from_function``). cove's own (``core``, ``files``, ``llm``) are entry
points of the same group in its ``pyproject.toml`` (``registered.own``), loaded first.
``discover`` loads them all once; a plugin that cannot be loaded (an import error, a bad
signature, a name already taken) is left out and reported as a ``PluginProblem``, so a broken
plugin never breaks cove. A conversation's set of extensions is chosen by name from the
``Catalog`` (``select``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from importlib.metadata import EntryPoint

from cove import registered
from cove.environment.extensions.base import Extension
from cove.environment.extensions.functions import BadPlugin, checked_effect, from_function
from cove.environment.extensions.registry import ExtensionRegistry
from cove.errors import ConfigError

log = logging.getLogger(__name__)

#: The entry-point group packages add sandbox extensions through.
GROUP = "cove.extensions"
BUILTIN_SOURCE = "cove (built in)"


@dataclass(frozen=True)
class InstalledExtension:
    """One extension a conversation may use, and where it comes from.

    Attributes:
        extension: The extension itself.
        source: Where it comes from: ``cove (built in)``, or the distribution, its version and
            the entry point (``cove-notes 0.1.0: cove_notes:add_note``).
        builtin: Whether cove itself provides it.
    """

    extension: Extension
    source: str
    builtin: bool = False

    @property
    def name(self) -> str:
        """The extension's name (what settings and the conversation's record use)."""
        return self.extension.name

    @property
    def effects(self) -> tuple[str, ...]:
        """The distinct effects of its functions, in order (``read`` for none)."""
        ext = self.extension
        effects = [ext.effect_of(f) for f in ext.functions] or [ext.effect]
        return tuple(dict.fromkeys(effects))


@dataclass(frozen=True)
class PluginProblem:
    """A plugin left out: its entry point's name, where it comes from and why."""

    name: str
    source: str
    message: str


@dataclass(frozen=True)
class Catalog:
    """What is installed: the usable extensions in order (built-ins first) and the problems."""

    installed: tuple[InstalledExtension, ...]
    problems: tuple[PluginProblem, ...] = ()

    @property
    def names(self) -> tuple[str, ...]:
        """The usable extensions' names, in order."""
        return tuple(item.name for item in self.installed)

    def get(self, name: str) -> InstalledExtension | None:
        """The installed extension called ``name``, or None."""
        return next((item for item in self.installed if item.name == name), None)

    def select(self, names: Sequence[str] | None) -> tuple[Extension, ...]:
        """The extensions called ``names`` in catalog order; None: every installed one.

        Raises:
            ConfigError: A name is not installed (the message lists what is, and the
                problems of plugins that failed to load under that name).
        """
        if names is None:
            return tuple(item.extension for item in self.installed)
        missing = [name for name in dict.fromkeys(names) if self.get(name) is None]
        if missing:
            raise ConfigError(self._missing_message(missing))
        wanted = set(names)
        return tuple(item.extension for item in self.installed if item.name in wanted)

    def _missing_message(self, missing: Sequence[str]) -> str:
        failed = {p.name: p.message for p in self.problems}
        reasons = [f"{name} ({failed[name]})" if name in failed else name for name in missing]
        return (
            f"extension(s) not installed: {', '.join(reasons)}; installed: "
            f"{', '.join(self.names) or 'none'} (`cove extensions` lists them)"
        )


@cache
def builtin_catalog() -> Catalog:
    """A catalog of cove's own extensions only (core, files, llm), in name order.

    Raises:
        ConfigError: cove is not installed as a package (``registered.own``).
    """
    own = sorted(registered.own(GROUP).items())
    return Catalog(
        tuple(InstalledExtension(point.load(), BUILTIN_SOURCE, True) for _, point in own)
    )


def discover(points: Iterable[EntryPoint] | None = None) -> Catalog:
    """The built-ins and every extension installed in group ``cove.extensions``.

    Args:
        points: The entry points to load (default: those installed in this environment).

    Returns:
        The catalog; plugins that failed to load are its ``problems`` (also logged).
    """
    found = list(builtin_catalog().installed)
    problems: list[PluginProblem] = []
    chosen = registered.installed(GROUP).values() if points is None else points
    for point in sorted(chosen, key=lambda p: p.name):
        source = _source(point)
        try:
            extension = _load(point, [item.extension for item in found])
        except BadPlugin as exc:
            log.warning("extension %s from %s left out: %s", point.name, source, exc)
            problems.append(PluginProblem(point.name, source, str(exc)))
            continue
        found.append(InstalledExtension(extension, source))
    return Catalog(tuple(found), tuple(problems))


def _load(point: EntryPoint, accepted: Sequence[Extension]) -> Extension:
    """The extension of one entry point, checked against those accepted before it."""
    try:
        loaded = point.load()
    except Exception as exc:
        raise BadPlugin(f"it cannot be imported: {type(exc).__name__}: {exc}") from None
    extension = _as_extension(point.name, loaded)
    if any(e.name == extension.name for e in accepted):
        raise BadPlugin(f"the name {extension.name!r} is already taken by another extension")
    try:
        ExtensionRegistry((*accepted, extension))
    except ConfigError as exc:
        raise BadPlugin(str(exc)) from None
    return extension


def _as_extension(name: str, loaded: object) -> Extension:
    if isinstance(loaded, Extension):
        if loaded.name != name:
            raise BadPlugin(
                f"its entry point is called {name!r} but the extension {loaded.name!r}: "
                "they must be the same"
            )
        checked_effect(name, loaded.effect)
        for function in loaded.functions:
            if function.effect is not None:
                checked_effect(function.name, function.effect)
        return loaded
    if callable(loaded) and not isinstance(loaded, type):
        return from_function(name, loaded)
    raise BadPlugin(
        f"it is a {type(loaded).__name__}, not an Extension or a function with type hints"
    )


def _source(point: EntryPoint) -> str:
    dist = point.dist
    where = f"{dist.name} {dist.version}" if dist is not None else "an unnamed distribution"
    return f"{where}: {point.value}"
