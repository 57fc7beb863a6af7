"""What ``cove serve`` runs: channels that start and stop inside one shared event loop.

A channel is anything with a ``name`` and ``async start()`` / ``async stop()``: ``start``
returns once it serves (it keeps working in tasks of its own), ``stop`` returns once it stopped
taking input and ended its tasks. They all share the service's one ``Conversations``, so a turn
one channel runs shows live in another through ``watch``.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from typing import Protocol

from cove.channels.serve.metrics import ServeMetrics
from cove.config import Settings
from cove.conversation import Conversations
from cove.errors import ConfigError


class Channel(Protocol):
    """A surface the service runs (the HTTP server, the Telegram bot)."""

    name: str

    async def start(self) -> None:
        """Start serving; returns once the channel takes input."""

    async def stop(self) -> None:
        """Stop taking input and end the channel's tasks."""


def telegram_channel(convs: Conversations, settings: Settings, metrics: ServeMetrics) -> Channel:
    """The Telegram channel over the service's ``Conversations``, configured as ``cove
    telegram`` is (the token from ``TELEGRAM_BOT_TOKEN``, the rest from the settings).

    A channel offering ``observe_updates(on_update=, on_api_error=)`` has its updates and
    failed Bot API calls counted in the service's metrics; otherwise the updates its
    python-telegram-bot application receives are counted.

    Raises:
        ConfigError: This build has no Telegram channel, or it is not configured.
    """
    try:
        module = importlib.import_module("cove.channels.telegram")
    except ImportError as exc:
        raise ConfigError("this cove has no Telegram channel (cove.channels.telegram)") from exc
    options = module.TelegramOptions.load(settings, os.environ)
    channel: Channel = module.TelegramChannel(convs, options)
    channel.name = "telegram"
    hooks = getattr(channel, "observe_updates", None)
    if callable(hooks):
        hooks(on_update=metrics.telegram_updates.inc, on_api_error=_api_error(metrics))
    else:
        _count_updates(channel, metrics)
    return channel


def _count_updates(channel: object, metrics: ServeMetrics) -> None:
    """Count every update the bot's application receives, ahead of its own handlers."""
    from telegram import Update
    from telegram.ext import Application, TypeHandler

    app = getattr(channel, "app", None)
    if not isinstance(app, Application):
        return

    async def count(update: object, context: object) -> None:
        metrics.telegram_updates.inc()

    # A group of its own: every group runs, so the bot's handlers still see each update.
    app.add_handler(TypeHandler(Update, count), group=-1)


def _api_error(metrics: ServeMetrics) -> Callable[[str], None]:
    def count(method: str) -> None:
        metrics.telegram_errors.labels(method).inc()

    return count
