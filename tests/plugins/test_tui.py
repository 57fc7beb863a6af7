"""The TUI asks about a plugin's call in a modal (Pilot, real workers, a scripted model)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cove.channels.tui import CoveApp
from cove.channels.tui.screens.dialogs import Approve
from cove.channels.tui.widgets.prompt import PromptArea
from cove.conversation import Conversations, scripted_factory
from tests.channels.tui.helpers import SIZE, last_turn_done, turns, until
from tests.plugins.test_example_plugin import notes
from tests.scripted import reply, settings_for

pytestmark = pytest.mark.slow  # a sandbox worker


async def test_a_modal_asks_and_an_answer_to_remember_is_not_asked_again(
    tmp_path: Path, notes_file: Path
) -> None:
    factory = scripted_factory(
        [
            reply(['notes_add("denied")']),
            reply(answer="first"),
            reply(['notes_add("one")'], "second"),
            reply(['notes_add("two")'], "third"),
        ]
    )
    async with await Conversations.open(settings_for(tmp_path), llm_factory=factory) as convs:
        app = CoveApp(convs, export_dir=tmp_path)
        async with app.run_test(size=SIZE) as pilot:
            prompt = app.query_one(PromptArea)
            asked: list[str] = []
            for count, (text, answer) in enumerate(
                [("note denied", "n"), ("note one", "#always"), ("note two", None)], start=1
            ):
                prompt.text = text
                await pilot.press("enter")
                if answer is not None:
                    await until(pilot, lambda: isinstance(app.screen, Approve), "the modal")
                    assert isinstance(app.screen, Approve)
                    asked.append(app.screen.request.text)
                    if answer.startswith("#"):
                        await pilot.click(answer)
                    else:
                        await pilot.press(answer)
                await until(pilot, lambda c=count: last_turn_done(app, c), f"turn {count}")
                assert not isinstance(app.screen, Approve)
            assert [t.answer for t in turns(app)] == ["first", "second", "third"]
            assert app.current is not None
            decided = await convs.approvals(app.current)
    assert asked == [
        "notes_add('denied') [notes_add: write]",
        "notes_add('one') [notes_add: write]",
    ]
    assert notes(notes_file) == ["one", "two"]
    assert [(a.approved, a.reason, a.remember) for a in decided] == [
        (False, "person", False),
        (True, "person", True),
        (True, "remembered", False),
    ]
