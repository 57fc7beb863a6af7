"""``TurnView``: a request, its iterations, notes, the answer and the turn's summary line."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.markdown import Markdown
from rich.text import Text
from textual.containers import Vertical
from textual.widgets import Static

from cove.channels.tui.format import duration
from cove.channels.tui.widgets.iteration import IterationView


class TurnView(Vertical):
    """One turn; widgets are appended as its events arrive, never rebuilt."""

    def __init__(self, turn_id: int, position: int, request: str) -> None:
        super().__init__(classes="turn")
        self.turn_id = turn_id
        self.position = position
        self.request = request
        self.finished = False
        self.status = "running"
        self.answer: str | None = None
        self.iterations: dict[int, IterationView] = {}

    def on_mount(self) -> None:
        self.mount(Static(Text.assemble((f"#{self.position} › ", "bold cyan"), self.request)))

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
            self.mount(view)
        return view

    def note(self, text: str, style: str = "yellow") -> None:
        """A note that belongs to the turn (into the current iteration when there is one)."""
        current = self.current
        if current is not None:
            current.add_note(text, style)
        else:
            self.mount(Static(Text(text, style=style), classes="note"))

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
            parts.append(Text(error, style="red"))
        if answer:
            parts.append(Markdown(answer))
        took = f" · {duration(duration_ms)}" if duration_ms is not None else ""
        line = f"{status} · {len(self.iterations)} iteration(s) · {tokens:,} tokens · {cost}{took}"
        parts.append(Text(line, style="dim"))
        self.mount(Static(Group(*parts), classes="turn-end"))
