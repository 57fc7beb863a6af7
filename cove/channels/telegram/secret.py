"""The bot token, held so that it never shows.

The token is the ``telegram_token`` setting: ``TELEGRAM_BOT_TOKEN`` (or ``COVE_TELEGRAM_TOKEN``,
or ``token`` in the ``[telegram]`` table of the config file). ``bot_token`` hands it over in a
``Secret`` that never shows in ``repr``, ``str``, logs or error messages; the bot never writes
it anywhere.
"""

from __future__ import annotations

from cove.config import TelegramSettings
from cove.errors import ConfigError


class Secret:
    """A string that never shows itself; ``reveal()`` hands it to the one place that needs it."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        """The secret value."""
        return self._value

    def __repr__(self) -> str:
        return "Secret('***')"

    __str__ = __repr__


def bot_token(settings: TelegramSettings) -> Secret:
    """The bot's token from the Telegram settings.

    Raises:
        ConfigError: No token is configured.
    """
    if not settings.token:
        raise ConfigError(
            "set TELEGRAM_BOT_TOKEN to the bot's token (from @BotFather)", setting="telegram_token"
        )
    return Secret(settings.token)
