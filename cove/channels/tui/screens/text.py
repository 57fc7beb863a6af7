"""``TextScreen``: a full screen of Markdown (replay report, help); Esc or q closes it."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Footer, Markdown


class TextScreen(ModalScreen[None]):
    """Read-only Markdown."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,q", "app.pop_screen", "Close")]

    def __init__(self, markdown: str, screen_id: str) -> None:
        super().__init__(id=screen_id)
        self.markdown = markdown

    def compose(self) -> ComposeResult:
        with VerticalScroll(classes="text-screen"):
            yield Markdown(self.markdown)
        yield Footer()
