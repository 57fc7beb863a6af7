"""``cove serve`` (channels in one service) and ``cove backup`` (a copy of the live database).

The logic lives in ``cove.channels.serve``; this module only parses arguments.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from cove.channels.cli.app import run_async
from cove.channels.cli.common import add_common
from cove.channels.cli.web import login_token
from cove.config import Settings
from cove.errors import ConfigError


def register(sub: Any) -> None:
    """Add ``serve`` and ``backup``."""
    serve = sub.add_parser(
        "serve",
        help="run the web and/or Telegram channels as one service (health, metrics, logs)",
    )
    add_common(serve)
    serve.add_argument("--web", action="store_true", help="serve the web channel (default)")
    serve.add_argument("--telegram", action="store_true", help="run the Telegram bot")
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8000, help="port; 0 picks a free one")
    serve.add_argument(
        "--grace",
        type=float,
        default=None,
        metavar="SECONDS",
        help="how long running turns may finish after SIGTERM before they are cancelled "
        "(default: the shutdown_grace_s setting)",
    )
    serve.add_argument("--log-level", default="INFO", help="DEBUG, INFO, WARNING or ERROR")
    serve.add_argument(
        "--log-format",
        choices=("auto", "json", "text"),
        default="auto",
        help="JSON lines, readable text, or auto: text on a terminal (default)",
    )
    serve.set_defaults(handler=_serve)

    backup = sub.add_parser("backup", help="copy the live database consistently to PATH")
    add_common(backup)
    backup.add_argument("path", help="the new file to write (must not exist)")
    backup.set_defaults(handler=_backup)


def _serve(args: argparse.Namespace, settings: Settings) -> int:
    from cove.channels.serve import ServeOptions, Service
    from cove.channels.serve.logs import configure_logging

    web = args.web or not args.telegram
    json_lines = {"auto": None, "json": True, "text": False}[args.log_format]
    configure_logging(args.log_level, json_lines=json_lines)
    options = ServeOptions(
        web=web,
        telegram=args.telegram,
        host=args.host,
        port=args.port,
        grace_s=settings.channels.shutdown_grace_s if args.grace is None else max(0.0, args.grace),
        token=_token(args.host) if web else None,
    )
    return run_async(Service(settings, options).run())


def _token(host: str) -> str | None:
    """``COVE_WEB_TOKEN``; required off loopback (a service must not print a made-up one)."""
    token = login_token(host, dict(os.environ))
    if token is not None and not os.environ.get("COVE_WEB_TOKEN"):
        raise ConfigError(
            f"serving the web on {host} needs a login token: set COVE_WEB_TOKEN "
            "(16 characters or more)"
        )
    return token


def _backup(args: argparse.Namespace, settings: Settings) -> int:
    from cove.channels.serve.backup import run_backup

    return run_async(run_backup(settings, args.path))
