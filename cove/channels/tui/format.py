"""Small text helpers shared by the TUI's widgets (no Textual imports).

Everything shown comes from a model or a sandbox and is hostile: ``clean`` turns terminal
control characters into visible stand-ins before any of it reaches a renderable (Rich passes
ESC and C1 codes through to the terminal), and ``cut`` bounds its length.
"""

from __future__ import annotations

import time

from cove.text import clean, shown

__all__ = ["age", "clean", "cut", "duration", "one_line"]

PREVIEW_CHARS = 2000


def cut(text: str, limit: int = PREVIEW_CHARS) -> str:
    """``text`` made safe (``clean``) and cut to ``limit`` characters with a visible marker."""
    return clean(shown(text, limit))


def one_line(text: str, limit: int = 80) -> str:
    """The first line of ``text``, made safe and cut to ``limit`` characters."""
    stripped = text[: limit * 4].strip()  # a huge text: only its start can be the first line
    first = clean(stripped.splitlines()[0]) if stripped else ""
    return first if len(first) <= limit else first[: limit - 1] + "…"


def age(timestamp: float, now: float | None = None) -> str:
    """How long ago ``timestamp`` was, compactly: ``now``, ``5m``, ``3h``, ``2d``."""
    seconds = max(0.0, (time.time() if now is None else now) - timestamp)
    if seconds < 60:
        return "now"
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{int(seconds // size)}{unit}"
    return "now"


def duration(ms: float) -> str:
    """Milliseconds as ``850ms`` or ``1.2s``."""
    return f"{ms:.0f}ms" if ms < 1000 else f"{ms / 1000:.1f}s"
