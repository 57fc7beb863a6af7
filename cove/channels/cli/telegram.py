"""``cove telegram``: run the Telegram bot (all of its logic lives in cove.channels.telegram)."""

from __future__ import annotations

import argparse
import os
from typing import Any

from cove.channels.cli.app import run_async
from cove.channels.cli.common import add_common
from cove.config import Settings


def register(sub: Any) -> None:
    """Add ``telegram``."""
    bot = sub.add_parser("telegram", help="run the Telegram bot (token: $TELEGRAM_BOT_TOKEN)")
    add_common(bot)
    bot.add_argument("--api-url", help="Bot API server (default $COVE_TELEGRAM_API_URL)")
    bot.add_argument("--allow", help="comma-separated user/chat ids (default $COVE_TELEGRAM_ALLOW)")
    bot.add_argument("--webhook-url", help="receive updates at this public URL instead of polling")
    bot.add_argument(
        "--webhook-listen", default="127.0.0.1:8443", metavar="HOST:PORT", help="webhook bind"
    )
    bot.set_defaults(handler=_run)


def _run(args: argparse.Namespace, settings: Settings) -> int:
    from cove.channels.telegram import TelegramOptions, run_bot
    from cove.channels.telegram.standalone import configure_logging

    host, _, port = args.webhook_listen.rpartition(":")
    options = TelegramOptions.load(
        settings,
        os.environ,
        api_url=args.api_url,
        allow=args.allow,
        webhook_url=args.webhook_url,
        webhook_host=host or "127.0.0.1",
        webhook_port=int(port) if port.isdigit() else 8443,
    )
    configure_logging(options.token)
    return run_async(run_bot(settings, options))
