"""``IterationView``: one iteration of a turn, live while it runs, one line once it is done.

It is a single widget that renders its header line and, when expanded, its body: a list of
renderables ("pieces") appended as events arrive. Textual re-arranges every widget of a
scrolling pane when one changes size, so one widget per iteration (not one per piece) keeps
that cost small; an event re-renders only the iteration it belongs to.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from rich.console import Group, RenderableType
from rich.padding import Padding
from rich.syntax import Syntax
from rich.text import Text
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.widget import Widget

from cove.channels.tui.format import cut, duration, one_line
from cove.results import VarVersion


def code_piece(code: str) -> RenderableType:
    """Python source, syntax highlighted."""
    return Syntax(code, "python", theme="ansi_dark", line_numbers=False, word_wrap=True)


class IterationView(Widget, can_focus=True):
    """An iteration: header line plus a collapsible body; Enter expands or collapses it."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "expand", "Expand/collapse"),
        Binding("i", "inspect", "Inspect"),
        Binding("c", "copy_code", "Copy code"),
        Binding("v", "copy_value", "Copy value"),
    ]

    class InspectRequested(Message):
        """The person asked to inspect this iteration."""

        def __init__(self, view: IterationView) -> None:
            super().__init__()
            self.view = view

    def __init__(self, turn_position: int, number: int, budget: int | None, *, live: bool):
        super().__init__(classes="iteration")
        self.turn_position = turn_position
        self.number = number  # 1-based, as events count
        self.budget = budget
        self.live = live
        self.expanded = live
        self.blocks = 0
        self.failed_blocks = 0
        self.time_ms = 0.0
        self.summary = ""
        self.received = 0  # characters of the reply streamed so far
        self.codes: list[str] = []
        self.values: list[str] = []
        self.pieces: list[RenderableType] = []

    def render(self) -> RenderableType:
        header = self.header()
        if not self.expanded:
            return header
        return Group(header, *(Padding(piece, (0, 0, 0, 2)) for piece in self.pieces))

    # -- content ---------------------------------------------------------------------------

    def copy(self) -> IterationView:
        """A new, unmounted view with the same content (a removed widget cannot be mounted)."""
        twin = IterationView(self.turn_position, self.number, self.budget, live=False)
        for name in ("blocks", "failed_blocks", "time_ms", "summary", "received"):
            setattr(twin, name, getattr(self, name))
        twin.codes, twin.values, twin.pieces = (
            list(self.codes),
            list(self.values),
            list(self.pieces),
        )
        return twin

    def add_delta(self, text: str) -> None:
        """A chunk of the reply as it streams: only the header's count changes."""
        self.received += len(text)
        if self.is_mounted:
            self.refresh()  # same height: no layout

    def add_reply(
        self, thinking: str | None, code: Sequence[str], parse_error: str | None = None
    ) -> None:
        """The model's reply: thinking, code blocks, or why it could not be read."""
        if thinking:
            self.summary = one_line(thinking)
            self._add(Text(cut(thinking), style="dim italic"))
        if parse_error:
            self.summary = "unreadable reply"
            self._add(Text("unreadable reply: " + cut(parse_error), style="red"))
        for source in code:
            self.codes.append(source)
            self._add(code_piece(source))

    def add_block(
        self,
        *,
        ok: bool,
        result_preview: str | None,
        stdout: str,
        stderr: str,
        error: str | None,
        duration_ms: float,
        timed_out: bool = False,
    ) -> None:
        """A finished code block: output, value or error, and how long it ran."""
        self.blocks += 1
        self.time_ms += duration_ms
        if stdout:
            self._add(Text(cut(stdout.rstrip()), style="default"))
        if stderr:
            self._add(Text(cut(stderr.rstrip()), style="yellow"))
        if ok:
            if result_preview is not None:
                self.values.append(result_preview)
                self._add(Text.assemble(("→ ", "green"), cut(result_preview)))
            self._add(Text(f"  block {self.blocks} · {duration(duration_ms)}", style="dim"))
        else:
            self.failed_blocks += 1
            what = "timed out" if timed_out else "failed"
            self._add(Text(f"✗ {what} after {duration(duration_ms)}: {cut(error or '')}", "red"))
        self._refresh()

    def add_vars(self, changes: Sequence[VarVersion]) -> None:
        """Variables the iteration wrote."""
        shown = ", ".join(
            f"{c.name} deleted" if c.kind == "deleted" else f"{c.name} v{c.version} ({c.type_name})"
            for c in changes[:12]
        )
        more = f" +{len(changes) - 12} more" if len(changes) > 12 else ""
        self._add(Text.assemble(("variables: ", "magenta"), shown + more))

    def add_note(self, text: str, style: str = "yellow") -> None:
        """A nudge, a sandbox restart, a steering message."""
        self._add(Text(text, style=style))

    def finish(self) -> None:
        """The iteration is over: collapse it to its header line."""
        self.live = False
        self.expanded = False
        self._refresh()

    # -- actions ---------------------------------------------------------------------------

    def action_expand(self) -> None:
        self.expanded = not self.expanded
        self._refresh()

    def action_inspect(self) -> None:
        self.post_message(self.InspectRequested(self))

    def action_copy_code(self) -> None:
        if self.codes:
            self.app.copy_to_clipboard("\n\n".join(self.codes))
            self.notify("code copied")

    def action_copy_value(self) -> None:
        if self.values:
            self.app.copy_to_clipboard(self.values[-1])
            self.notify("value copied")

    # -- internals -------------------------------------------------------------------------

    def _add(self, piece: RenderableType) -> None:
        self.pieces.append(piece)
        if self.expanded:
            self._refresh()

    def _refresh(self) -> None:
        if self.is_mounted:
            self.refresh(layout=True)

    def header(self) -> Text:
        """The one line shown for the iteration."""
        marker = "▾" if self.expanded else "▸"
        budget = f"/{self.budget}" if self.budget else ""
        parts = [f"{marker} iteration {self.number}{budget}"]
        if self.live:
            receiving = f" ({self.received:,} chars)" if self.received and not self.summary else ""
            parts.append("running…" + receiving)
        if self.blocks:
            failed = f", {self.failed_blocks} failed" if self.failed_blocks else ""
            parts.append(f"{self.blocks} block(s){failed} · {duration(self.time_ms)}")
        if self.summary:
            parts.append(self.summary)
        return Text(
            " · ".join(parts),
            style="bold" if self.live else "dim",
            no_wrap=True,
            overflow="ellipsis",
        )
