"""What cove itself and installed packages register through entry points, cove's own first.

cove's built-in commands (group ``cove.commands``), ``cove serve`` channels (``cove.channels``)
and sandbox extensions (``cove.extensions``) are entry points of its own distribution, declared
in its ``pyproject.toml`` exactly as a plugin declares its own (``docs/plugins.md``). ``own``
reads only cove's distribution — one small file, found without scanning the others — so a
built-in is found at the cost of a dictionary lookup once it is read; ``installed`` reads every
other distribution's, which only a plugin's name, a listing of all, or a catalogue needs.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from cove.errors import ConfigError

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

#: The distribution cove itself is installed as.
DISTRIBUTION = "cove"


@functools.cache
def own(group: str) -> dict[str, EntryPoint]:
    """cove's own entry points of ``group``, by name (read once per process).

    Raises:
        ConfigError: cove is not installed as a package (run from a source tree without
            ``pip install``), so its built-ins cannot be found.
    """
    # Imported here, not by ``cove --version``, which needs no entry point at all.
    from importlib.metadata import PackageNotFoundError, distribution

    try:
        found = distribution(DISTRIBUTION).entry_points.select(group=group)
    except PackageNotFoundError as exc:
        raise ConfigError(
            "cove is not installed as a package, so its own commands, channels and extensions"
            " cannot be found: install it (pip install -e . in its source tree)"
        ) from exc
    return {point.name: point for point in found}


def installed(group: str) -> dict[str, EntryPoint]:
    """The entry points of ``group`` that other installed packages add, by name (read afresh:
    a package put on the path meanwhile is found; cove's own are ``own``'s)."""
    from importlib.metadata import entry_points

    return {
        point.name: point
        for point in entry_points(group=group)
        if point.dist is None or point.dist.name != DISTRIBUTION
    }
