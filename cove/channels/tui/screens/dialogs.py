"""Small modal dialogs: ask for a line of text, confirm a destructive action, approve a call."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label

from cove.channels.tui.format import clean
from cove.conversation import ApprovalAnswer, ApprovalRequest


class AskText(ModalScreen[str | None]):
    """One question, one line of answer; Enter confirms, Esc cancels (returns None)."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "dismiss_none", "Cancel")]

    def __init__(self, question: str, value: str = "", placeholder: str = "") -> None:
        super().__init__(classes="dialog")
        self.question = question
        self.value = value
        self.placeholder = placeholder

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog-box"):
            yield Label(Text(clean(self.question)))
            yield Input(value=self.value, placeholder=self.placeholder, id="answer")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.dismiss(event.value.strip() or None)

    def action_dismiss_none(self) -> None:
        self.dismiss(None)


class Confirm(ModalScreen[bool]):
    """A yes/no question; ``y`` or the Yes button confirms, ``n``/Esc declines."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "answer(True)", "Yes"),
        Binding("n,escape", "answer(False)", "No"),
    ]

    def __init__(self, question: str) -> None:
        super().__init__(classes="dialog")
        self.question = question

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog-box"):
            yield Label(Text(clean(self.question)))
            with Horizontal(classes="buttons"):
                yield Button("Yes (y)", variant="error", id="yes")
                yield Button("No (n)", id="no")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)


class Approve(ModalScreen[ApprovalAnswer]):
    """Approve or deny one extension call: ``y`` once, ``a`` for the rest of the conversation,
    ``n``/Esc denies."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "answer(True, False)", "Approve"),
        Binding("a", "answer(True, True)", "Always"),
        Binding("n,escape", "answer(False, False)", "Deny"),
    ]

    def __init__(self, request: ApprovalRequest) -> None:
        super().__init__(classes="dialog")
        self.request = request

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog-box", id="approval"):
            yield Label(Text("Approval needed", style="bold"))
            yield Label(Text(clean(self.request.text)))
            with Horizontal(classes="buttons"):
                yield Button("Approve (y)", variant="primary", id="approve")
                yield Button("Always (a)", id="always")
                yield Button("Deny (n)", variant="error", id="deny")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        approved = event.button.id in ("approve", "always")
        self.dismiss(ApprovalAnswer(approved, remember=event.button.id == "always"))

    def action_answer(self, approved: bool, remember: bool) -> None:
        self.dismiss(ApprovalAnswer(approved, remember=remember))
