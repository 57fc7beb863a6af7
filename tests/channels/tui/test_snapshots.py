"""Snapshots of the main screens, so layout changes show up as SVG diffs.

Only screens whose content does not depend on ids, clocks or timings are snapshotted (an empty
database's main screen, the help screen, and a long turn fed as events with fixed durations), at
120x40 and at 80x24.
Update with ``pytest --snapshot-update`` and look at the SVG diff.
"""

from __future__ import annotations

from pathlib import Path

from syrupy.assertion import SnapshotAssertion
from syrupy.extensions.image import SVGImageSnapshotExtension

from cove.channels.tui import CoveApp
from cove.channels.tui.widgets.prompt import PromptArea
from cove.channels.tui.widgets.turn import WINDOW
from cove.conversation import Conversations, scripted_factory
from cove.events import (
    BlockFinished,
    Event,
    IterationStarted,
    ModelReply,
    TurnFinished,
    TurnStarted,
    VarsChanged,
)
from cove.results import BlockResult, TurnOutcome, Usage, VarVersion
from tests.channels.tui.helpers import SIZE, until
from tests.scripted import settings_for


def long_turn(iterations: int) -> list[Event]:
    """A finished turn of ``iterations`` iterations, two blocks each, as the watch sends it."""
    events: list[Event] = [TurnStarted(turn_id=1, position=1, request="sum the squares")]
    for n in range(1, iterations + 1):
        codes = (f"square = {n} * {n}", "total = total + square\ntotal")
        events += [
            IterationStarted(turn_id=1, iteration=n, budget=iterations),
            ModelReply(turn_id=1, iteration=n, thinking=f"add the square of {n}", code=codes),
        ]
        events += [
            BlockFinished(
                turn_id=1,
                iteration=n,
                index=i,
                block=BlockResult(
                    position=i - 1,
                    code=code,
                    ok=True,
                    result_preview=None if i == 1 else str(n * (n + 1) * (2 * n + 1) // 6),
                    duration_ms=2.0,
                ),
            )
            for i, code in enumerate(codes, start=1)
        ]
        events.append(
            VarsChanged(
                turn_id=1,
                iteration=n,
                changes=(VarVersion("total", "value", None, "int", "…", version=n),),
            )
        )
    total = iterations * (iterations + 1) * (2 * iterations + 1) // 6
    events.append(
        TurnFinished(
            turn_id=1,
            outcome=TurnOutcome(
                "done", f"The sum is **{total}**.", "high", None, Usage(1200, 300, 0.0123)
            ),
            iterations=iterations,
            duration_ms=1500.0,
        )
    )
    return events


async def screenshots(
    tmp_path: Path, *keys: str, events: list[Event] | None = None, size: tuple[int, int] = SIZE
) -> str:
    """The app on an empty database, fed ``events``, after ``keys`` (on the last iteration
    when events were fed, else on the request box), on a terminal of ``size``."""
    settings = settings_for(tmp_path).replace(model="snapshot-model")
    async with await Conversations.open(settings, llm_factory=scripted_factory([])) as convs:
        app = CoveApp(convs)
        async with app.run_test(size=size) as pilot:
            app.query_one(PromptArea).cursor_blink = False  # a blink is a timing, not a layout
            await until(pilot, lambda: app.status.endpoint != "endpoint: ?", "the start")
            for event in events or []:
                app.apply(event)
            await pilot.pause()
            if events:
                app.timeline.turns[1].iterations[max(app.timeline.turns[1].iterations)].focus()
            await pilot.press(*keys)
            await pilot.pause()
            return app.export_screenshot(title="cove")


async def test_main_screen(tmp_path: Path, snapshot: SnapshotAssertion) -> None:
    svg = await screenshots(tmp_path)
    assert svg == snapshot(extension_class=SVGImageSnapshotExtension)


async def test_help_screen(tmp_path: Path, snapshot: SnapshotAssertion) -> None:
    svg = await screenshots(tmp_path, "f1")
    assert svg == snapshot(extension_class=SVGImageSnapshotExtension)


async def test_a_long_turn(tmp_path: Path, snapshot: SnapshotAssertion) -> None:
    # Folded iterations, collapsed ones, and the last one expanded with the block cursor.
    events = long_turn(WINDOW + 4)
    svg = await screenshots(tmp_path, "enter", "down", events=events)
    assert svg == snapshot(extension_class=SVGImageSnapshotExtension)


async def test_main_screen_at_80x24(tmp_path: Path, snapshot: SnapshotAssertion) -> None:
    # The sidebar makes room by itself; the footer is compact and whole.
    svg = await screenshots(tmp_path, size=(80, 24))
    assert svg == snapshot(extension_class=SVGImageSnapshotExtension)


async def test_a_long_turn_at_80x24(tmp_path: Path, snapshot: SnapshotAssertion) -> None:
    # Iteration lines stay one line each, cut with an ellipsis.
    events = long_turn(WINDOW + 4)
    svg = await screenshots(tmp_path, "enter", "down", events=events, size=(80, 24))
    assert svg == snapshot(extension_class=SVGImageSnapshotExtension)
