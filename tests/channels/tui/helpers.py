"""Shared pieces of the TUI tests: settings, scripted replies, waiting on the app's state."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from textual.geometry import Region
from textual.pilot import Pilot
from textual.widget import Widget

from cove.channels.tui import CoveApp
from cove.channels.tui.widgets.turn import TurnView

SIZE = (120, 40)


async def until(pilot: Pilot[Any], condition: Callable[[], object], what: str) -> None:
    """Let the app run until ``condition()`` is true; fail after 60 s (a loaded machine is slow)."""
    deadline = time.monotonic() + 60.0
    while not condition():
        if time.monotonic() > deadline:
            notices = getattr(pilot.app, "notices", None)
            raise AssertionError(f"timed out waiting for {what}; notices: {notices}")
        await pilot.pause(0.02)


def turns(app: CoveApp) -> list[TurnView]:
    return [app.timeline.turns[k] for k in sorted(app.timeline.turns)]


def last_turn_done(app: CoveApp, count: int = 1) -> bool:
    shown = turns(app)
    return len(shown) >= count and shown[-1].finished


async def type_text(pilot: Pilot[Any], text: str) -> None:
    await pilot.press(*[("space" if ch == " " else ch) for ch in text])


def shown_text(widget: Widget) -> str:
    """What ``widget`` puts on the terminal now: the text of its rendered lines."""
    width, height = widget.size
    strips = widget.render_lines(Region(0, 0, width, height))
    return "\n".join("".join(segment.text for segment in strip) for strip in strips)
