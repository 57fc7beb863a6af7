"""``Timeline``: a conversation's turns, loaded from its transcript and extended by events.

Loading builds one ``TurnView`` per recorded turn with collapsed iterations; ``apply`` routes each
live event to the one widget it changes. Events for turns or iterations already loaded from the
store are ignored, so attaching the watch before reading the transcript leaves no gap and shows
nothing twice.
"""

from __future__ import annotations

from collections import defaultdict

from textual.containers import VerticalScroll

from cove.channels.tui.widgets.turn import TurnView
from cove.conversation import Transcript, TurnRecord, VarVersionRecord
from cove.events import (
    BlockFinished,
    Event,
    IterationStarted,
    ModelDelta,
    ModelReply,
    Nudge,
    SandboxRestarted,
    SteerReceived,
    TurnFinished,
    TurnStarted,
    VarsChanged,
)


def cost_text(cost_usd: float, known: bool = True) -> str:
    """A cost for people: dollars, or why it is unknown."""
    return f"${cost_usd:.4f}" if known else "cost unknown"


class Timeline(VerticalScroll):
    """The conversation pane."""

    def __init__(self) -> None:
        super().__init__(id="timeline")
        self.turns: dict[int, TurnView] = {}

    def on_mount(self) -> None:
        self.anchor()  # stay at the bottom while events arrive, unless the person scrolled up

    async def load(self, transcript: Transcript) -> None:
        """Show a stored conversation (replacing whatever was shown)."""
        await self.remove_children()
        self.turns.clear()
        versions: dict[tuple[int, int], list[VarVersionRecord]] = defaultdict(list)
        for v in transcript.var_versions:
            versions[(v.turn_position, v.iteration_position)].append(v)
        views = [self._from_record(turn, versions) for turn in transcript.turns]
        await self.mount_all(views)
        for view, turn in zip(views, transcript.turns, strict=True):
            self._fill(view, turn, versions)
        self.scroll_end(animate=False)

    def _from_record(
        self, turn: TurnRecord, versions: dict[tuple[int, int], list[VarVersionRecord]]
    ) -> TurnView:
        view = self.turns[turn.id] = TurnView(turn.id, turn.position, turn.request)
        return view

    def _fill(
        self,
        view: TurnView,
        turn: TurnRecord,
        versions: dict[tuple[int, int], list[VarVersionRecord]],
    ) -> None:
        for it in turn.iterations:
            iteration = view.iteration(it.position + 1, None, live=False)
            iteration.add_reply(it.thinking, [b.code for b in it.blocks], it.parse_error)
            for block in it.blocks:
                iteration.add_block(
                    ok=block.ok,
                    result_preview=block.result_preview,
                    stdout=block.stdout,
                    stderr=block.stderr,
                    error=block.error,
                    duration_ms=block.duration_ms,
                    timed_out=block.timed_out,
                )
            written = versions.get((turn.position, it.position))
            if written:
                iteration.add_vars([v.var_version() for v in written])
            for text in it.steering:
                iteration.add_note(f"you (steering): {text}")
        if turn.status != "running":
            took = None if turn.finished_at is None else (turn.finished_at - turn.started_at) * 1e3
            view.finish(
                status=turn.status,
                answer=turn.answer,
                error=turn.error,
                tokens=turn.tokens_in + turn.tokens_out,
                cost=cost_text(turn.cost_usd),
                duration_ms=took,
            )

    def apply(self, event: Event) -> None:
        """Show one live event by changing the one widget it concerns."""
        if isinstance(event, TurnStarted):
            if event.turn_id not in self.turns:
                view = self.turns[event.turn_id] = TurnView(
                    event.turn_id, event.position, event.request
                )
                self.mount(view)
            return
        turn = self.turns.get(getattr(event, "turn_id", -1))
        if turn is None or turn.finished:
            return  # a turn loaded from the store already shows this
        if isinstance(event, IterationStarted):
            if event.iteration not in turn.iterations:
                turn.iteration(event.iteration, event.budget, live=True)
        elif isinstance(event, ModelDelta):
            target = turn.iterations.get(event.iteration)
            if target is not None and target.live:
                target.add_delta(event.text)
        elif isinstance(event, ModelReply):
            target = turn.iterations.get(event.iteration)
            if target is not None and target.live:
                target.add_reply(event.thinking, event.code, event.parse_error)
        elif isinstance(event, BlockFinished):
            target = turn.iterations.get(event.iteration)
            if target is not None and target.live:
                block = event.block
                target.add_block(
                    ok=block.ok,
                    result_preview=block.result_preview,
                    stdout=block.stdout,
                    stderr=block.stderr,
                    error=block.error,
                    duration_ms=block.duration_ms,
                    timed_out=block.timed_out,
                )
        elif isinstance(event, VarsChanged):
            target = turn.iterations.get(event.iteration)
            if target is not None and target.live:
                target.add_vars(event.changes)
        elif isinstance(event, Nudge):
            turn.note(f"nudge: {event.text}")
        elif isinstance(event, SteerReceived):
            turn.note(f"you (steering): {event.text}")
        elif isinstance(event, SandboxRestarted):
            lost = ", ".join(event.lost) or "nothing"
            turn.note(f"sandbox restarted ({event.reason}); lost: {lost}", "red")
        elif isinstance(event, TurnFinished):
            turn.finish(
                status=event.status,
                answer=event.answer,
                error=event.error,
                tokens=event.tokens_in + event.tokens_out,
                cost=cost_text(event.cost_usd, event.cost_known),
                duration_ms=event.duration_ms,
            )
