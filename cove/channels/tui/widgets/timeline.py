"""``Timeline``: a conversation's turns, loaded from its transcript and extended by events.

Only the newest ``TURN_WINDOW`` turns are widgets (``TurnView``, iterations collapsed); older ones
are one ``EarlierTurns`` line, so the cost of a frame, which grows with the widgets in the pane,
does not grow with the conversation: a turn followed live in a long conversation costs what it
costs in a fresh one. Enter on that line asks for the previous ``EARLIER_PAGE`` turns, which the
app reads from the store and hands to ``show_earlier`` (the next turn to start folds them again).
``apply`` routes each live event to the one widget it changes. Events for turns or iterations
already loaded from the store are ignored, so attaching the watch before reading the transcript
leaves no gap and shows nothing twice.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import ClassVar

from rich.console import RenderableType
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.message import Message
from textual.widget import Widget

from cove.channels.tui.format import clean
from cove.channels.tui.widgets.iteration import IterationView
from cove.channels.tui.widgets.turn import TurnView
from cove.conversation import Transcript, TurnRecord, VarVersionRecord, iteration_budget
from cove.events import (
    AnswerRefused,
    BlockFinished,
    Event,
    IterationStarted,
    ModelDelta,
    ModelReply,
    ModelRetry,
    SandboxRestarted,
    SteerReceived,
    TurnFinished,
    TurnStarted,
    VarsChanged,
)


def cost_text(cost_usd: float, known: bool = True) -> str:
    """A cost for people: dollars, or why it is unknown."""
    return f"${cost_usd:.4f}" if known else "cost unknown"


#: Turns kept as widgets; older ones fold into the ``EarlierTurns`` line. Each earlier turn shown
#: adds its widgets to every frame's layout and paint (8 one-iteration turns: 1.6x a fresh pane).
TURN_WINDOW = 3
#: Earlier turns Enter on that line brings back at a time.
EARLIER_PAGE = 8

Versions = dict[tuple[int, int], list[VarVersionRecord]]


def versions_by_iteration(records: Sequence[VarVersionRecord]) -> Versions:
    """Variable versions grouped by (turn position, iteration position)."""
    versions: Versions = defaultdict(list)
    for v in records:
        versions[(v.turn_position, v.iteration_position)].append(v)
    return versions


class EarlierTurns(Widget, can_focus=True):
    """The turns before the window, as one line; Enter asks for the previous ``EARLIER_PAGE``."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("enter", "unfold", "Earlier turns")]

    class Wanted(Message):
        """The person asked to see earlier turns (``positions``, oldest first)."""

        def __init__(self, positions: list[int]) -> None:
            super().__init__()
            self.positions = positions

    def __init__(self) -> None:
        super().__init__(id="earlier", classes="iteration folded")
        self.positions: list[int] = []  # turn positions not shown, ascending
        self.display = False

    def render(self) -> RenderableType:
        if not self.positions:
            return Text("")
        count, page = len(self.positions), min(EARLIER_PAGE, len(self.positions))
        return Text(
            f"▸ {count} earlier turn(s) (#{self.positions[0]}–#{self.positions[-1]}) · "
            f"Enter shows {page} more",
            style="dim",
            no_wrap=True,
        )

    def on_click(self) -> None:
        self.action_unfold()

    def action_unfold(self) -> None:
        if self.positions:
            self.post_message(self.Wanted(self.positions[-EARLIER_PAGE:]))


class Timeline(VerticalScroll):
    """The conversation pane."""

    def __init__(self) -> None:
        super().__init__(id="timeline")
        self.turns: dict[int, TurnView] = {}  # the turns shown as widgets, by turn id
        self.earlier = EarlierTurns()

    @property
    def turn_count(self) -> int:
        """Turns of the conversation known here, shown or folded."""
        return len(self.turns) + len(self.earlier.positions)

    def compose(self) -> ComposeResult:
        yield self.earlier

    def on_mount(self) -> None:
        self.anchor()  # stay at the bottom while events arrive, unless the person scrolled up

    async def clear(self) -> None:
        """Show nothing."""
        await self.remove_children(TurnView)
        self.turns.clear()
        self._set_earlier([])

    async def load(self, transcript: Transcript) -> None:
        """Show a stored conversation (replacing whatever was shown): its newest turns."""
        await self.clear()
        self._set_earlier([t.position for t in transcript.turns[:-TURN_WINDOW]])
        shown = transcript.turns[-TURN_WINDOW:]
        await self._mount_records(shown, versions_by_iteration(transcript.var_versions))
        self.scroll_end(animate=False)

    async def show_earlier(
        self, turns: Sequence[TurnRecord], var_versions: Sequence[VarVersionRecord]
    ) -> None:
        """Show folded turns (read from the store for an ``EarlierTurns.Wanted``) above the rest."""
        wanted = [t for t in turns if t.position in self.earlier.positions]
        taken = {t.position for t in wanted}
        self._set_earlier([p for p in self.earlier.positions if p not in taken])
        await self._mount_records(wanted, versions_by_iteration(var_versions))

    async def _mount_records(self, turns: Sequence[TurnRecord], versions: Versions) -> None:
        views = [TurnView(turn.id, turn.position, turn.request) for turn in turns]
        for view in views:
            self.turns[view.turn_id] = view
        await self.mount_all(views, after=self.earlier)
        for view, turn in zip(views, turns, strict=True):
            self._fill(view, turn, versions)

    def _set_earlier(self, positions: list[int]) -> None:
        self.earlier.positions = positions
        self.earlier.display = bool(positions)
        self.earlier.refresh()

    def _trim(self) -> None:
        """Fold the oldest turns shown while more than ``TURN_WINDOW`` are."""
        if len(self.turns) <= TURN_WINDOW:
            return
        ordered = sorted(self.turns.values(), key=lambda v: v.position)
        folded = ordered[: len(ordered) - TURN_WINDOW]
        for view in folded:
            del self.turns[view.turn_id]
            view.remove()
        self._set_earlier(sorted([*self.earlier.positions, *(v.position for v in folded)]))

    def _fill(self, view: TurnView, turn: TurnRecord, versions: Versions) -> None:
        for it in turn.iterations:
            iteration = view.iteration(it.position + 1, iteration_budget(it), live=False)
            iteration.add_reply(it.thinking, [b.code for b in it.blocks], it.parse_error)
            for index, block in enumerate(it.blocks):
                iteration.add_block(index + 1, block)
            written = versions.get((turn.position, it.position))
            if written:
                iteration.add_vars([v.var_version() for v in written])
            for text in it.steering:
                iteration.add_note(f"you (steering): {text}")
            if it.refusal:
                iteration.add_note(it.refusal, "red")
        if turn.status != "running":
            took = None if turn.finished_at is None else (turn.finished_at - turn.started_at) * 1e3
            view.finish(
                status=turn.status,
                answer=turn.answer,
                error=turn.error,
                tokens=turn.usage.tokens_in + turn.usage.tokens_out,
                cost=cost_text(turn.usage.cost_usd, turn.cost_known),
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
                self._trim()
            return
        turn = self.turns.get(getattr(event, "turn_id", -1))
        if turn is None or turn.finished:
            return  # a turn loaded from the store already shows this
        if isinstance(event, IterationStarted):
            if event.iteration not in turn.iterations:
                turn.iteration(event.iteration, event.budget, live=True)
        elif isinstance(event, ModelDelta | ModelReply | ModelRetry | BlockFinished | VarsChanged):
            target = turn.iterations.get(event.iteration)
            if target is not None and target.live:
                apply_to_iteration(target, event)
        elif isinstance(event, TurnFinished):
            turn.finish(
                status=event.status,
                answer=event.answer,
                error=event.error,
                tokens=event.usage.tokens_in + event.usage.tokens_out,
                cost=cost_text(event.usage.cost_usd, event.cost_known),
                duration_ms=event.duration_ms,
            )
        else:
            note = note_of(event)
            if note is not None:
                turn.note(*note)


def apply_to_iteration(
    view: IterationView, event: ModelDelta | ModelReply | ModelRetry | BlockFinished | VarsChanged
) -> None:
    """Show an event of the live iteration ``view``."""
    if isinstance(event, ModelDelta):
        view.add_delta(event.text)
    elif isinstance(event, ModelRetry):
        view.add_retry(f"retrying ({event.attempt} of {event.of}): {clean(event.reason)}")
    elif isinstance(event, ModelReply):
        view.add_reply(event.thinking, event.code, event.parse_error)
    elif isinstance(event, BlockFinished):
        view.add_block(event.index, event.block)
    else:
        view.add_vars(event.changes)


def note_of(event: Event) -> tuple[str, str] | None:
    """The note (text, style) a steering message, a sandbox restart or a refused answer shows;
    nudges are for the model alone (the inspector shows them)."""
    if isinstance(event, SteerReceived):
        return f"you (steering): {event.text}", "yellow"
    if isinstance(event, SandboxRestarted):
        lost = ", ".join(event.lost) or "nothing"
        return f"sandbox restarted ({event.reason}); lost: {lost}", "red"
    if isinstance(event, AnswerRefused):
        return event.reason, "red"
    return None
