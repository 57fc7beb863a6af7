"""The channels ``cove serve`` can run: the entry points of the group ``cove.channels``.

cove's own (``web``, ``telegram``, ``mcp``) are entry points of its distribution, declared in
its ``pyproject.toml`` as a package declares its own (``docs/plugins.md``), and a name both use
is cove's. An entry point names a factory ``factory(convs, settings) -> channel``
(``channel.py``). A name that is not installed, or a factory that cannot be loaded, stops
``cove serve`` before anything starts, saying why.
"""

from __future__ import annotations

from importlib.metadata import EntryPoint

from cove import registered
from cove.channels.serve.channel import ChannelFactory
from cove.errors import ConfigError

#: The entry-point group of ``cove serve`` channels, cove's own and installed packages'.
GROUP = "cove.channels"


def installed_channels() -> list[str]:
    """The names of every channel ``cove serve`` can run, cove's own and packages', sorted."""
    return sorted({*registered.own(GROUP), *registered.installed(GROUP)})


def channel_factory(name: str) -> ChannelFactory:
    """The factory of the channel ``name`` (cove's own first).

    Raises:
        ConfigError: No channel of that name is installed, or it cannot be loaded.
    """
    point = registered.own(GROUP).get(name) or registered.installed(GROUP).get(name)
    if point is None:
        known = ", ".join(installed_channels())
        raise ConfigError(f"no channel named {name!r} is installed (installed: {known})")
    return _load(point)


def _load(point: EntryPoint) -> ChannelFactory:
    try:
        factory = point.load()
    except Exception as exc:
        raise ConfigError(
            f"the channel {point.name!r} cannot be loaded: {type(exc).__name__}: {exc}"
        ) from None
    if not callable(factory):
        raise ConfigError(
            f"the channel {point.name!r} is a {type(factory).__name__}, not a factory"
        )
    return factory  # type: ignore[no-any-return]
