"""The ``cove`` click group, the flags every command accepts, and the one place errors become
exit codes.

A command is one decorated function in its own module::

    @command(epilog=examples('cove hello'))
    def hello() -> int:
        ...

``command`` registers it on the group and adds the global ``--db`` and ``--model`` flags, so they
work before or after the command name. A command returns its exit code; a ``CoveError`` it
raises is printed on stderr and mapped to an exit code by ``exit_code_for``.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

import click

from cove import registered
from cove.channels.cli.exits import EXIT_CANCELLED, EXIT_CODES_HELP, exit_code_for
from cove.channels.cli.plugin_commands import GROUP, load_command, own_command, plugin_commands
from cove.errors import CoveError

if TYPE_CHECKING:
    from cove.config import Settings

F = TypeVar("F", bound=Callable[..., Any])

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


class CoveGroup(click.Group):
    """A group whose commands return exit codes and whose ``CoveError`` become exit codes.

    Its commands are the entry points of the group ``cove.commands``: cove's own (declared in
    its ``pyproject.toml``), then those installed packages add (``plugin_commands.py``); a
    name both use is cove's. A command is imported when first used, so ``cove list`` never
    imports what ``cove web`` needs, and installed packages are looked through only for a name
    that is not cove's or to list every command (``cove --help``).
    """

    def list_commands(self, ctx: click.Context) -> list[str]:
        """Every command's name, cove's own and installed packages'."""
        return sorted({*self.commands, *registered.own(GROUP), *plugin_commands()})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        """The command named ``cmd_name`` (cove's own first), imported now if need be."""
        if cmd_name not in self.commands:
            own = registered.own(GROUP).get(cmd_name)
            if own is not None:
                self.commands[cmd_name] = own_command(own)
            elif cmd_name in plugin_commands():
                self.commands[cmd_name] = load_command(plugin_commands()[cmd_name])
        return self.commands.get(cmd_name)

    def invoke(self, ctx: click.Context) -> Any:
        """Run the command; map its return value and its errors to the process exit code."""
        try:
            code = super().invoke(ctx)
        except CoveError as exc:
            click.echo(f"cove: {exc}", err=True)
            ctx.exit(exit_code_for(exc))
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
            ctx.exit(EXIT_CANCELLED)
        if isinstance(code, int) and code:
            ctx.exit(code)
        return code


def _remember(name: str) -> Callable[[click.Context, click.Parameter, Any], None]:
    def store(ctx: click.Context, param: click.Parameter, value: Any) -> None:
        if value is not None:
            ctx.meta[f"cove.{name}"] = value

    return store


def global_options(f: F) -> F:
    """Add ``--db`` and ``--model`` (they may come before or after the command name)."""
    f = click.option(
        "--db",
        metavar="PATH|URL",
        expose_value=False,
        callback=_remember("db"),
        help="Database file, or a postgresql:// URL (default: $COVE_DB or the user data "
        "directory).",
    )(f)
    f = click.option(
        "-m",
        "--model",
        metavar="NAME",
        expose_value=False,
        callback=_remember("model"),
        help="Model name (default: $COVE_MODEL); cove run and cove chat remember it with the "
        "conversation.",
    )(f)
    return f


@click.group(
    cls=CoveGroup,
    context_settings=CONTEXT,
    epilog=EXIT_CODES_HELP,
)
@click.option(
    "--version",
    "-V",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=lambda ctx, _, shown: _show_version(ctx) if shown else None,
    help="Show the version and exit.",
)
@global_options
def cove() -> None:
    """A conversational Python sandbox: the model answers by writing code, and every step is
    versioned in one SQLite database.

    \b
    Examples:
      cove run "What is the 20th Fibonacci number?"
      cove run -c "and the 30th?"          continue the most recent conversation
      cat data.csv | cove run "summarise this"
      cove chat                            talk interactively
      cove list                            your conversations
      cove show abc123                     every iteration, block and result
      cove demo                            an offline tour, no API key needed
    """
    warn_unknown_variables(os.environ)


def _show_version(ctx: click.Context) -> None:
    from cove.channels.cli.version import version_line  # the same line as the fast path's

    click.echo(version_line())
    ctx.exit()


def command(name: str, **kwargs: Any) -> Callable[[Callable[..., Any]], click.Command]:
    """Make a function a ``cove`` command named ``name``, with the global flags; its entry
    point (``pyproject.toml``, group ``cove.commands``) puts it on the group."""

    def make(f: Callable[..., Any]) -> click.Command:
        kwargs.setdefault("context_settings", CONTEXT)
        decorate = cast(
            Callable[[Callable[..., Any]], click.Command], click.command(name, **kwargs)
        )
        return decorate(global_options(f))

    return make


def examples(*lines: str) -> str:
    """A help epilog listing example invocations, one per line, kept as written."""
    return "\b\nExamples:\n" + "\n".join(f"  {line}" for line in lines)


def load_settings(**overrides: Any) -> Settings:
    """Settings from the environment and the global flags of the current command."""
    return _settings(click.get_current_context().meta.get("cove.model"), overrides)


def conversation_settings(**overrides: Any) -> Settings:
    """``load_settings`` for ``cove run`` and ``cove chat``: there ``-m/--model`` names the
    conversation's model (``chosen_model``: remembered with it and checked against what the
    endpoint offers) instead of replacing the configured one."""
    return _settings(None, overrides)


def _settings(model: str | None, overrides: dict[str, Any]) -> Settings:
    from cove.config import Settings  # not for --version or --help

    meta = click.get_current_context().meta
    return Settings.load(db_path=meta.get("cove.db"), model=model, **overrides)


def chosen_model() -> str | None:
    """The model ``-m/--model`` names for the current command, or None."""
    model = click.get_current_context().meta.get("cove.model")
    return None if model is None else str(model)


def unknown_variables(env: Mapping[str, str]) -> list[str]:
    """The ``COVE_*`` variables in ``env`` that no setting reads (``cove.config``'s list)."""
    from cove.config import unknown_env_vars  # not for --version or --help

    return unknown_env_vars(env)


def warn_unknown_variables(env: Mapping[str, str]) -> None:
    """Warn once on stderr about every ``COVE_*`` variable that no setting reads."""
    for name in unknown_variables(env):
        click.echo(f"cove: warning: {name} matches no setting (ignored)", err=True)


def program() -> str:
    """How to invoke ``cove`` again: ``cove`` when that is on PATH, else the path used now."""
    used = sys.argv[0]
    if Path(used).name != "cove" or shutil.which("cove") == os.path.abspath(used):
        return "cove"
    return os.path.relpath(used)
