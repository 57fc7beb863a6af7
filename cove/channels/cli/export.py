"""Export rendering lives in ``cove.channels.export`` (shared by every channel)."""

from cove.channels.export import to_json, to_markdown

__all__ = ["to_json", "to_markdown"]
