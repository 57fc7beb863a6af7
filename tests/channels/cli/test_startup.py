"""Start-up: a command imports only what it needs (``cove --version`` none of the channels'
libraries, the model client or the sandbox; the reading commands nothing of the engine, the
sandbox or the model client either)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import click
import pytest

from cove import registered
from cove.channels.cli.app import cove
from tests.channels.cli.helpers import Cove

#: The libraries of the model client and the channels: only the commands that use them import
#: them, so not even ``cove --help`` (which imports every command module to list it).
LIBRARIES = ("openai", "starlette", "uvicorn", "textual", "telegram", "mcp")
#: Never imported by ``cove --version``.
HEAVY = (*LIBRARIES, "cove.environment.sandbox", "cove.engine", "cove.persistence")
#: Never imported by the reading commands: they open the store read-only and nothing else
#: (``cove.conversation.reading``), so neither the engine, the sandbox, the model client and
#: its libraries, nor the turn-driving half of the conversation layer.
NOT_FOR_READING = (
    *LIBRARIES,
    "httpx",
    "pydantic",
    "cove.engine",
    "cove.environment",
    "cove.conversation.conversations",
    "cove.conversation.turns",
)


def imported_by(*argv: str, env: Mapping[str, str] | None = None) -> set[str]:
    """The modules a fresh interpreter holds after running ``cove ARGV`` (which succeeded)."""
    probe = (
        "import json, sys\n"
        "from cove.channels.cli import main\n"
        f"code = main({list(argv)!r})\n"
        "print(json.dumps([code, sorted(sys.modules)]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
        env=None if env is None else dict(env),
    )
    code, modules = json.loads(done.stdout.splitlines()[-1])
    assert code == 0, done.stderr
    return set(modules)


def among(modules: set[str], packages: tuple[str, ...]) -> list[str]:
    return sorted(m for m in modules if any(m == p or m.startswith(p + ".") for p in packages))


def test_version_imports_no_command_and_no_heavy_library() -> None:
    modules = imported_by("--version")
    assert among(modules, HEAVY) == []
    assert not any(m.startswith("cove.conversation") for m in modules)
    assert not any(m.startswith("rich") for m in modules)
    assert "cove.channels.cli.inspect" not in modules
    assert "importlib.metadata" not in modules  # the version is cove.__version__
    assert "click" not in modules  # answered before the command line is parsed


def test_the_version_reads_the_same_with_other_flags_before_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from cove import __version__
    from cove.channels.cli import main

    for argv in (["--version"], ["-V"], ["--db", "unused.db", "--version"]):
        assert main(argv) == 0
        assert capsys.readouterr().out == f"cove {__version__}\n"


@pytest.fixture
def recorded(cli: Cove) -> str:
    """A database holding one conversation with a turn, a block and a variable; its id."""
    assert cli("exec", "primes = [2, 3, 5]").exit_code == 0
    return str(cli.json("list")[0]["id"])


@pytest.mark.parametrize(
    "argv",
    [
        ("list",),
        ("list", "--json"),
        ("show", "{id}"),
        ("show", "{id}", "--json"),
        ("vars", "{id}"),
        ("vars", "{id}", "primes"),
        ("search", "primes"),
        ("export", "{id}"),
    ],
    ids=" ".join,
)
def test_a_reading_command_imports_neither_the_engine_nor_a_model_client(
    cli: Cove, recorded: str, argv: tuple[str, ...]
) -> None:
    modules = imported_by(*(arg.format(id=recorded) for arg in argv), env=cli.env)
    assert "cove.conversation.reading" in modules  # it did read the database
    assert among(modules, NOT_FOR_READING) == []


def test_a_reading_command_on_a_missing_database_creates_nothing(cli: Cove, tmp_path: Path) -> None:
    modules = imported_by("list", env=cli.env)
    assert among(modules, NOT_FOR_READING) == []
    assert not cli.db.exists()


def test_help_lists_every_command_without_starting_a_channel() -> None:
    assert among(imported_by("--help"), LIBRARIES) == []


#: cove's own commands, as its ``pyproject.toml`` registers them (group ``cove.commands``).
OWN = registered.own("cove.commands")


def test_cove_registers_its_commands_as_a_plugin_registers_its_own() -> None:
    # Each built-in is an entry point naming a click command of that name, in cove's
    # ``cove.channels.cli`` package, and the group finds it by that entry point.
    assert {"run", "chat", "list", "show", "serve", "web", "tui", "telegram", "mcp"} <= set(OWN)
    for name, point in OWN.items():
        command = point.load()
        assert isinstance(command, click.Command) and command.name == name
        assert point.module.startswith("cove.channels.cli.")
        assert cove.get_command(click.Context(cove), name) is command


def test_a_built_in_command_is_found_without_reading_the_other_packages() -> None:
    probe = (
        "import json\n"
        "from cove.channels.cli import main\n"
        "from cove.channels.cli.plugin_commands import plugin_commands\n"
        "code = main(['vars', '--help'])\n"
        "print(json.dumps(plugin_commands.cache_info().misses))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert json.loads(done.stdout.splitlines()[-1]) == 0


def test_an_unknown_command_is_refused_by_name(capsys: pytest.CaptureFixture[str]) -> None:
    from cove.channels.cli import main

    assert main(["nosuch"]) == 2
    assert "No such command 'nosuch'" in capsys.readouterr().err
