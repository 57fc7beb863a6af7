"""The ``cove`` entry point: the click group with every command module registered on it.

Each command module registers its commands on import (``base.command``); ``COMMANDS`` names
the module of each command, imported when the command is first used, so a command imports only
what it needs (``cove --version`` none of them). Adding a command is adding its module and its
line below. Exit codes are listed in ``exits``.
"""

from __future__ import annotations

from collections.abc import Sequence

import click

from cove.channels.cli.base import cove
from cove.channels.cli.exits import EXIT_CANCELLED

__all__ = ["COMMANDS", "cove", "main"]

#: Each command, by the module (in ``cove.channels.cli``) whose import registers it.
COMMANDS: dict[str, str] = {
    "backup": "serve",
    "chat": "chat",
    "delete": "manage",
    "demo": "demo",
    "doctor": "doctor",
    "exec": "execute",
    "export": "inspect",
    "extensions": "extensions",
    "fork": "manage",
    "list": "inspect",
    "mcp": "mcp",
    "migrate": "migrate",
    "models": "models",
    "policy": "policy",
    "replay": "manage",
    "run": "run",
    "search": "inspect",
    "serve": "serve",
    "show": "inspect",
    "telegram": "telegram",
    "tui": "tui",
    "vars": "inspect",
    "watch": "watch",
    "web": "web",
}
cove.modules = {name: f"cove.channels.cli.{module}" for name, module in COMMANDS.items()}


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``cove`` command line; returns the process exit code."""
    try:
        code = cove.main(
            args=list(argv) if argv is not None else None, prog_name="cove", standalone_mode=False
        )
    except click.ClickException as exc:  # bad usage: click's message and its exit code (2)
        exc.show()
        return exc.exit_code
    except click.Abort:
        click.echo("interrupted", err=True)
        return EXIT_CANCELLED
    return code if isinstance(code, int) else 0
