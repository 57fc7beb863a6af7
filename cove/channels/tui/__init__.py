"""The terminal UI channel: ``cove tui``, a Textual app over the conversation layer."""

from cove.channels.tui.app import CoveApp

__all__ = ["CoveApp"]
