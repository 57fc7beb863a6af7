"""``PromptArea``: the multi-line input. Enter sends, Shift+Enter or Ctrl+J adds a line,
Up/Down on the first/last line walk the history of sent requests."""

from __future__ import annotations

from textual import events
from textual.message import Message
from textual.widgets import TextArea


class PromptArea(TextArea):
    """The request editor."""

    class Submitted(Message):
        """The person pressed Enter on a non-empty request."""

        def __init__(self, text: str) -> None:
            super().__init__()
            self.text = text

    def __init__(self) -> None:
        super().__init__(id="prompt", soft_wrap=True, show_line_numbers=False)
        self.sent: list[str] = []
        self._recall: int | None = None  # index into history while walking it
        self._draft = ""

    async def _on_key(self, event: events.Key) -> None:
        if event.key == "enter":
            event.prevent_default()
            event.stop()
            self._submit()
        elif event.key in ("shift+enter", "ctrl+j"):
            event.prevent_default()
            event.stop()
            self.insert("\n")
        elif event.key == "up" and self.cursor_location[0] == 0 and self.sent:
            event.prevent_default()
            event.stop()
            self._walk(-1)
        elif event.key == "down" and self._recall is not None and self._on_last_line():
            event.prevent_default()
            event.stop()
            self._walk(+1)
        else:
            await super()._on_key(event)

    def _on_last_line(self) -> bool:
        return self.cursor_location[0] >= self.document.line_count - 1

    def _submit(self) -> None:
        text = self.text.strip()
        if not text:
            return
        if not self.sent or self.sent[-1] != text:
            self.sent.append(text)
        self._recall = None
        self._draft = ""
        self.text = ""
        self.post_message(self.Submitted(text))

    def _walk(self, step: int) -> None:
        if self._recall is None:
            self._draft = self.text
            index = len(self.sent)
        else:
            index = self._recall
        index += step
        if index >= len(self.sent):
            self._recall = None
            self.text = self._draft
        else:
            self._recall = max(0, index)
            self.text = self.sent[self._recall]
        self.move_cursor(self.document.end)
