"""What ``cove serve`` runs: channels that start and stop inside one shared event loop.

A channel is anything with a ``name`` and ``async start()`` / ``async stop()``: ``start``
returns once it serves (it keeps working in tasks of its own), ``stop`` returns once it stopped
taking input and ended its tasks. They all share the service's one ``Conversations``, so a turn
one channel runs shows live in another through ``watch``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from cove.channels.serve.metrics import ServeMetrics
from cove.config import Settings
from cove.conversation import Conversations


class Channel(Protocol):
    """A surface the service runs (the HTTP server, the Telegram bot)."""

    name: str

    async def start(self) -> None:
        """Start serving; returns once the channel takes input."""

    async def stop(self) -> None:
        """Stop taking input and end the channel's tasks."""


def telegram_channel(convs: Conversations, settings: Settings, metrics: ServeMetrics) -> Channel:
    """The Telegram channel over the service's ``Conversations``, configured as ``cove
    telegram`` is (``settings.telegram``: the token from ``TELEGRAM_BOT_TOKEN``), with its
    updates and failed Bot API calls counted in the service's metrics.

    Raises:
        ConfigError: The Telegram channel has no bot token.
    """
    from cove.channels.telegram import TelegramChannel

    channel = TelegramChannel(convs, settings.telegram)
    channel.observe_updates(
        on_update=metrics.telegram_updates.inc, on_api_error=_api_error(metrics)
    )
    return channel


def _api_error(metrics: ServeMetrics) -> Callable[[str], None]:
    def count(method: str) -> None:
        metrics.telegram_errors.labels(method).inc()

    return count
