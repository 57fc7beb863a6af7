"""Start-up: a command imports only what it needs (``cove --version`` none of the channels'
libraries, the model client or the sandbox)."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys

import pytest

from cove.channels.cli.app import COMMANDS, cove

#: The libraries of the model client and the channels: only the commands that use them import
#: them, so not even ``cove --help`` (which imports every command module to list it).
LIBRARIES = ("openai", "starlette", "uvicorn", "textual", "telegram", "mcp")
#: Never imported by ``cove --version``.
HEAVY = (*LIBRARIES, "cove.environment.sandbox", "cove.engine", "cove.persistence")


def imported_by(*argv: str) -> set[str]:
    """The modules a fresh interpreter holds after running ``cove ARGV``."""
    probe = (
        "import json, sys\n"
        "from cove.channels.cli import main\n"
        f"code = main({list(argv)!r})\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    return set(json.loads(done.stdout.splitlines()[-1]))


def among(modules: set[str], packages: tuple[str, ...]) -> list[str]:
    return sorted(m for m in modules if any(m == p or m.startswith(p + ".") for p in packages))


def test_version_imports_no_command_and_no_heavy_library() -> None:
    modules = imported_by("--version")
    assert among(modules, HEAVY) == []
    assert not any(m.startswith("cove.conversation") for m in modules)
    assert not any(m.startswith("rich") for m in modules)
    assert "cove.channels.cli.inspect" not in modules


def test_help_lists_every_command_without_starting_a_channel() -> None:
    assert among(imported_by("--help"), LIBRARIES) == []


@pytest.mark.parametrize("module", sorted(set(COMMANDS.values())))
def test_each_command_module_registers_exactly_the_commands_it_is_listed_for(
    module: str,
) -> None:
    importlib.import_module(f"cove.channels.cli.{module}")
    registered = {
        name
        for name, command in cove.commands.items()
        if command.callback is not None
        and command.callback.__module__ == f"cove.channels.cli.{module}"
    }
    assert registered == {name for name, listed in COMMANDS.items() if listed == module}


def test_an_unknown_command_is_refused_by_name(capsys: pytest.CaptureFixture[str]) -> None:
    from cove.channels.cli import main

    assert main(["nosuch"]) == 2
    assert "No such command 'nosuch'" in capsys.readouterr().err
