"""``StatusBar``: model, conversation, iteration n/M, the turn's tokens and cost, endpoint state."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static


class StatusBar(Static):
    """One line at the bottom; each field is set on its own and the line redrawn."""

    def __init__(self, model: str) -> None:
        super().__init__(id="status")
        self.model = model
        self.conversation = "-"
        self.iteration = ""
        self.usage = ""
        self.endpoint = "endpoint: ?"
        self.queued = False
        self._line = Text()

    def set(self, **fields: str | bool) -> None:
        """Change some fields (``model``, ``conversation``, ``iteration``, ``usage``, …)."""
        for name, value in fields.items():
            setattr(self, name, value)
        parts: list[str | tuple[str, str]] = [
            (f" {self.model} ", "bold"),
            f" {self.conversation} ",
        ]
        if self.iteration:
            parts.append((f" iteration {self.iteration} ", "cyan"))
        if self.usage:
            parts.append(f" {self.usage} ")
        if self.queued:
            parts.append((" queued ", "black on yellow"))
        parts.append((f" {self.endpoint} ", "dim"))
        line = Text.assemble(*parts)
        if line != self._line:
            self._line = line
            self.update(line, layout=False)  # one line, always: a repaint, never a layout
