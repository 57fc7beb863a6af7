"""Channels that installed packages add to ``cove serve``, through the entry-point group
``cove.channels``.

An entry point names a factory ``factory(convs, settings) -> channel``: the channel has a
``name`` and ``async start()`` / ``async stop()`` (``channel.Channel``) and works on the
service's one ``Conversations``, as the built-in channels do. ``cove serve --channel NAME``
runs it beside the others; a name that is not installed, or a factory that cannot be loaded,
stops ``cove serve`` before anything starts, saying why.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib.metadata import entry_points

from cove.channels.serve.channel import Channel
from cove.config import Settings
from cove.conversation import Conversations
from cove.errors import ConfigError

#: The entry-point group packages add ``cove serve`` channels through.
GROUP = "cove.channels"

ChannelFactory = Callable[[Conversations, Settings], Channel]


def installed_channels() -> list[str]:
    """The names of the channels installed packages add, sorted."""
    return sorted(point.name for point in entry_points(group=GROUP))


def channel_factory(name: str) -> ChannelFactory:
    """The factory of the installed channel ``name``.

    Raises:
        ConfigError: No channel of that name is installed, or it cannot be loaded.
    """
    points = [point for point in entry_points(group=GROUP) if point.name == name]
    if not points:
        known = ", ".join(installed_channels()) or "none"
        raise ConfigError(f"no channel named {name!r} is installed (installed: {known})")
    try:
        factory = points[0].load()
    except Exception as exc:
        raise ConfigError(
            f"the channel {name!r} cannot be loaded: {type(exc).__name__}: {exc}"
        ) from None
    if not callable(factory):
        raise ConfigError(f"the channel {name!r} is a {type(factory).__name__}, not a factory")
    return factory  # type: ignore[no-any-return]
