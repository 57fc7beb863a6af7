"""Small text helpers shared by the TUI's widgets (no Textual imports)."""

from __future__ import annotations

import time

from cove.text import cut as bounded

PREVIEW_CHARS = 2000


def cut(text: str, limit: int = PREVIEW_CHARS) -> str:
    """Cut ``text`` to ``limit`` characters with a visible marker (sandbox output is unbounded)."""
    return bounded(text, limit, "")


def one_line(text: str, limit: int = 80) -> str:
    """The first line of ``text``, cut to ``limit`` characters."""
    first = text.strip().splitlines()[0] if text.strip() else ""
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
