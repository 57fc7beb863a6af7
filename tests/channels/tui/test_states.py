"""What the TUI says about a conversation's state: the sidebar names a conversation without a
title by its first request and marks how its last turn ended; nudges meant for the model stay
out of the timeline; a live iteration says when the endpoint is being retried."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from cove.channels.tui import CoveApp
from cove.channels.tui.widgets.prompt import PromptArea
from cove.channels.tui.widgets.sidebar import ConversationOptions
from cove.config import Settings
from cove.conversation import Conversations, scripted_factory
from cove.errors import ModelError
from tests.channels.tui.helpers import SIZE, last_turn_done, shown_text, turns, until
from tests.fakes.openai_server import FakeOpenAI, Fault
from tests.scripted import reply, settings_for

pytestmark = pytest.mark.slow  # an app driving real turns in sandbox workers

REQUEST = "Compute the squares of the numbers from one to forty and add them up"


async def send(app: CoveApp, text: str) -> None:
    app.query_one(PromptArea).text = text
    await app.run_action("focus_prompt")
    app.query_one(PromptArea).post_message(PromptArea.Submitted(text))


async def test_the_sidebar_names_conversations_by_their_request_and_marks_their_ending(
    tmp_path: Path,
) -> None:
    factory = scripted_factory([reply([], "22140"), ModelError("the endpoint is down")])
    async with await Conversations.open(settings_for(tmp_path), llm_factory=factory) as convs:
        app = CoveApp(convs)
        async with app.run_test(size=SIZE) as pilot:
            await send(app, REQUEST)
            await until(pilot, lambda: last_turn_done(app), "the first turn")
            first = app.current
            await app.run_action("new")
            await until(pilot, lambda: app.current != first, "a new conversation")
            await send(app, "this one fails")
            await until(pilot, lambda: last_turn_done(app), "the second turn")
            options = app.query_one(ConversationOptions)

            def listed() -> list[str]:
                return [ln for ln in shown_text(options).splitlines() if ln.strip()]

            def marked() -> bool:
                lines = listed()
                return any("✓" in ln and "Compute" in ln for ln in lines) and any(
                    "✗" in ln and "this one fails" in ln for ln in lines
                )

            await until(pilot, marked, "both conversations listed with how they ended")
            lines = listed()
            [done] = [ln for ln in lines if "Compute the squares" in ln]
            [failed] = [ln for ln in lines if "this one fails" in ln]
            assert "✓" in done and "…" in done and "(untitled)" not in "".join(lines)
            assert "✗" in failed


async def test_nudges_for_the_model_stay_out_of_the_timeline(tmp_path: Path) -> None:
    factory = scripted_factory([reply(["a = 1"]), reply(["b = 2"]), reply([], "{{b}}")])
    async with await Conversations.open(settings_for(tmp_path), llm_factory=factory) as convs:
        app = CoveApp(convs)
        async with app.run_test(size=SIZE) as pilot:
            seen: list[Any] = []
            applied = app.apply

            def spy(event: Any) -> None:
                seen.append(event)
                applied(event)

            app.apply = spy  # type: ignore[method-assign]
            await send(app, "no title from the model")
            await until(pilot, lambda: last_turn_done(app), "the turn")
            assert any(getattr(e, "kind", "") == "title" for e in seen)  # it was published
            for view in turns(app)[0].iterations.values():
                view.expanded = True
                assert "no title yet" not in " ".join(str(p) for p in view.pieces)


async def test_a_live_iteration_says_the_endpoint_is_being_retried(
    fake_openai: FakeOpenAI, openai_settings: Settings
) -> None:
    opened = threading.Event()

    def late(body: dict[str, Any]) -> str:
        opened.wait(30)
        return reply(answer="made it")

    fake_openai.add_faults(Fault.server_error(503))
    fake_openai.add_replies(late)
    async with await Conversations.open(openai_settings.replace(worker_pool_size=1)) as convs:
        app = CoveApp(convs)
        async with app.run_test(size=SIZE) as pilot:
            await send(app, "hello")

            def retrying() -> bool:
                shown = turns(app)
                live = shown[-1].current if shown else None
                return live is not None and "retrying (1 of 2)" in str(live.header())

            try:
                await until(pilot, retrying, "the retry")
                header = str(turns(app)[-1].current.header())  # type: ignore[union-attr]
                assert "retrying (1 of 2): server error (HTTP 503)" in header
            finally:
                opened.set()
            await until(pilot, lambda: last_turn_done(app), "the answer")
            assert turns(app)[-1].answer == "made it"
