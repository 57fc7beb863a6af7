"""``Sidebar``: the conversation list with filter-as-you-type, kept current by ``watch_list``."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import Input, OptionList
from textual.widgets.option_list import Option

from cove.channels.tui.format import age, clean


@dataclass
class Entry:
    """What the sidebar knows about one conversation."""

    id: str
    title: str | None
    updated_at: float
    running: bool = False


class ConversationOptions(OptionList):
    """The list itself; its keys act on the highlighted conversation."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("r", "app.rename", "Rename"),
        Binding("d,delete", "app.delete", "Delete"),
    ]


class Sidebar(Vertical):
    """Filter input over the list of conversations, newest first."""

    class Chosen(Message):
        """The person picked a conversation."""

        def __init__(self, conversation_id: str) -> None:
            super().__init__()
            self.conversation_id = conversation_id

    def __init__(self) -> None:
        super().__init__(id="sidebar")
        self.entries: dict[str, Entry] = {}
        self.filter = ""
        self.current: str | None = None

    def compose(self) -> ComposeResult:
        yield Input(placeholder="filter conversations", id="filter")
        yield ConversationOptions(id="conversations")

    @property
    def options(self) -> ConversationOptions:
        return self.query_one(ConversationOptions)

    def shown_entries(self) -> list[Entry]:
        """The entries the filter lets through, newest first."""
        needle = self.filter.casefold()
        shown = [
            e
            for e in self.entries.values()
            if not needle or needle in (e.title or "").casefold() or e.id.startswith(needle)
        ]
        return sorted(shown, key=lambda e: e.updated_at, reverse=True)

    def set_entries(self, entries: list[Entry]) -> None:
        """Replace the whole list (at start)."""
        self.entries = {e.id: e for e in entries}
        self._rebuild()

    def upsert(self, entry: Entry) -> None:
        """Add or change one conversation."""
        self.entries[entry.id] = entry
        self._rebuild()

    def drop(self, conversation_id: str) -> None:
        """Forget one conversation."""
        if self.entries.pop(conversation_id, None) is not None:
            self._rebuild()

    def select(self, conversation_id: str) -> None:
        """Mark the conversation shown in the pane."""
        self.current = conversation_id
        self._rebuild()

    def highlighted_id(self) -> str | None:
        """The conversation under the list's cursor (else the one shown)."""
        options = self.options
        if options.highlighted is not None and options.option_count:
            option_id = options.get_option_at_index(options.highlighted).id
            if option_id is not None:
                return option_id
        return self.current

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == "filter":
            self.filter = event.value.strip()
            self._rebuild()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "filter" and self.options.option_count:
            self.options.focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        if event.option.id is not None:
            self.post_message(self.Chosen(event.option.id))

    def _rebuild(self) -> None:
        # A few dozen one-line options: rebuilding them is cheaper than diffing, and the
        # highlight is kept on the same conversation.
        options = self.options
        keep = self.highlighted_id()
        now = time.time()
        shown = self.shown_entries()
        options.clear_options()
        options.add_options([Option(self._label(e, now), id=e.id) for e in shown])
        ids = [e.id for e in shown]
        if keep in ids:
            options.highlighted = ids.index(keep)

    def _label(self, entry: Entry, now: float) -> Text:
        mark = "●" if entry.running else ("›" if entry.id == self.current else " ")
        style = "bold" if entry.id == self.current else ""
        return Text.assemble(
            (f"{mark} ", "green" if entry.running else "cyan"),
            (clean((entry.title or "(untitled)")[:40]), style),
            (f"  {age(entry.updated_at, now)}", "dim"),
        )
