"""``IterationView``: one iteration of a turn, live while it runs, one line once it is done.

It is a single widget that renders its header line and, when expanded, its body: the reply as
it streams (its last lines), then the thinking, each code block with its outcome, and notes.
Textual re-arranges every widget of a scrolling pane when one changes size, so one widget per
iteration (not one per block) keeps that cost small; an event re-renders only the iteration it
belongs to, and lays the pane out again only when the iteration's height changed. Code is
highlighted when first drawn, so folded and collapsed iterations never pay for it. A block
cursor (Up/Down, j/k) walks the blocks of expanded iterations and moves on to the neighbouring
iterations at either end; ``c`` and ``v`` copy the selected block's code and value. A block's
figures show as one placeholder line each; ``o`` opens the selected block's figures
(collapsed: all of the iteration's), see ``channels/tui/figures.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import ClassVar

from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.padding import Padding
from rich.segment import Segment
from rich.syntax import Syntax
from rich.text import Text
from textual.binding import Binding, BindingType
from textual.containers import ScrollableContainer
from textual.geometry import Region, Size
from textual.message import Message
from textual.widget import Widget

from cove.channels.figures import FigureRef
from cove.channels.tui.format import clean, cut, duration, one_line
from cove.results import BlockFigure, BlockResult, VarVersion

#: Characters of the streaming reply kept, and lines of it shown, while it arrives.
STREAM_KEEP = 2000
STREAM_LINES = 8
#: Lines a live iteration takes in the pane, whatever it holds so far (its header, then the
#: last lines of its body): its events then repaint it and never lay the pane out again.
LIVE_LINES = 12
SELECTED = "on #26323a"


def code_piece(code: str) -> Text:
    """Python source, syntax highlighted (control characters made visible first).

    Highlighted once into a ``Text``: a ``Syntax`` would run the lexer again on every render
    of its iteration, and the live iteration renders with every event.
    """
    source = cut(code)
    text = Syntax(source, "python", theme="ansi_dark", word_wrap=True).highlight(source)
    text.rstrip()
    return text


def figure_line(figure: BlockFigure, path: Path | None) -> Text:
    """A figure's placeholder: ``▣ figure 1 · title · 500×300 px``, then its file or ``o``."""
    title = f" · {cut(figure.title, 200)}" if figure.title else ""
    where = f" · {clean(str(path))}" if path is not None else " · o opens it"
    return Text.assemble(
        ("▣ ", "magenta"),
        (f"figure {figure.position + 1}{title} · {figure.width}×{figure.height} px", "magenta"),
        (where, "dim"),
    )


class Tail:
    """The first line of a renderable, then as many of its last lines as fit in ``lines``."""

    def __init__(self, renderable: RenderableType, lines: int) -> None:
        self.renderable = renderable
        self.lines = lines

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        rendered = console.render_lines(self.renderable, options.update(height=None), pad=False)
        kept = (
            rendered if len(rendered) <= self.lines else [rendered[0], *rendered[1 - self.lines :]]
        )
        new_line = Segment.line()
        for index, line in enumerate(kept):
            yield from line
            if index + 1 < len(kept):
                yield new_line


@dataclass
class BlockShown:
    """One code block of an iteration: its source and, once it ran, its outcome."""

    code: str
    outcome: list[RenderableType] = field(default_factory=list)
    value: str | None = None
    figures: tuple[BlockFigure, ...] = ()
    saved: dict[int, Path] = field(default_factory=dict)  # figure position → its file

    @cached_property
    def shown(self) -> Text:
        """The code, highlighted when first drawn (a collapsed iteration never is)."""
        return code_piece(self.code)

    def renderable(self, selected: bool) -> RenderableType:
        """The block as shown: code, then output, value or error (highlighted when selected)."""
        lines = [figure_line(f, self.saved.get(f.position)) for f in self.figures]
        body = Group(self.shown, *self.outcome, *lines)
        return Padding(body, (0, 0, 0, 2), style=SELECTED if selected else "")


class IterationView(Widget, can_focus=True):
    """An iteration: header line plus a collapsible body; Enter expands or collapses it."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "expand", "Expand/collapse"),
        Binding("down,j", "next_block", "Next block", show=False),
        Binding("up,k", "previous_block", "Previous block", show=False),
        Binding("i", "inspect", "Inspect"),
        Binding("c", "copy_code", "Copy code"),
        Binding("v", "copy_value", "Copy value"),
        Binding("o", "open_figures", "Open figure"),
    ]

    class InspectRequested(Message):
        """The person asked to inspect this iteration."""

        def __init__(self, view: IterationView) -> None:
            super().__init__()
            self.view = view

    class FiguresRequested(Message):
        """The person asked to open figures of this iteration (with where each was made)."""

        def __init__(self, view: IterationView, found: list[tuple[FigureRef, BlockFigure]]):
            super().__init__()
            self.view = view
            self.found = found

    def __init__(self, turn_position: int, number: int, budget: int | None, *, live: bool):
        super().__init__(classes="iteration")
        self.turn_position = turn_position
        self.number = number  # 1-based, as events count
        self.budget = budget
        self.live = live
        self.expanded = live
        self.done_blocks = 0
        self.failed_blocks = 0
        self.time_ms = 0.0
        self.summary = ""
        self.received = 0  # characters of the reply streamed so far
        self.streamed = ""  # its last STREAM_KEEP characters, until the reply is read
        self.retrying = ""  # "retrying (1 of 5): …" while the endpoint is being retried
        self.selected: int | None = None  # the block under the cursor
        self.block_views: list[BlockShown] = []
        self.lead: list[RenderableType] = []  # thinking, an unreadable reply
        self.notes: list[RenderableType] = []  # variables written, nudges, steering

    @property
    def codes(self) -> list[str]:
        """The source of each code block."""
        return [b.code for b in self.block_views]

    @property
    def values(self) -> list[str]:
        """The values of the blocks that produced one, in order."""
        return [b.value for b in self.block_views if b.value is not None]

    @property
    def pieces(self) -> list[RenderableType]:
        """The body as it is shown when expanded."""
        stream: list[RenderableType] = []
        if self.streamed:
            tail = clean(self.streamed).splitlines()[-STREAM_LINES:]
            stream.append(Text("\n".join(tail), style="dim"))
        blocks = [b.renderable(i == self.selected) for i, b in enumerate(self.block_views)]
        return [*stream, *self.lead, *blocks, *self.notes]

    def render(self) -> RenderableType:
        header = self.header()
        if self.content_size.width:  # one line whatever the width: cut, never wrapped
            header.truncate(self.content_size.width, overflow="ellipsis")
        if not self.expanded:
            return header
        body = Group(header, *(Padding(piece, (0, 0, 0, 2)) for piece in self.pieces))
        return Tail(body, LIVE_LINES) if self._tailed else body

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        """One line collapsed (its header is cut, never wrapped), ``LIVE_LINES`` while it runs;
        otherwise as tall as its content. Known without rendering in the first two cases: every
        layout of the pane measures every iteration in it."""
        if not self.expanded:
            return 1
        if self._tailed:
            return LIVE_LINES
        return super().get_content_height(container, viewport, width)

    @property
    def _tailed(self) -> bool:
        """Shown as its header and last lines, in ``LIVE_LINES``: while it runs, unless the
        block cursor is in it (then all of it shows, so the cursor can reach every block)."""
        return self.live and self.expanded and self.selected is None

    # -- content ---------------------------------------------------------------------------

    def copy(self) -> IterationView:
        """A new, unmounted view with the same content (a removed widget cannot be mounted)."""
        twin = IterationView(self.turn_position, self.number, self.budget, live=False)
        for name in ("done_blocks", "failed_blocks", "time_ms", "summary", "received"):
            setattr(twin, name, getattr(self, name))
        twin.block_views = list(self.block_views)
        twin.lead, twin.notes = list(self.lead), list(self.notes)
        return twin

    def add_retry(self, text: str) -> None:
        """The endpoint failed for a moment and the request is sent again (``text`` says so)."""
        self.retrying = text
        self._refresh()

    def add_delta(self, text: str) -> None:
        """A chunk of the reply as it streams: its last lines show until the reply is read."""
        self.retrying = ""
        self.received += len(text)
        self.streamed = (self.streamed + text)[-STREAM_KEEP:]
        if self.expanded:
            self._refresh()

    def add_reply(
        self, thinking: str | None, code: Sequence[str], parse_error: str | None = None
    ) -> None:
        """The model's reply: thinking, code blocks, or why it could not be read."""
        self.streamed = ""
        self.retrying = ""
        if thinking:
            self.summary = one_line(thinking)
            self.lead.append(Text(cut(thinking), style="dim italic"))
        if parse_error:
            self.summary = "unreadable reply"
            self.lead.append(Text("unreadable reply: " + cut(parse_error), style="red"))
        self.block_views += [BlockShown(source) for source in code]
        self._changed()

    def add_block(self, number: int, block: BlockResult) -> None:
        """A finished code block (``number`` from 1): output, value or error, and its time."""
        index = number - 1
        if not 0 <= index < len(self.block_views):
            self.block_views.append(BlockShown(block.code))
            index = len(self.block_views) - 1
        shown = self.block_views[index]
        shown.figures = block.figures
        self.done_blocks += 1
        self.time_ms += block.duration_ms
        if block.stdout:
            shown.outcome.append(Text(cut(block.stdout.rstrip()), style="default"))
        if block.stderr:
            shown.outcome.append(Text(cut(block.stderr.rstrip()), style="yellow"))
        if block.ok:
            if block.result_preview is not None:
                shown.value = block.result_preview
                shown.outcome.append(Text.assemble(("→ ", "green"), cut(block.result_preview)))
            shown.outcome.append(Text(f"block {index + 1} · {duration(block.duration_ms)}", "dim"))
        else:
            self.failed_blocks += 1
            what = "timed out" if block.timed_out else "failed"
            line = f"✗ {what} after {duration(block.duration_ms)}: {cut(block.error or '')}"
            shown.outcome.append(Text(line, style="red"))
        self._refresh()

    def add_vars(self, changes: Sequence[VarVersion]) -> None:
        """Variables the iteration wrote."""
        shown = ", ".join(
            f"{c.name} deleted" if c.kind == "deleted" else f"{c.name} v{c.version} ({c.type_name})"
            for c in changes[:12]
        )
        more = f" +{len(changes) - 12} more" if len(changes) > 12 else ""
        self.notes.append(Text.assemble(("variables: ", "magenta"), clean(shown) + more))
        self._changed()

    def add_note(self, text: str, style: str = "yellow") -> None:
        """A nudge, a sandbox restart, a steering message."""
        self.notes.append(Text(cut(text), style=style))
        self._changed()

    def finish(self) -> None:
        """The iteration is over: collapse it to its header line."""
        self.live = False
        self.expanded = False
        self.streamed = ""
        self._refresh()

    # -- actions ---------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ("copy_code", "copy_value"):
            return bool(self.block_views)  # else the key does what the pane does with it
        if action == "open_figures":
            return bool(self.figures_chosen())
        return True

    def action_expand(self) -> None:
        self.expanded = not self.expanded
        if self.expanded and self.selected is None and self.block_views:
            self.selected = 0
        self._refresh()

    def action_inspect(self) -> None:
        self.post_message(self.InspectRequested(self))

    def action_next_block(self) -> None:
        if self.expanded and self.selected is not None and self.selected + 1 < len(self.codes):
            self.select(self.selected + 1)
        else:
            self._leave(forward=True)

    def action_previous_block(self) -> None:
        if self.expanded and self.selected is not None and self.selected > 0:
            self.select(self.selected - 1)
        else:
            self._leave(forward=False)

    def action_copy_code(self) -> None:
        chosen = self._chosen()
        text = "\n\n".join(self.codes) if chosen is None else chosen.code
        self.app.copy_to_clipboard(text)
        self.notify("code copied" if chosen is None else f"block {self.selected_label} copied")

    def action_copy_value(self) -> None:
        chosen = self._chosen()
        last = self.values[-1] if self.values else None
        value = chosen.value if chosen is not None else last
        if value is None:
            self.notify("that block has no value", severity="warning")
            return
        self.app.copy_to_clipboard(value)
        self.notify("value copied")

    def action_open_figures(self) -> None:
        found = self.figures_chosen()
        if found:
            self.post_message(self.FiguresRequested(self, found))

    def figures_chosen(self) -> list[tuple[FigureRef, BlockFigure]]:
        """The selected block's figures (none selected: every block's), with where each was
        made."""
        chosen = self._chosen()
        return [
            ((self.turn_position, self.number, index + 1), figure)
            for index, block in enumerate(self.block_views)
            if chosen is None or block is chosen
            for figure in block.figures
        ]

    def figures_saved(self, paths: dict[tuple[int, int, int, int], Path]) -> None:
        """Show the file of each figure written ((turn, iteration, block, position) → path)."""
        for (turn, number, block, position), path in paths.items():
            if (turn, number) == (self.turn_position, self.number):
                self.block_views[block - 1].saved[position] = path
        self._refresh()

    # -- the block cursor ------------------------------------------------------------------

    @property
    def selected_label(self) -> str:
        """``2/3`` for the second of three blocks, or empty."""
        return "" if self.selected is None else f"{self.selected + 1}/{len(self.block_views)}"

    def select(self, index: int | None) -> None:
        """Put the block cursor on block ``index`` (from 0) and show it."""
        self.selected = index
        self._refresh()
        if index is not None and self.is_mounted:
            self.call_after_refresh(self._show_selected)

    def on_focus(self) -> None:
        if self.selected is None and self.block_views and self.expanded:
            self.select(0)

    def on_blur(self) -> None:
        if self.selected is not None:
            self.selected = None
            self._refresh()

    def _chosen(self) -> BlockShown | None:
        if self.expanded and self.selected is not None:
            return self.block_views[self.selected]
        return None

    def _leave(self, *, forward: bool) -> None:
        """Move the focus to the neighbouring iteration, its cursor on the nearest block.

        The ends of the pane stay put (no wrapping round to the other end)."""
        chain = [w for w in self.screen.focus_chain if w.has_class("iteration")]
        index = chain.index(self) + (1 if forward else -1) if self in chain else -1
        if not 0 <= index < len(chain):
            return
        target = chain[index]
        target.focus()
        if isinstance(target, IterationView) and target.expanded and target.block_views:
            target.select(0 if forward else len(target.block_views) - 1)

    def _show_selected(self) -> None:
        """Scroll so the selected block is in view (the widget may be taller than the pane)."""
        if self.selected is None or not self.expanded:
            return
        options = self.app.console.options.update_width(max(1, self.content_size.width - 4))
        shown = [self.header(), *self.pieces]
        first = len(shown) - len(self.notes) - len(self.block_views) + self.selected
        top = sum(len(self.app.console.render_lines(p, options)) for p in shown[:first])
        height = len(self.app.console.render_lines(shown[first], options))
        # Offsets add up from this widget to the scrolling pane that holds it.
        node: Widget = self
        while isinstance(node.parent, Widget) and not isinstance(node.parent, ScrollableContainer):
            top += node.virtual_region.y
            node = node.parent
        if isinstance(node.parent, ScrollableContainer):
            top += node.virtual_region.y
            node.parent.scroll_to_region(Region(0, top, 1, height), animate=False)

    # -- internals -------------------------------------------------------------------------

    def _changed(self) -> None:
        if self.expanded:
            self._refresh()

    def _refresh(self) -> None:
        """Repaint; lay the pane out again only when the height changed.

        A layout re-arranges every widget of the pane, and most changes keep the height (a
        streamed chunk once the last lines show, a header, the block cursor). Measuring renders
        the iteration, which the repaint reuses.
        """
        if not self.is_mounted:
            return
        self.refresh()
        size = self.content_size
        if not size.width or self.get_content_height(size, size, size.width) != size.height:
            self.refresh(layout=True)

    def header(self) -> Text:
        """The one line shown for the iteration."""
        marker = "▾" if self.expanded else "▸"
        budget = f"/{self.budget}" if self.budget else ""
        parts = [f"{marker} iteration {self.number}{budget}"]
        if self.live and self.retrying:
            parts.append(self.retrying)
        elif self.live:
            receiving = f" ({self.received:,} chars)" if self.received and not self.summary else ""
            parts.append("running…" + receiving)
        if self.done_blocks:
            failed = f", {self.failed_blocks} failed" if self.failed_blocks else ""
            parts.append(f"{self.done_blocks} block(s){failed} · {duration(self.time_ms)}")
        if self.selected is not None and self.expanded:
            parts.append(f"block {self.selected_label}")
        if self.summary:
            parts.append(self.summary)
        return Text(
            " · ".join(parts),
            style="bold" if self.live else "dim",
            no_wrap=True,
            overflow="ellipsis",
        )
