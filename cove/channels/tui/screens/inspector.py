"""``InspectorScreen``: one stored iteration exactly as the model saw and answered it."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Label, Static

from cove.channels.tui.format import clean, duration
from cove.channels.tui.widgets.timeline import cost_text
from cove.conversation import IterationRecord, TurnRecord


class InspectorScreen(Screen[None]):
    """The three prompt messages (system, request, context), the raw reply, tokens, timing."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,q", "app.pop_screen", "Close")]

    def __init__(self, turn: TurnRecord, iteration: IterationRecord, system_prompt: str) -> None:
        super().__init__(id="inspector")
        self.turn = turn
        self.it = iteration
        self.system_prompt = system_prompt

    def compose(self) -> ComposeResult:
        it = self.it
        head = (
            f"turn {self.turn.position} · iteration {it.position + 1} · {it.status} · "
            f"model {it.model or self.turn.model or '-'} · "
            f"tokens {it.usage.tokens_in:,} in / {it.usage.tokens_out:,} out"
            f" · model {duration(it.llm_ms)} of {duration(it.duration_ms)}"
            f" · {cost_text(it.usage.cost_usd, self.turn.cost_known)}"
        )
        with VerticalScroll():
            yield Label(Text(clean(head)), classes="inspector-head")
            if it.refusal:
                yield Label(Text(clean(it.refusal), style="red"), classes="inspector-refusal")
            for title, body in (
                (f"system prompt ({it.system_prompt_hash[:12]})", self.system_prompt),
                ("user: request message", it.request_message),
                ("user: context message", it.context_message),
                ("assistant: raw reply", it.raw_reply or "(none)"),
            ):
                yield Label(title, classes="inspector-section")
                yield Static(Text(clean(body)), classes="inspector-body")
        yield Footer()
