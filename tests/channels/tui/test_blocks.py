"""What an iteration shows: a block cursor with copy per block, the reply as it streams, and
hostile output (markup, terminal escapes, control characters, huge texts) shown as text."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import Static

from cove.channels.tui import CoveApp
from cove.channels.tui.screens.text import TextScreen
from cove.channels.tui.widgets.iteration import IterationView
from cove.channels.tui.widgets.prompt import PromptArea
from cove.channels.tui.widgets.turn import ANSWER_CHARS
from cove.config import Settings
from cove.conversation import Conversations, scripted_factory
from tests.channels.tui.helpers import SIZE, last_turn_done, shown_text, turns, until
from tests.fakes.openai_server import FakeOpenAI, Fault
from tests.scripted import reply, settings_for

pytestmark = pytest.mark.slow  # an app driving real turns in sandbox workers

HOSTILE = (
    "[bold red]loud[/] [link=http://example.invalid]x[/link] [/] "
    "\x1b[2J\x1b]0;owned\x07 \x9b31m \x00\x08 back\rspace \u202eevil end"
)
RAW_CONTROLS = "\x1b\x9b\x07\x00\x08\r\u202e"


async def test_a_block_cursor_moves_between_blocks_and_copies_one(tmp_path: Path) -> None:
    factory = scripted_factory(
        [reply(["a = 6 * 7\na", "b = a + 1\nb"]), reply(["c = b * 2\nc"], "c is {{c}}")]
    )
    async with await Conversations.open(settings_for(tmp_path), llm_factory=factory) as convs:
        app = CoveApp(convs)
        async with app.run_test(size=SIZE) as pilot:
            app.query_one(PromptArea).text = "three blocks"
            await pilot.press("enter")
            await until(pilot, lambda: last_turn_done(app), "the turn")
            first, second = turns(app)[0].iterations[1], turns(app)[0].iterations[2]
            first.focus()
            await pilot.press("enter")  # expand: the cursor is on the first block
            assert first.expanded and first.selected == 0
            await pilot.press("c")
            assert app.clipboard == "a = 6 * 7\na"
            await pilot.press("v")
            assert app.clipboard == "42"
            await pilot.press("down")
            assert first.selected == 1 and "block 2/2" in first.header().plain
            await pilot.press("c")
            assert app.clipboard == "b = a + 1\nb"
            await pilot.press("v")
            assert app.clipboard == "43"
            await pilot.press("j")  # past the last block: on to the next iteration
            assert second.has_focus and first.selected is None
            await pilot.press("down")  # the last iteration: the cursor stays (no wrapping)
            assert second.has_focus
            await pilot.press("enter")
            await pilot.press("v")
            assert app.clipboard == "86"
            await pilot.press("up")  # back: the cursor lands on the last block
            assert first.has_focus and first.selected == 1
            await pilot.press("k")
            assert first.selected == 0
            await pilot.press("c")
            assert app.clipboard == "a = 6 * 7\na"


async def test_the_reply_shows_as_it_streams(
    fake_openai: FakeOpenAI, openai_settings: Settings
) -> None:
    text = reply(["total = 1"], "one", thinking="streamed thought, shown early")
    fake_openai.add_replies(text)
    fake_openai.add_faults(Fault.stall(60, after_chunks=4))  # three chunks, then it hangs
    settings = openai_settings.replace(request_timeout_s=120, max_retries=0)
    async with await Conversations.open(settings) as convs:
        app = CoveApp(convs)
        async with app.run_test(size=SIZE) as pilot:
            app.query_one(PromptArea).text = "think aloud"
            await pilot.press("enter")

            def streamed() -> IterationView | None:
                shown = turns(app)
                view = shown[-1].iterations.get(1) if shown else None
                return view if view is not None and len(view.streamed) >= 48 else None

            await until(pilot, streamed, "the streamed start of the reply")
            view = streamed()
            assert view is not None and view.live and view.streamed == text[:48]
            await pilot.pause()
            assert text[:48] in shown_text(view)
            assert f"({view.received:,} chars)" in view.header().plain
            await pilot.press("escape")
            await until(pilot, lambda: last_turn_done(app), "the cancelled turn")
            assert turns(app)[-1].status == "cancelled"


async def test_hostile_output_shows_as_text_and_the_app_keeps_working(tmp_path: Path) -> None:
    code = f"text = {HOSTILE!r}\nprint(text)\nprint('y' * 1_000_000)\ntext"
    factory = scripted_factory(
        [
            reply([code], thinking=HOSTILE, title=HOSTILE),
            reply(answer=HOSTILE + "\n\n" + "z" * (ANSWER_CHARS * 5)),
            reply(answer="still here"),
        ]
    )
    async with await Conversations.open(settings_for(tmp_path), llm_factory=factory) as convs:
        app = CoveApp(convs)
        async with app.run_test(size=SIZE) as pilot:
            prompt = app.query_one(PromptArea)
            prompt.text = "be hostile"
            await pilot.press("enter")
            await until(pilot, lambda: last_turn_done(app), "the hostile turn")
            (turn,) = turns(app)
            view = turn.iterations[1]
            view.focus()
            await pilot.press("enter")
            await pilot.pause()
            body = shown_text(view)
            assert "[bold red]loud[/]" in body and "[link=http://example.invalid]" in body
            assert not set(RAW_CONTROLS) & set(body)
            assert "␛[2J" in body  # ESC shows as a visible stand-in
            assert view.values[0].startswith("'[bold red]loud[/]")  # a repr, as stored
            assert "more chars]" in body  # the megabyte of output is cut
            end = turn.query_one(".turn-end", Static)
            answer = shown_text(end)
            assert "[bold red]loud[/]" in answer and not set(RAW_CONTROLS) & set(answer)
            assert len(end.content.renderables[0].markup) < ANSWER_CHARS + 100  # type: ignore[union-attr]
            title = shown_text(app.sidebar)
            assert not set(RAW_CONTROLS) & set(title)
            # the app still answers keys and runs turns
            await pilot.press("f1")
            await until(pilot, lambda: isinstance(app.screen, TextScreen), "the help screen")
            await pilot.press("escape")
            prompt.focus()
            prompt.text = "again"
            await pilot.press("enter")
            await until(pilot, lambda: last_turn_done(app, 2), "the next turn")
            assert turns(app)[-1].answer == "still here"
