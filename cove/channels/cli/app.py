"""The ``cove`` entry point: the click group, whose commands are the entry points of the
group ``cove.commands`` (cove's own in its ``pyproject.toml``, then installed packages'), each
imported when first used (``cove --version`` imports none of them). Adding a command is adding
its module and its entry point. Exit codes are listed in ``exits``.
"""

from __future__ import annotations

from collections.abc import Sequence

import click

from cove.channels.cli.base import cove
from cove.channels.cli.exits import EXIT_CANCELLED

__all__ = ["cove", "main"]


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
