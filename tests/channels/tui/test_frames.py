"""Events are drawn once per frame: a burst is queued and shown in one pass, with the status bar
and the variables it changes; a live iteration keeps its height (``LIVE_LINES``) and shows its
header and its last lines, so its events repaint it and never lay the pane out again."""

from __future__ import annotations

from pathlib import Path

from cove.channels.tui import CoveApp
from cove.channels.tui.widgets.iteration import LIVE_LINES, STREAM_LINES
from cove.conversation import Conversations, scripted_factory
from cove.events import (
    BlockFinished,
    Event,
    IterationStarted,
    ModelDelta,
    ModelReply,
    TurnFinished,
    TurnStarted,
    VarsChanged,
)
from cove.results import BlockResult, TurnOutcome, VarVersion
from tests.channels.tui.helpers import SIZE, shown_text, until
from tests.scripted import settings_for


def iteration(n: int) -> list[Event]:
    """Iteration ``n`` of turn 1 as the watch sends it: started, replied, ran, wrote ``total``."""
    code = f"total = {n}"
    return [
        IterationStarted(turn_id=1, iteration=n, budget=20),
        ModelReply(turn_id=1, iteration=n, thinking=f"step {n}", code=(code,)),
        BlockFinished(
            turn_id=1,
            iteration=n,
            index=1,
            block=BlockResult(position=0, code=code, ok=True, duration_ms=1.0),
        ),
        VarsChanged(
            turn_id=1,
            iteration=n,
            changes=(VarVersion("total", "value", None, "int", str(n), version=n),),
        ),
    ]


async def test_a_burst_of_events_is_drawn_in_one_pass(tmp_path: Path) -> None:
    events: list[Event] = [TurnStarted(turn_id=1, position=1, request="count to twelve")]
    for n in range(1, 13):
        events += iteration(n)
    events.append(
        TurnFinished(
            turn_id=1, outcome=TurnOutcome("done", "twelve", "high"), iterations=12, duration_ms=5
        )
    )
    async with await Conversations.open(
        settings_for(tmp_path), llm_factory=scripted_factory([])
    ) as convs:
        app = CoveApp(convs)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: app.status.endpoint != "endpoint: ?", "the start")
            for event in events:
                app.apply(event)
            # Given at once, nothing is drawn yet: the frame draws them together.
            assert app.arrived == events and not app.timeline.turns
            await pilot.pause()
            assert not app.arrived
            turn = app.timeline.turns[1]
            assert turn.finished and turn.answer == "twelve"
            assert sorted(turn.iterations) == list(range(1, 13))
            assert [turn.iterations[n].codes for n in (1, 12)] == [["total = 1"], ["total = 12"]]
            assert app.status.iteration == "12/20" and app.status.usage.startswith("done")
            assert app.variables.rows == {"total": (12, "int", "12")}  # hidden: kept, not drawn


async def test_a_live_iteration_keeps_its_height_and_shows_its_last_lines(
    tmp_path: Path,
) -> None:
    async with await Conversations.open(
        settings_for(tmp_path), llm_factory=scripted_factory([])
    ) as convs:
        app = CoveApp(convs)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: app.status.endpoint != "endpoint: ?", "the start")
            app.apply(TurnStarted(turn_id=1, position=1, request="think aloud"))
            app.apply(IterationStarted(turn_id=1, iteration=1, budget=20))
            await pilot.pause()
            view = app.timeline.turns[1].iterations[1]
            heights = []
            for n in range(1, STREAM_LINES + 5):
                app.apply(ModelDelta(turn_id=1, iteration=1, text=f"line {n}\n"))
                await pilot.pause()
                heights.append(view.size.height)
                shown = shown_text(view)
                assert f"line {n}" in shown and f"({view.received:,} chars)" in shown
            # its events repaint it in place: the pane is never laid out again for them
            assert heights == [LIVE_LINES] * (STREAM_LINES + 4)
            lines = [line.strip() for line in shown_text(view).splitlines() if line.strip()]
            assert lines[1:] == [f"line {n}" for n in range(5, STREAM_LINES + 5)]
            # a body longer than its lines: the header, then the last lines
            code = "\n".join(f"row_{n} = {n}" for n in range(30))
            app.apply(ModelReply(turn_id=1, iteration=1, thinking="many rows", code=(code,)))
            await pilot.pause()
            lines = shown_text(view).splitlines()
            assert view.size.height == len(lines) == LIVE_LINES
            assert "iteration 1/20" in lines[0] and lines[-1].strip() == "row_29 = 29"
            # once it is over it is its header line again, and the whole body when expanded
            app.apply(IterationStarted(turn_id=1, iteration=2, budget=20))
            await pilot.pause()
            assert view.size.height == 1
            view.action_expand()
            await pilot.pause()
            assert "row_0 = 0" in shown_text(view) and view.size.height > LIVE_LINES
