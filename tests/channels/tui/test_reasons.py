"""What the TUI shows of turns read back from the database: a refused answer's reason in the
iteration and the inspector, and a cost nobody knows as unknown (never ``$0.0000``)."""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Group
from rich.text import Text
from textual.widgets import Label, Static

from cove.channels.tui import CoveApp
from cove.channels.tui.screens.inspector import InspectorScreen
from cove.conversation import Conversations, scripted_factory
from tests.channels.tui.helpers import SIZE, last_turn_done, turns, until
from tests.scripted import settings_for

REFUSED = "answer refused: undefined placeholder(s) {{x}}"
REPLIES = [
    json.dumps({"thinking": "t", "answer": "result={{x}}"}),
    json.dumps({"thinking": "t", "code": ["x = 3"], "answer": "result={{x}}"}),
]


async def test_a_reloaded_turn_shows_its_refusal_and_an_unknown_cost(tmp_path: Path) -> None:
    factory = scripted_factory(REPLIES)
    async with await Conversations.open(settings_for(tmp_path), llm_factory=factory) as convs:
        conv = await convs.create(title="refused once")
        assert (await convs.send(conv.id, "what is x?").finished()).answer == "result=3"
        app = CoveApp(convs, conv.id)  # the turn is read back from the database
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: last_turn_done(app), "the transcript")
            (turn,) = turns(app)
            end = turn.query_one(".turn-end", Static).content
            assert isinstance(end, Group) and isinstance(end.renderables[-1], Text)
            summary = end.renderables[-1].plain
            assert "cost unknown" in summary and "$0.0000" not in summary
            first = turn.iterations[1]
            assert any(note.plain.startswith(REFUSED) for note in first.notes)
            first.focus()
            await pilot.press("i")
            await until(pilot, lambda: isinstance(app.screen, InspectorScreen), "the inspector")
            refusal = app.screen.query_one(".inspector-refusal", Label).content
            assert str(refusal).startswith(REFUSED)
            head = str(app.screen.query_one(".inspector-head", Label).content)
            assert "cost unknown" in head
