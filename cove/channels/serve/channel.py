"""What ``cove serve`` runs: channels that start and stop inside one shared event loop.

Every channel, cove's own (``web``, ``telegram``, ``mcp``) and an installed package's, is an
entry point of the group ``cove.channels`` naming a factory ``factory(convs, settings)``
(``channels.py``). A channel is anything with a ``name`` and ``async start()`` / ``async
stop()``: ``start`` returns once it serves (it keeps working in tasks of its own), ``stop``
returns once it stopped taking input and ended its tasks. They all share the service's one
``Conversations``, so a turn one channel runs shows live in another through ``watch``.

Beyond that shape a channel may have (looked up by name, so a plain class needs neither):

- ``routes``: Starlette routes the service serves on its one HTTP server, behind the same
  login, ``Host`` and ``Origin`` checks as the web (``security.Guard``) and refused with 503
  while the service drains. Their paths are ``/NAME`` or lie under ``/NAME/`` — except the web
  channel's, which serves every other path — and a Starlette app among them has its lifespan
  run by the server's;
- ``count_with(counts)``: called before ``start`` with the ``ChannelCounts`` of its name in
  ``/metrics``, to count what it receives and which of its calls out fail.

A factory that sets ``every_process = True`` on itself (the web's) runs in each process of
``cove serve --processes N``; every other channel runs in the first one only, and requests for
its paths are forwarded there.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from starlette.routing import BaseRoute

from cove.config import Settings
from cove.conversation import Conversations
from cove.errors import ConfigError


class Channel(Protocol):
    """A surface the service runs (the web, the Telegram bot, MCP, a package's channel)."""

    name: str

    async def start(self) -> None:
        """Start serving; returns once the channel takes input."""

    async def stop(self) -> None:
        """Stop taking input and end the channel's tasks."""


ChannelFactory = Callable[[Conversations, Settings], Channel]
"""What a ``cove.channels`` entry point names: the channel over the service's
``Conversations`` and settings."""


class ChannelCounts(Protocol):
    """A channel's counters in the service's ``/metrics`` (``count_with``)."""

    def received(self) -> None:
        """One more input received (a message, an update, a request)."""

    def failed(self, call: str) -> None:
        """One more call out that failed, by what was called (``sendMessage``)."""


def runs_everywhere(factory: ChannelFactory) -> bool:
    """Whether the channels ``factory`` makes run in every process (the web), not the first."""
    return bool(getattr(factory, "every_process", False))


def routes_of(channel: Channel, everywhere: bool) -> Sequence[BaseRoute]:
    """The HTTP routes ``channel`` serves, checked to lie under ``/NAME`` unless it runs in
    every process.

    Raises:
        ConfigError: A route outside ``/NAME``, or ``routes`` that are not Starlette routes.
    """
    routes: Sequence[Any] = getattr(channel, "routes", ())
    own = f"/{channel.name}"
    for route in routes:
        if not isinstance(route, BaseRoute):
            raise ConfigError(f"the channel {channel.name!r} serves a {type(route).__name__}")
        path = str(getattr(route, "path", ""))
        if not everywhere and path != own and not path.startswith(own + "/"):
            raise ConfigError(
                f"the channel {channel.name!r} serves {path or 'a route without a path'}: "
                f"its paths must be {own} or lie under {own}/"
            )
    return routes
