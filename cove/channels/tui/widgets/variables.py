"""``VariablesPanel``: the conversation's current variables; Enter opens a variable's versions."""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import Label, OptionList
from textual.widgets.option_list import Option

from cove.channels.tui.format import one_line
from cove.results import VarVersion


class VariablesPanel(Vertical):
    """A toggled side panel listing ``name vN type preview``."""

    class Chosen(Message):
        """The person picked a variable."""

        def __init__(self, name: str) -> None:
            super().__init__()
            self.name = name

    def __init__(self) -> None:
        super().__init__(id="variables")
        self.rows: dict[str, tuple[int, str, str]] = {}

    def compose(self) -> ComposeResult:
        yield Label("Variables", classes="panel-title")
        yield OptionList(id="variable-list")

    def set_rows(self, rows: dict[str, tuple[int, str, str]]) -> None:
        """Show ``{name: (version, type, preview)}``; deleted variables are left out."""
        self.rows = dict(rows)
        self._rebuild()

    def update_rows(self, changes: Sequence[VarVersion]) -> None:
        """Apply the variable changes of ``VarsChanged`` events, oldest first.

        A hidden panel only keeps the rows: it is reloaded from the store when shown.
        """
        for c in changes:
            if c.kind == "deleted":
                self.rows.pop(c.name, None)
            else:
                self.rows[c.name] = (c.version, c.type_name, c.preview)
        if not self.has_class("hidden"):
            self._rebuild()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        if event.option.id is not None:
            self.post_message(self.Chosen(event.option.id))

    def _rebuild(self) -> None:
        options = self.query_one(OptionList)
        keep = options.highlighted
        options.clear_options()
        options.add_options(
            Option(
                Text.assemble(
                    (name, "bold"), (f" v{v} ", "dim"), (t, "magenta"), " ", one_line(p, 40)
                ),
                id=name,
            )
            for name, (v, t, p) in sorted(self.rows.items())
        )
        if options.option_count:
            options.highlighted = min(keep or 0, options.option_count - 1)
