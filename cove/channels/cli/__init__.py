"""The CLI channel: the scriptable ``cove`` command (run, chat, inspect, fork, replay, demo).

``cove`` is the click group every command is registered on; ``main`` runs it and returns the
process exit code.
"""

from cove.channels.cli.app import cove, main

__all__ = ["cove", "main"]
