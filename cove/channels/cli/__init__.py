"""The CLI channel: the scriptable ``cove`` command (run, chat, inspect, fork, replay, demo)."""

from cove.channels.cli.app import main

__all__ = ["main"]
