"""Bounding text: one ``cut`` for the prompt's budgets and for what channels show.

Sandbox output, values and replies are unbounded; whatever shows them cuts them to a limit with a
visible marker that says how much was removed (and, in the prompt, where the full text lives).
They are hostile too: ``clean`` makes terminal control characters visible before any of it
reaches a terminal, and ``json_escaped`` keeps a JSON document free of raw ones. ``headline`` is
the one-line start of a text, for names in lists.
"""

from __future__ import annotations

# C0 controls but tab and newline become their Unicode "control pictures" (ESC shows as ␛),
# DEL as ␡, C1 controls (0x9b is a one-byte CSI for some terminals) and the bidirectional
# overrides that can reorder what a reader sees as escapes such as \x9b or \u202e.
_VISIBLE = {code: chr(0x2400 + code) for code in range(0x20) if code not in (0x09, 0x0A)}
_VISIBLE[0x7F] = "\u2421"
_VISIBLE.update({code: f"\\x{code:02x}" for code in range(0x80, 0xA0)})
_VISIBLE.update(
    {code: f"\\u{code:04x}" for code in [*range(0x202A, 0x202F), *range(0x2066, 0x206A)]}
)


# In a JSON document every C0 control is already escaped by the encoder; DEL, the C1 controls
# and the bidirectional overrides may stand raw inside strings, so they are written as \uXXXX.
_JSON_ESCAPES = {code: f"\\u{code:04x}" for code in [0x7F, *range(0x80, 0xA0)]}
_JSON_ESCAPES.update(
    {code: f"\\u{code:04x}" for code in [*range(0x202A, 0x202F), *range(0x2066, 0x206A)]}
)


def json_escaped(document: str) -> str:
    """A JSON document with the controls its encoder leaves raw (DEL, C1, bidirectional
    overrides) written as ``\\uXXXX`` escapes: the same value once parsed, inert on a terminal.

    They can only stand inside string literals (JSON's syntax is ASCII), where an escape means
    the same character.
    """
    return document.translate(_JSON_ESCAPES)


def clean(text: str) -> str:
    """``text`` with terminal control characters made visible (line breaks normalised to ``\\n``).

    Sandbox output and model text may carry escape sequences (a terminal title, the clipboard,
    a rewritten screen); made visible, they are shown and never acted on.
    """
    return text.replace("\r\n", "\n").translate(_VISIBLE)


def cut(text: str, limit: int, hint: str, *, keep_tail: bool = False) -> str:
    """``text`` if it fits in ``limit`` characters, else a shortened copy with a visible marker.

    The marker reads ``…[cut 12,345 chars; <hint>]`` and the result is never longer than
    ``limit``. With ``keep_tail`` the marker goes in the middle and about a third of the kept
    characters come from the end (where output and tracebacks say what happened last).

    Args:
        text: The text to bound.
        limit: The largest length allowed.
        hint: Where the full text can be found, e.g. ``"the full request is in REQUEST"``.
        keep_tail: Keep the end of the text as well as the beginning.
    """
    if len(text) <= limit:
        return text
    # Sizing the marker for the largest possible count keeps the result within the limit.
    keep = limit - len(_marker(len(text), hint, keep_tail))
    if keep <= 0:
        return _marker(len(text), hint, keep_tail)[:limit]
    tail = keep // 3 if keep_tail else 0
    head = keep - tail
    marker = _marker(len(text) - keep, hint, keep_tail)
    return text[:head] + marker + (text[len(text) - tail :] if tail else "")


def _marker(removed: int, hint: str, middle: bool) -> str:
    note = f"; {hint}" if hint else ""
    return f"…[cut {removed:,} chars{note}]" + ("…" if middle else "")


def shown(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters for display, with ``…[N more chars]`` after the cut.

    Unlike ``cut`` the marker is added beyond the limit: a screen shows the first ``limit``
    characters of the text whole.
    """
    if len(text) <= limit:
        return text
    return text[:limit] + f" …[{len(text) - limit:,} more chars]"


def headline(text: str, limit: int) -> str:
    """The start of ``text`` as one line of at most ``limit`` characters, ending in ``…`` if cut.

    Runs of whitespace (line breaks included) become one space; a cut falls after the last whole
    word that fits when there is one in the second half, else inside the word.
    """
    flat = " ".join(text[: limit * 4].split())  # only the start can be shown
    if len(flat) <= limit and len(text) <= limit * 4:
        return flat
    room = flat[: limit - 1]
    space = room.rfind(" ")
    if len(flat) >= limit and space >= limit // 2:
        room = room[:space]
    return room.rstrip() + "…"
