"""Terminal rendering of events: rich on a terminal, plain text when piped.

Everything ``cove`` writes goes out through this module, and text from a model, the sandbox or
the data it read may carry escape sequences (the clipboard, the window title, a cleared
screen). On a terminal every such text is made visible with ``cove.text.clean`` first: through
``line``/``cut`` for rich output, ``print_table`` for tables, ``write_text`` for whole texts
(``run``'s answer, ``export``'s document). Into a pipe or a file ``write_text`` stays
byte-exact, and JSON is written with no raw control character at all (``json_escaped``).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, TextIO

from rich.console import Console, RenderableType
from rich.text import Text

from cove.conversation import turn_of
from cove.events import (
    AnswerRefused,
    BlockFinished,
    BlockStarted,
    Event,
    IterationStarted,
    ModelReply,
    ModelRetry,
    SandboxRestarted,
    TitleChanged,
    TurnFinished,
    TurnQueued,
    TurnStarted,
    VarsChanged,
)
from cove.text import clean, json_escaped, shown

if TYPE_CHECKING:  # drawn only on a terminal: imported there, so piped output never pays
    from rich.live import Live
    from rich.spinner import Spinner
    from rich.status import Status

PREVIEW_CHARS = 400
#: How a block stopped by a cancelled turn reports its error.
STOPPED = "CancelledError"


def for_stream(text: str, stream: TextIO) -> str:
    """``text`` as it may be written to ``stream``: control characters made visible on a
    terminal (``clean``), byte-exact into a pipe or a file."""
    return clean(text) if stream.isatty() else text


def write_text(text: str, stream: TextIO | None = None) -> None:
    """Write ``text`` as is to a pipe or a file, with its controls made visible on a terminal."""
    out = stream or sys.stdout
    out.write(for_stream(text, out))
    out.flush()


def console_for(stream: TextIO) -> Console:
    """A console writing to ``stream``; colours, widgets and wrapping only on a terminal."""
    return Console(file=stream, highlight=False, soft_wrap=not stream.isatty())


def line(*parts: str | tuple[str, str]) -> Text:
    """One line of plain strings and ``(text, style)`` pairs; text is never read as markup and
    its control characters are made visible (``clean``)."""
    return Text.assemble(*(clean(p) if isinstance(p, str) else (clean(p[0]), p[1]) for p in parts))


def cut(text: str, limit: int = PREVIEW_CHARS) -> str:
    """``text`` made safe to show (``clean``) and cut to ``limit`` characters with a marker."""
    return clean(shown(text, limit))


def print_table(
    console: Console, headers: Sequence[str], rows: Iterable[Sequence[str | Text]]
) -> None:
    """A table: drawn with borders on a terminal, tab-separated lines (header first) when piped.

    On a terminal text cells are made safe (``clean``; ``Text`` cells are built safe, with
    ``line``). Piped cells have tabs and line breaks replaced by spaces, so every row stays one
    line.
    """
    if console.is_terminal:
        from rich.table import Table

        table = Table(*headers)
        for row in rows:
            table.add_row(*(cell if isinstance(cell, Text) else Text(clean(cell)) for cell in row))
        console.print(table)
        return
    for row in (headers, *rows):
        cells = (str(cell).replace("\t", " ").replace("\n", " ") for cell in row)
        console.file.write("\t".join(cells) + "\n")
    console.file.flush()


class RunProgress:
    """One transient status line on a terminal while a turn runs: iteration, block, time.

    Used on stderr by ``cove run``, whose stdout is the answer; it leaves nothing behind. Each
    event's text is drawn as it comes (the spinner animates between), so a quick iteration is
    still shown.
    """

    def __init__(self, console: Console) -> None:
        self.console = console
        self._live: Live | None = None
        self._spinner: Spinner | None = None
        self._iteration = ""
        self._started = time.monotonic()

    def handle(self, event: Event) -> None:
        """Update the line for one event."""
        if isinstance(event, IterationStarted):
            self._iteration = f"iteration {event.iteration}/{event.budget}"
            self._show(f"{self._iteration} · the model is thinking…")
        elif isinstance(event, BlockStarted):
            first = event.code.strip().splitlines()[0] if event.code.strip() else ""
            self._show(f"{self._iteration} · block {event.index} running: {cut(first, 60)}")
        elif isinstance(event, ModelRetry):
            self._show(f"{self._iteration} · {retrying(event)}")
        elif isinstance(event, TurnQueued):
            self._show("waiting for the running turn of this conversation…")
        elif isinstance(event, TurnFinished):
            self.close()

    def _show(self, text: str) -> None:
        from rich.live import Live
        from rich.spinner import Spinner

        if self._spinner is None:
            self._spinner = Spinner("dots", style="status.spinner")
        self._spinner.update(text=f"{text} ({time.monotonic() - self._started:.0f}s)")
        if self._live is None:
            self._live = Live(self._spinner, console=self.console, transient=True)
            self._live.start(refresh=True)
        else:
            self._live.refresh()

    def close(self) -> None:
        """Remove the line."""
        if self._live is not None:
            self._live.stop()
            self._live = None


def took(ms: float) -> str:
    """A duration for people: ``38ms`` below a second (a fast turn is not ``0.0s``), else
    ``1.2s``."""
    return f"{max(ms, 1):.0f}ms" if ms < 999.5 else f"{ms / 1000:.1f}s"


class ProgressView:
    """Shows a turn's progress: iterations, code, results, variables, the answer.

    Attached to a turn already running (``cove watch``), it heads the first event it sees with
    the turn and iteration it belongs to.
    """

    def __init__(self, console: Console, *, show_answer: bool = True) -> None:
        self.console = console
        self.show_answer = show_answer
        self._status: Status | None = None
        self._turn: int | None = None  # the turn (row id) whose header is shown
        self._iteration: int | None = None  # the iteration whose header is shown

    def handle(self, event: Event) -> None:
        """Render one event."""
        c = self.console
        if isinstance(event, (ModelReply, TurnFinished)):
            self._stop_spinner()
        self._head(event)
        if isinstance(event, TurnQueued):
            c.print("[dim]waiting for the running turn of this conversation…[/dim]")
        elif isinstance(event, TurnStarted):
            c.print(line((f"turn {event.position} of {event.conversation_id[:12]}", "dim")))
        elif isinstance(event, IterationStarted):
            c.print(f"[bold cyan]iteration {event.iteration}/{event.budget}[/bold cyan]")
            self._start_spinner("the model is thinking…")
        elif isinstance(event, ModelReply):
            self._reply(event)
        elif isinstance(event, ModelRetry):
            self._stop_spinner()
            c.print(line((retrying(event), "yellow")))
            self._start_spinner("the model is thinking…")
        elif isinstance(event, BlockFinished):
            self._block(event)
        elif isinstance(event, VarsChanged):
            shown = ", ".join(f"{v.name} v{v.version} ({v.type_name})" for v in event.changes[:12])
            more = f" +{len(event.changes) - 12} more" if len(event.changes) > 12 else ""
            c.print(line(("variables: ", "magenta"), shown + more))
        elif isinstance(event, SandboxRestarted):
            lost = ", ".join(event.lost) or "nothing"
            c.print(line(("sandbox restarted", "red"), f" ({event.reason}); lost: {lost}"))
        elif isinstance(event, AnswerRefused):
            c.print(line((cut(event.reason), "red")))
        elif isinstance(event, TitleChanged):
            c.print(line((f"title: {event.title}", "dim")))
        elif isinstance(event, TurnFinished):
            self._finished(event)

    def close(self) -> None:
        """Stop any spinner."""
        self._stop_spinner()

    def _head(self, event: Event) -> None:
        """Note the turn and iteration ``event`` belongs to; head it when it begins unseen."""
        turn_id: int | None = getattr(event, "turn_id", None)
        if turn_id is None:
            return
        if isinstance(event, TurnStarted):
            self._turn, self._iteration = turn_id, None
        elif turn_id != self._turn:
            self._turn, self._iteration = turn_id, None
            position = f"{turn_of(event.seq)} " if event.seq else ""
            of = event.conversation_id[:12]
            self.console.print(line((f"turn {position}of {of} (already running)", "dim")))
        iteration: int | None = getattr(event, "iteration", None)
        if iteration is None or iteration == self._iteration:
            return
        self._iteration = iteration
        if not isinstance(event, IterationStarted):
            self.console.print(f"[bold cyan]iteration {iteration}[/bold cyan]")

    def _reply(self, event: ModelReply) -> None:
        c = self.console
        if event.parse_error:
            c.print(line(("unreadable reply: ", "red"), cut(event.parse_error)))
            return
        if event.thinking:
            c.print(line((cut(event.thinking), "dim italic")))
        for code in event.code:
            c.print(python_code(clean(code)))
        if event.code:
            self._start_spinner("running code…")

    def _block(self, event: BlockFinished) -> None:
        c, block = self.console, event.block
        if block.stdout:
            c.print(cut(block.stdout.rstrip()), markup=False)
        if block.ok:
            if block.result_preview is not None:
                c.print(line(("→ ", "green"), cut(block.result_preview)))
        elif (block.error or "").startswith(STOPPED):
            c.print(line((f"✗ block {event.index} stopped: the turn was cancelled", "red")))
        else:
            c.print(line(("✗ " + cut(block.error or "failed"), "red")))

    def _finished(self, event: TurnFinished) -> None:
        c = self.console
        cost = (
            f"${event.usage.cost_usd:.4f}" if event.cost_known else "cost unknown (unpriced model)"
        )
        summary = (
            f"{event.status} · {event.iterations} iteration(s) · "
            f"{event.usage.tokens_in + event.usage.tokens_out:,} tokens · {cost} · "
            f"{took(event.duration_ms)}"
        )
        if event.error:
            c.print(line((event.error, "red")))
        if self.show_answer and event.answer:
            c.print(markdown(clean(event.answer)) if c.is_terminal else event.answer, markup=False)
        c.print(line((summary, "dim")))

    def _start_spinner(self, text: str) -> None:
        if not self.console.is_terminal:
            return
        self._stop_spinner()
        self._status = self.console.status(text)
        self._status.start()

    def _stop_spinner(self) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None


def retrying(event: ModelRetry) -> str:
    """``retrying (2 of 5): server error (HTTP 503)``."""
    return f"retrying ({event.attempt} of {event.of}): {event.reason}"


def print_json(data: object, stream: TextIO | None = None) -> None:
    """Write ``data`` as one JSON document (no raw control character in it, ``json_escaped``)."""
    out = stream or sys.stdout
    out.write(json_escaped(json.dumps(data, ensure_ascii=False, indent=2, default=str)) + "\n")
    out.flush()


def print_json_line(data: object, stream: TextIO | None = None) -> None:
    """Write ``data`` as one JSON line (for event streams), as ``print_json``."""
    out = stream or sys.stdout
    out.write(json_escaped(json.dumps(data, ensure_ascii=False, default=str)) + "\n")
    out.flush()


def markdown(text: str) -> RenderableType:
    """``text`` rendered as Markdown for a terminal (rich's Markdown is imported only then:
    it costs a command that prints no answer a tenth of a second)."""
    from rich.markdown import Markdown

    return Markdown(text)


def python_code(code: str) -> RenderableType:
    """``code`` highlighted as Python for a terminal (rich's Syntax, with pygments, is imported
    only when code is shown)."""
    from rich.syntax import Syntax

    return Syntax(code, "python", theme="ansi_dark", line_numbers=False)
