"""``cove serve`` (channels in one service) and ``cove backup`` (a copy of the live database).

The logic lives in ``cove.channels.serve``; this module only parses arguments.
"""

from __future__ import annotations

import asyncio
from typing import Any

import click

from cove.channels.cli.base import command, examples, load_settings
from cove.channels.cli.extras import require
from cove.errors import ConfigError


@command(
    "serve",
    short_help="Run the web, Telegram and/or MCP channels as one service.",
    epilog=examples(
        "cove serve                         the web channel on 127.0.0.1:8000",
        "cove serve --web --telegram --port 9000 --log-format json",
        "cove serve --web --mcp             the web, and MCP clients at /mcp",
        "cove serve --processes 4           four processes on one port",
    ),
)
@click.option("--web", is_flag=True, help="Serve the web channel (the default).")
@click.option("--telegram", is_flag=True, help="Run the Telegram bot.")
@click.option(
    "--mcp", is_flag=True, help="Serve MCP over streamable HTTP at /mcp (behind the login)."
)
@click.option(
    "--channel",
    "channels",
    multiple=True,
    metavar="NAME",
    help="Also run this channel: web, telegram, mcp, or one an installed package adds "
    "(entry-point group cove.channels).",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=8000,
    show_default=True,
    help="Port; 0 picks a free one.",
)
@click.option(
    "--allow-host",
    "allow_hosts",
    multiple=True,
    metavar="NAME",
    help="Also answer this Host name on a loopback bind (a reverse proxy's public name).",
)
@click.option(
    "--grace",
    type=float,
    default=None,
    metavar="SECONDS",
    help="How long running turns may finish after SIGTERM before they are cancelled "
    "(default: the shutdown_grace_s setting).",
)
@click.option(
    "--processes",
    type=click.IntRange(0, 256),
    default=None,
    metavar="N",
    help="Processes serving the one port, each conversation's turns in one of them "
    "(default: the serve_processes setting; 0 there: one per core).",
)
@click.option(
    "--log-level", default="INFO", show_default=True, help="DEBUG, INFO, WARNING or ERROR."
)
@click.option(
    "--log-format",
    type=click.Choice(["auto", "json", "text"]),
    default="auto",
    show_default=True,
    help="JSON lines, readable text, or auto: text on a terminal.",
)
def serve_command(
    web: bool,
    telegram: bool,
    mcp: bool,
    channels: tuple[str, ...],
    host: str,
    port: int,
    allow_hosts: tuple[str, ...],
    grace: float | None,
    processes: int | None,
    log_level: str,
    log_format: str,
) -> int:
    """Run the web, Telegram and/or MCP channels as one service, with health, metrics, logs.

    The web needs a login on every address: the URL printed at start carries a new token, or
    set COVE_WEB_TOKEN (required off loopback; a configured token is never printed). Scripts
    and MCP clients (--mcp: at /mcp) send Authorization: Bearer <token>. /healthz, /readyz
    and /metrics need no login; /readyz gives its details to logged-in callers only.
    """
    require("serve", "cove serve")
    from cove.channels.serve import ServeOptions, run_service
    from cove.channels.serve.logs import configure_logging
    from cove.channels.serve.supervisor import default_processes

    settings = load_settings()
    flags = {"web": web, "telegram": telegram, "mcp": mcp}
    chosen = tuple(dict.fromkeys([*(name for name, on in flags.items() if on), *channels]))
    chosen = chosen or ("web",)
    for name, extra in (("mcp", "mcp"), ("telegram", "telegram")):
        if name in chosen:
            require(extra, f"cove serve --{name}")
    json_lines = {"auto": None, "json": True, "text": False}[log_format]
    configure_logging(log_level, json_lines=json_lines)
    options = ServeOptions(
        channels=chosen,
        host=host,
        port=port,
        grace_s=settings.serve.shutdown_grace_s if grace is None else max(0.0, grace),
        allow_hosts=allow_hosts,
        # Off loopback every channel but the bot may serve pages behind the login.
        **_token(settings.web.token, host, any(name != "telegram" for name in chosen)),
    )
    count = settings.serve.processes if processes is None else processes
    if "web" not in chosen:  # only the web is served by every process; the others run once
        count = 1
    return run_service(settings, options, count or default_processes())


@command(
    "backup",
    short_help="Copy the live database consistently to PATH.",
    epilog=examples("cove backup ~/cove-backup.db"),
)
@click.argument("path")
def backup_command(path: str) -> int:
    """Copy the live database consistently to PATH (a new file; it must not exist)."""
    from cove.channels.backup import run_backup

    code: int = asyncio.run(run_backup(load_settings(), path))
    return code


def _token(configured: str | None, host: str, web: bool) -> dict[str, Any]:
    """The configured ``web_token`` (``COVE_WEB_TOKEN``, never printed), else a new token
    printed in the login URL; off loopback the web needs a configured one (a service must not
    print a made-up secret there).
    """
    from cove.channels.web.security import is_loopback, new_token

    if configured is not None:
        return {"token": configured, "token_configured": True}
    if web and not is_loopback(host):
        raise ConfigError(
            f"serving HTTP on {host} needs a login token: set COVE_WEB_TOKEN "
            "(16 characters or more)",
            setting="web_token",
        )
    return {"token": new_token(), "token_configured": False}
