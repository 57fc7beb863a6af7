"""The Telegram bot as a channel of ``cove serve`` (the entry point ``telegram`` of the group
``cove.channels``)."""

from __future__ import annotations

from cove.channels.telegram.channel import TelegramChannel
from cove.config import Settings
from cove.conversation import Conversations


def telegram_channel(convs: Conversations, settings: Settings) -> TelegramChannel:
    """The bot over the service's ``Conversations``, configured as ``cove telegram`` is
    (``settings.telegram``: the token from ``TELEGRAM_BOT_TOKEN``).

    Raises:
        ConfigError: The Telegram channel has no bot token.
    """
    return TelegramChannel(convs, settings.telegram)
