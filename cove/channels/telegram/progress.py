"""The status line of a running turn: what the one status message says as events arrive."""

from __future__ import annotations

from dataclasses import dataclass, field

from cove.events import (
    BlockFinished,
    BlockStarted,
    Event,
    IterationStarted,
    ModelReply,
    ModelRetry,
    TurnFinished,
    TurnStarted,
)

PREVIEW_CHARS = 160
CODE_CHARS = 80

_ENDINGS = {
    "done": "✅ Done",
    "cancelled": "⏹ Cancelled",
    "max_iterations": "⚠️ Stopped: out of iterations",
    "error_budget": "⚠️ Stopped: too many errors in a row",
    "failed": "❌ Failed",
    "interrupted": "❌ Interrupted",
}


def _short(text: str, limit: int) -> str:
    one_line = " ".join(text.split())
    return one_line if len(one_line) <= limit else one_line[: limit - 1] + "…"


@dataclass
class StatusLine:
    """Folds a turn's events into the few lines the status message shows (plain text)."""

    iteration: int = 0
    budget: int = 0
    doing: str = "thinking"
    preview: str = ""
    blocks: int = 0
    ended: str | None = None
    notes: list[str] = field(default_factory=list)

    def update(self, event: Event) -> bool:
        """Take one event; True when the shown text may have changed."""
        if isinstance(event, TurnStarted):
            self.doing = "thinking"
        elif isinstance(event, IterationStarted):
            self.iteration, self.budget = event.iteration, event.budget  # counted from 1
            self.doing = "thinking"
        elif isinstance(event, ModelRetry):
            self.doing = f"retrying ({event.attempt} of {event.of}): {event.reason}"
        elif isinstance(event, ModelReply):
            self.doing = "answering" if event.answer is not None and not event.code else "coding"
        elif isinstance(event, BlockStarted):
            self.doing = "running " + _short(event.code.strip().splitlines()[0], CODE_CHARS)
        elif isinstance(event, BlockFinished):
            self.blocks += 1
            self.preview = _block_preview(event)
        elif isinstance(event, TurnFinished):
            self.ended = _ending(event)
        else:
            return False
        return True

    def text(self) -> str:
        """The status message's text."""
        if self.ended is not None:
            return self.ended
        head = "⚙️ Working"
        if self.iteration:
            head += f" · iteration {self.iteration}/{self.budget}"
        lines = [head, f"▶ {self.doing}"]
        if self.preview:
            lines.append(f"↳ {self.preview}")
        return "\n".join(lines)


def _block_preview(event: BlockFinished) -> str:
    block = event.block
    if block.timed_out:
        return "timed out"
    if not block.ok:
        return "error: " + _short(block.error or "", PREVIEW_CHARS)
    shown = block.stdout.strip() or (block.result_preview or "")
    return _short(shown, PREVIEW_CHARS) if shown else "ok"


def _ending(event: TurnFinished) -> str:
    head = _ENDINGS.get(event.status, event.status)
    plural = "" if event.iterations == 1 else "s"
    parts = [head, f"{event.iterations} iteration{plural}", f"{event.duration_ms / 1000:.1f} s"]
    text = " · ".join(parts)
    if event.error and event.status != "done":
        text += f"\n{_short(event.error, 400)}"
    return text
