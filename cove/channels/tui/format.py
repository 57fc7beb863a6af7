"""Small text helpers shared by the TUI's widgets (no Textual imports).

Everything shown comes from a model or a sandbox and is hostile: ``clean`` turns terminal
control characters into visible stand-ins before any of it reaches a renderable (Rich passes
ESC and C1 codes through to the terminal), and ``cut`` bounds its length.
"""

from __future__ import annotations

import time

PREVIEW_CHARS = 2000

# C0 controls but tab and newline become their Unicode "control pictures" (ESC shows as ␛),
# DEL as ␡, C1 controls (0x9b is a one-byte CSI for some terminals) and the bidirectional
# overrides that can reorder what a reader sees as escapes such as \x9b or \u202e.
_VISIBLE = {code: chr(0x2400 + code) for code in range(0x20) if code not in (0x09, 0x0A)}
_VISIBLE[0x7F] = "\u2421"
_VISIBLE.update({code: f"\\x{code:02x}" for code in range(0x80, 0xA0)})
_VISIBLE.update(
    {code: f"\\u{code:04x}" for code in [*range(0x202A, 0x202F), *range(0x2066, 0x206A)]}
)


def clean(text: str) -> str:
    """``text`` with control characters made visible (line breaks normalised to ``\\n``)."""
    return text.replace("\r\n", "\n").translate(_VISIBLE)


def cut(text: str, limit: int = PREVIEW_CHARS) -> str:
    """``text`` made safe (``clean``) and cut to ``limit`` characters with a visible marker."""
    if len(text) <= limit:
        return clean(text)
    return clean(text[:limit]) + f" …[{len(text) - limit:,} more chars]"


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
