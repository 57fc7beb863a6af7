"""The CLI channel: the scriptable ``cove`` command (run, chat, inspect, fork, replay, demo).

``cove`` is the click group every command is registered on (``app``); ``main`` runs it and
returns the process exit code. ``cove --version`` alone is answered here, before click or any
command is imported: it is the command scripts call to check that cove is there.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cove.channels.cli.app import cove

__all__ = ["cove", "main"]

#: The arguments ``main`` answers without click (the group's ``--version`` says the same).
VERSION_FLAGS = (["--version"], ["-V"])


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``cove`` command line (``argv``, else the process's); returns the exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args in VERSION_FLAGS:
        from cove.channels.cli.version import version_line

        print(version_line())
        return 0
    from cove.channels.cli.app import main as run

    return run(args)


def __getattr__(name: str) -> Any:
    if name == "cove":  # the click group, imported when asked for
        from cove.channels.cli.app import cove

        return cove
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
