"""``cove`` commands that installed packages add, through the entry-point group ``cove.commands``.

An entry point names a ``click.Command``; its name is the command's (``cove notes`` for
``notes = "cove_notes.cli:notes"``). cove's own commands are entry points of this group too
(``registered.own``). A plugin command is loaded only when it is run or the help lists the
commands, like cove's own. cove's own commands win a name both use. A command that
cannot be loaded is still listed, and running it says why (exit 1): one broken plugin never
breaks the others or cove.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

import click

from cove import registered
from cove.channels.cli.exits import EXIT_FAILED

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

#: The entry-point group packages add ``cove`` commands through.
GROUP = "cove.commands"


@functools.cache
def plugin_commands() -> dict[str, EntryPoint]:
    """The command entry points installed packages add, by command name (read once per
    process, and only when a name is not cove's own or every command is listed)."""
    return registered.installed(GROUP)


def own_command(point: EntryPoint) -> click.Command:
    """One of cove's own commands (``pyproject.toml``): it must load, so nothing is caught.

    Raises:
        TypeError: The entry point names something that is not a click command.
    """
    loaded = point.load()
    if not isinstance(loaded, click.Command):
        raise TypeError(f"cove's command {point.name!r} is a {type(loaded).__name__}")
    return loaded


def load_command(point: EntryPoint) -> click.Command:
    """The command an entry point names, or one that explains why it cannot be loaded."""
    try:
        loaded = point.load()
    except Exception as exc:
        return _broken(point, f"it cannot be imported: {type(exc).__name__}: {exc}")
    if not isinstance(loaded, click.Command):
        return _broken(point, f"it is a {type(loaded).__name__}, not a click command")
    loaded.name = point.name
    return loaded


def _broken(point: EntryPoint, why: str) -> click.Command:
    source = f"{point.dist.name} {point.dist.version}" if point.dist else point.value
    message = f"cove: the command {point.name!r} from {source} cannot be loaded: {why}"

    def fail() -> int:
        click.echo(message, err=True)
        return EXIT_FAILED

    return click.Command(point.name, callback=fail, help=f"(cannot be loaded: {why})")
