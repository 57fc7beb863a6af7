"""Bounding text: one ``cut`` for the prompt's budgets and for what channels show.

Sandbox output, values and replies are unbounded; whatever shows them cuts them to a limit with a
visible marker that says how much was removed (and, in the prompt, where the full text lives).
"""

from __future__ import annotations


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
