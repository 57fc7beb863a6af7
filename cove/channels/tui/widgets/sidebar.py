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
from cove.conversation import ConversationRecord
from cove.events import outcome

#: The list's width before it is laid out.
DEFAULT_WIDTH = 30


@dataclass
class Entry:
    """What the sidebar knows about one conversation."""

    id: str
    title: str | None
    updated_at: float
    status: str | None = None  # its last turn's status (None: no turn yet)
    label: str = ""  # what lists call it: the title, else the start of its first request

    @property
    def running(self) -> bool:
        """True while its last turn runs."""
        return self.status == "running"

    @property
    def name(self) -> str:
        """The label, or ``(untitled)`` before there is one."""
        return self.label or self.title or "(untitled)"


def entry_of(record: ConversationRecord) -> Entry:
    """The sidebar's view of a conversation record."""
    return Entry(record.id, record.title, record.updated_at, record.last_status, record.label)


#: The mark before each conversation: how its last turn ended (``cove.events.outcome``).
STATUS_MARKS: dict[str | None, tuple[str, str]] = {
    "running": ("●", "green"),
    "done": ("✓", "green"),
    "failed": ("✗", "red"),
    "cancelled": ("○", "yellow"),
    "interrupted": ("!", "red"),
    None: (" ", ""),
}
#: Columns of the list a line needs besides the title: the two marks and the gap before the age.
LINE_EXTRA = 6


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
            if not needle or needle in e.name.casefold() or e.id.startswith(needle)
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

    def on_resize(self) -> None:
        self._rebuild()  # the titles are cut to the width

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
        width = options.scrollable_content_region.width or DEFAULT_WIDTH
        options.clear_options()
        options.add_options([Option(self._label(e, now, width), id=e.id) for e in shown])
        ids = [e.id for e in shown]
        if keep in ids:
            options.highlighted = ids.index(keep)

    def _label(self, entry: Entry, now: float, width: int) -> Text:
        """One line: shown or not, how its last turn ended, the name (cut to fit), its age."""
        current = entry.id == self.current
        mark, colour = STATUS_MARKS.get(outcome(entry.status), STATUS_MARKS[None])
        when = age(entry.updated_at, now)
        room = max(4, width - LINE_EXTRA - len(when))
        name = clean(entry.name)
        if len(name) > room:
            name = name[: room - 1].rstrip() + "…"
        return Text.assemble(
            ("›" if current else " ", "cyan"),
            (mark + " ", colour),
            (name, "bold" if current else ""),
            (f"  {when}", "dim"),
            no_wrap=True,
        )
