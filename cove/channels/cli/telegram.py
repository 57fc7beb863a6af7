"""``cove telegram``: run the Telegram bot (all of its logic lives in cove.channels.telegram)."""

from __future__ import annotations

import asyncio
import os

import click

from cove.channels.cli.base import command, examples, load_settings
from cove.channels.cli.extras import require


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
    default="127.0.0.1:8443",
    show_default=True,
    metavar="HOST:PORT",
    help="Where the webhook server binds.",
)
def telegram_command(
    api_url: str | None, allow: str | None, webhook_url: str | None, webhook_listen: str
) -> int:
    """Run the Telegram bot: each chat owns a sandboxed conversation.

    Only the users and chats on the allow-list are answered: a user id in private chats, a
    group only when the group's chat id is listed. An empty list refuses everyone.
    """
    require("telegram", "cove telegram")
    from cove.channels.telegram import TelegramOptions, run_bot
    from cove.channels.telegram.standalone import configure_logging

    settings = load_settings()
    host, _, port = webhook_listen.rpartition(":")
    options = TelegramOptions.load(
        settings,
        os.environ,
        api_url=api_url,
        allow=allow,
        webhook_url=webhook_url,
        webhook_host=host or "127.0.0.1",
        webhook_port=int(port) if port.isdigit() else 8443,
    )
    configure_logging(options.token)
    code: int = asyncio.run(run_bot(settings, options))
    return code
