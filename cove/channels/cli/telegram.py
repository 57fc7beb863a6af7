"""``cove telegram``: run the Telegram bot (all of its logic lives in cove.channels.telegram)."""

from __future__ import annotations

import asyncio

import click

from cove.channels.cli.base import command, examples, load_settings
from cove.channels.cli.extras import require
from cove.errors import ConfigError


@command(
    "telegram",
    short_help="Run the Telegram bot (token: $TELEGRAM_BOT_TOKEN).",
    epilog=examples(
        "TELEGRAM_BOT_TOKEN=... cove telegram --allow 123456789",
        "cove telegram --webhook-url https://bot.example.org/tg --webhook-listen 0.0.0.0:8443",
    ),
)
@click.option("--api-url", default=None, help="Bot API server (default $COVE_TELEGRAM_API_URL).")
@click.option(
    "--allow",
    default=None,
    help="Comma-separated user/chat ids or @usernames (default $COVE_TELEGRAM_ALLOW).",
)
@click.option(
    "--webhook-url", default=None, help="Receive updates at this public URL instead of polling."
)
@click.option(
    "--webhook-listen",
    default=None,
    metavar="HOST:PORT",
    help="Where the webhook server binds (default $COVE_TELEGRAM_WEBHOOK_HOST and "
    "$COVE_TELEGRAM_WEBHOOK_PORT, else 127.0.0.1:8443).",
)
def telegram_command(
    api_url: str | None, allow: str | None, webhook_url: str | None, webhook_listen: str | None
) -> int:
    """Run the Telegram bot: each chat owns a sandboxed conversation.

    Only the users and chats on the allow-list are answered: a user id in private chats, a
    group only when the group's chat id is listed. An empty list refuses everyone.
    """
    require("telegram", "cove telegram")
    from cove.channels.telegram import run_bot
    from cove.channels.telegram.secret import bot_token
    from cove.channels.telegram.standalone import configure_logging

    settings = load_settings(
        telegram_api_url=api_url,
        telegram_allow=allow,
        telegram_webhook_url=webhook_url,
        **_listen(webhook_listen),
    )
    configure_logging(bot_token(settings.telegram))
    code: int = asyncio.run(run_bot(settings))
    return code


def _listen(given: str | None) -> dict[str, str | None]:
    """``--webhook-listen HOST:PORT`` as the settings it overrides (none when not given).

    Raises:
        ConfigError: Not HOST:PORT.
    """
    if given is None:
        return {}
    host, _, port = given.rpartition(":")
    if not host or not port.isdigit():
        raise ConfigError(f"--webhook-listen expects HOST:PORT, got {given!r}")
    return {"telegram_webhook_host": host, "telegram_webhook_port": port}
