"""``VariableScreen``: every version of one variable and a diff between any two."""

from __future__ import annotations

import difflib
from typing import ClassVar

from rich.syntax import Syntax
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Label, OptionList, Static
from textual.widgets.option_list import Option

from cove.channels.tui.format import clean, one_line
from cove.conversation import VarVersionRecord


def version_diff(old: VarVersionRecord, new: VarVersionRecord) -> str:
    """A unified diff of two versions' previews."""
    lines = difflib.unified_diff(
        old.preview.splitlines(),
        new.preview.splitlines(),
        fromfile=f"{old.name} v{old.version}",
        tofile=f"{new.name} v{new.version}",
        lineterm="",
    )
    return "\n".join(lines) or "(the two versions look the same)"


class VariableScreen(Screen[None]):
    """Versions oldest first; Enter marks a version as the diff's side A, then side B."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,q", "app.pop_screen", "Close")]

    def __init__(self, name: str, versions: list[VarVersionRecord]) -> None:
        super().__init__(id="variable")
        self.var_name = name
        self.versions = versions
        # The latest change is the one people ask about first.
        self.a = max(0, len(versions) - 2)
        self.b = max(0, len(versions) - 1)
        self._next_side = "a"
        self.diff_text = ""

    def compose(self) -> ComposeResult:
        yield Label(f"{self.var_name}: {len(self.versions)} version(s)", classes="panel-title")
        yield OptionList(
            *(
                Option(
                    Text.assemble(
                        (f"v{v.version} ", "bold"),
                        (f"turn {v.turn_position} ", "dim"),
                        (v.kind if v.kind == "deleted" else v.type_name, "magenta"),
                        " ",
                        one_line(v.preview, 60),
                    ),
                    id=str(i),
                )
                for i, v in enumerate(self.versions)
            ),
            id="versions",
        )
        yield Label("", id="diff-title")
        with VerticalScroll():
            yield Static(id="diff")
        yield Footer()

    def on_mount(self) -> None:
        self.show_diff()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        index = int(event.option.id or 0)
        if self._next_side == "a":
            self.a, self._next_side = index, "b"
        else:
            self.b, self._next_side = index, "a"
        self.show_diff()

    def show_diff(self) -> None:
        """Show the diff between the chosen versions A and B."""
        if not self.versions:
            return
        old, new = self.versions[self.a], self.versions[self.b]
        self.query_one("#diff-title", Label).update(
            f"diff v{old.version} → v{new.version} (Enter picks side {self._next_side.upper()})"
        )
        self.diff_text = version_diff(old, new)
        self.query_one("#diff", Static).update(
            Syntax(clean(self.diff_text), "diff", theme="ansi_dark")
        )
