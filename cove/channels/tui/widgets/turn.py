"""``TurnView``: a request, its iterations, notes, the answer and the turn's summary line.

Every widget in the pane adds to the cost of each layout change (Textual re-arranges them all),
so a turn keeps at most ``WINDOW`` finished iterations as widgets of their own; older ones are
folded into one ``FoldedIterations`` line. Enter on it brings back the newest ``WINDOW`` of them.
"""

from __future__ import annotations

from typing import ClassVar

from rich.console import Group, RenderableType
from rich.markdown import Markdown
from rich.text import Text
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.geometry import Size
from textual.message import Message
from textual.widget import Widget
from textual.widgets import Static

from cove.channels.tui.format import cut, duration
from cove.channels.tui.widgets.iteration import IterationView

#: Finished iterations of a turn kept as their own widgets; older ones are folded.
WINDOW = 8
#: The longest answer and request shown (the export has all of them).
ANSWER_CHARS = 20_000
REQUEST_CHARS = 4_000


class FoldedIterations(Widget, can_focus=True):
    """Older finished iterations as one line (its cost does not grow with them); Enter shows
    the newest ``WINDOW`` of them again."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("enter", "unfold", "Unfold")]

    class Unfold(Message):
        """The person asked to see folded iterations as separate widgets again."""

        def __init__(self, folded: FoldedIterations) -> None:
            super().__init__()
            self.folded = folded

    def __init__(self) -> None:
        super().__init__(classes="iteration folded")
        self.views: list[IterationView] = []

    def add(self, view: IterationView) -> None:
        """Fold one more (the next newer) iteration in."""
        self.views.append(view)
        self.refresh()  # still one line: no layout

    def take_newest(self) -> list[IterationView]:
        """Remove and return the newest ``WINDOW`` folded iterations, oldest first."""
        taken, self.views = self.views[-WINDOW:], self.views[:-WINDOW]
        self.refresh()
        return taken

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        """One line, known without rendering it (every layout of the pane measures it)."""
        return 1

    def render(self) -> RenderableType:
        if not self.views:
            return Text("")
        blocks = sum(v.done_blocks for v in self.views)
        first, last = self.views[0].number, self.views[-1].number
        return Text(
            f"▸ iterations {first}–{last} folded · {blocks} block(s) · "
            f"Enter shows {min(WINDOW, len(self.views))} more",
            style="dim",
            no_wrap=True,
            overflow="ellipsis",
        )

    def on_click(self) -> None:
        self.action_unfold()

    def action_unfold(self) -> None:
        self.post_message(self.Unfold(self))


class TurnView(Vertical):
    """One turn; widgets are appended as its events arrive, never rebuilt."""

    def __init__(self, turn_id: int, position: int, request: str) -> None:
        line = Text.assemble((f"#{position} › ", "bold cyan"), cut(request, REQUEST_CHARS))
        super().__init__(Static(line, classes="request"), classes="turn")
        # Children added before this widget has mounted its request line wait here, so they
        # come after it (events can arrive in the same tick as the turn's start).
        self._pending: list[Widget] | None = []
        self.turn_id = turn_id
        self.position = position
        self.request = request
        self.finished = False
        self.status = "running"
        self.answer: str | None = None
        self.iterations: dict[int, IterationView] = {}
        self._shown: list[IterationView] = []  # iterations mounted as their own widgets, in order
        self._folded: FoldedIterations | None = None

    @property
    def current(self) -> IterationView | None:
        """The latest iteration, if any."""
        return self.iterations[max(self.iterations)] if self.iterations else None

    def iteration(self, number: int, budget: int | None, *, live: bool) -> IterationView:
        """The view of iteration ``number`` (1-based), created (and the previous one collapsed)."""
        view = self.iterations.get(number)
        if view is None:
            previous = self.current
            if previous is not None and previous.live:
                previous.finish()
            view = self.iterations[number] = IterationView(self.position, number, budget, live=live)
            self._append(view)
            self._shown.append(view)
            self._fold()
        return view

    def on_mount(self) -> None:
        pending, self._pending = self._pending, None
        if pending:
            self.mount_all(pending)

    def _append(self, widget: Widget) -> None:
        if self._pending is not None:
            self._pending.append(widget)
        else:
            self.mount(widget)

    def _fold(self) -> None:
        """Fold the oldest finished iterations while more than ``WINDOW`` are widgets."""
        finished = [v for v in self._shown if not v.live]
        excess = finished[: max(0, len(finished) - WINDOW)]
        if not excess:
            return
        if self._folded is None:
            self._folded = FoldedIterations()
            if self._pending is not None:
                self._pending.insert(self._pending.index(excess[0]), self._folded)
            else:
                self.mount(self._folded, before=excess[0])
        for view in excess:
            self._shown.remove(view)
            view.expanded = False
            self._folded.add(view)
            if self._pending is not None:
                self._pending.remove(view)
            else:
                view.remove()

    def on_folded_iterations_unfold(self, message: FoldedIterations.Unfold) -> None:
        message.stop()
        folded = message.folded
        copies = [view.copy() for view in folded.take_newest()]
        for view in copies:
            self.iterations[view.number] = view
        if folded.views:
            self.mount_all(copies, after=folded)
        else:
            self.mount_all(copies, before=folded)
            folded.remove()
            self._folded = None
        self._shown = copies + self._shown
        if copies:
            copies[0].focus()

    def note(self, text: str, style: str = "yellow") -> None:
        """A note that belongs to the turn (into the current iteration when there is one)."""
        current = self.current
        if current is not None:
            current.add_note(text, style)
        else:
            self._append(Static(Text(cut(text), style=style), classes="note"))

    def finish(
        self,
        *,
        status: str,
        answer: str | None,
        error: str | None,
        tokens: int,
        cost: str,
        duration_ms: float | None,
    ) -> None:
        """The turn ended: collapse its last iteration, show the answer and a summary line."""
        if self.finished:
            return
        self.finished = True
        self.status = status
        self.answer = answer
        current = self.current
        if current is not None and current.live:
            current.finish()
        # One widget for error, answer and summary: every widget in the pane adds to the cost
        # of each layout change, so a finished turn stays small.
        parts: list[RenderableType] = []
        if error:
            parts.append(Text(cut(error), style="red"))
        if answer:
            parts.append(Markdown(cut(answer, ANSWER_CHARS)))
        took = f" · {duration(duration_ms)}" if duration_ms is not None else ""
        line = f"{status} · {len(self.iterations)} iteration(s) · {tokens:,} tokens · {cost}{took}"
        parts.append(Text(line, style="dim"))
        self._append(Static(Group(*parts), classes="turn-end"))
