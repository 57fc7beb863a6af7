"""Sending, watching, cancelling and history in the TUI, on a real store, workers and a
scripted model."""

from __future__ import annotations

from pathlib import Path

from rich.console import Group
from rich.markdown import Markdown as RichMarkdown
from textual.widgets import Static

from cove.channels.tui import CoveApp
from cove.channels.tui.widgets.iteration import IterationView
from cove.channels.tui.widgets.prompt import PromptArea
from cove.channels.tui.widgets.timeline import TURN_WINDOW
from cove.channels.tui.widgets.turn import WINDOW, FoldedIterations, TurnView
from cove.conversation import Conversations, scripted_factory
from tests.channels.tui.helpers import SIZE, last_turn_done, shown_text, turns, until
from tests.scripted import GatedModel, reply, settings_for


async def test_send_shows_iterations_then_the_answer(tmp_path: Path) -> None:
    factory = scripted_factory(
        [reply(["x = 20 + 22"], thinking="compute x first"), reply(["x * 2"], "twice is {{x}}")]
    )
    async with await Conversations.open(settings_for(tmp_path), llm_factory=factory) as convs:
        app = CoveApp(convs, export_dir=tmp_path)
        async with app.run_test(size=SIZE) as pilot:
            prompt = app.query_one(PromptArea)
            prompt.text = "double it"
            await pilot.press("enter")
            await until(pilot, lambda: last_turn_done(app), "the turn to finish")
            (turn,) = turns(app)
            assert turn.status == "done" and turn.answer == "twice is 42"
            end = turn.query_one(".turn-end", Static).content
            assert isinstance(end, Group) and isinstance(end.renderables[0], RichMarkdown)
            assert end.renderables[0].markup == "twice is 42"
            first, second = turn.iterations[1], turn.iterations[2]
            assert first.codes == ["x = 20 + 22"] and second.values == ["84"]
            assert first.summary == "compute x first"
            # finished iterations collapse to their header, Enter expands one
            assert not first.expanded and not second.expanded
            first.focus()
            await pilot.press("c")
            assert app.clipboard == "x = 20 + 22"
            second.focus()
            await pilot.press("v")
            assert app.clipboard == "84"
            first.focus()
            await pilot.press("enter")
            assert first.expanded and len(first.pieces) >= 3  # thinking, code, block, variables…
            assert prompt.text == ""
            assert (await convs.list())[0].id == app.current
            assert "done" in app.status.usage


async def test_escape_cancels_the_running_turn(tmp_path: Path) -> None:
    factory = scripted_factory([reply(["while True:\n    pass"])])
    settings = settings_for(tmp_path, block_timeout_s=60, block_timeout_max_s=60)
    async with await Conversations.open(settings, llm_factory=factory) as convs:
        app = CoveApp(convs)
        async with app.run_test(size=SIZE) as pilot:
            app.query_one(PromptArea).text = "spin"
            await pilot.press("enter")

            def spinning() -> bool:
                shown = turns(app)
                first = shown[-1].iterations.get(1) if shown else None
                return first is not None and bool(first.codes)

            await until(pilot, spinning, "the code to run")
            await pilot.press("escape")
            await until(pilot, lambda: last_turn_done(app), "the cancelled turn to end")
            assert turns(app)[-1].status == "cancelled"
            assert "cancelling the running turn" in app.notices


async def test_up_and_down_recall_sent_requests(tmp_path: Path) -> None:
    factory = scripted_factory([reply(answer="one"), reply(answer="two")])
    async with await Conversations.open(settings_for(tmp_path), llm_factory=factory) as convs:
        app = CoveApp(convs)
        async with app.run_test(size=SIZE) as pilot:
            prompt = app.query_one(PromptArea)
            for count, text in enumerate(["first request", "second request"], start=1):
                prompt.text = text
                await pilot.press("enter")
                await until(pilot, lambda n=count: last_turn_done(app, n), "the turn")
            prompt.text = "draft"
            await pilot.press("up")
            assert prompt.text == "second request"
            await pilot.press("up")
            assert prompt.text == "first request"
            await pilot.press("up")
            assert prompt.text == "first request"
            await pilot.press("down")
            assert prompt.text == "second request"
            await pilot.press("down")
            assert prompt.text == "draft"
            await pilot.press("ctrl+j")
            assert prompt.text == "draft\n"


async def test_a_second_request_is_queued_and_the_status_bar_says_so(tmp_path: Path) -> None:
    model = GatedModel([reply(answer="one"), reply(answer="two")], gated_call=1)
    settings = settings_for(tmp_path)
    async with await Conversations.open(settings, llm_factory=model.factory()) as convs:
        app = CoveApp(convs)
        async with app.run_test(size=SIZE) as pilot:
            prompt = app.query_one(PromptArea)
            prompt.text = "first"
            await pilot.press("enter")
            await until(pilot, lambda: model.calls, "the first turn's model call")
            prompt.text = "second"
            await pilot.press("enter")
            await until(pilot, lambda: app.status.queued, "the queued indicator")
            model.gate.set()
            await until(pilot, lambda: last_turn_done(app, 2), "both turns")
            assert not app.status.queued
            assert [t.answer for t in turns(app)] == ["one", "two"]


async def test_a_long_turn_folds_old_iterations_and_unfolds_them_on_enter(tmp_path: Path) -> None:
    count = WINDOW + 5
    replies = [reply([f"x{n} = {n}"]) for n in range(1, count)] + [reply(["y = 0"], "done")]
    settings = settings_for(tmp_path, max_iterations=count + 5)
    async with await Conversations.open(settings, llm_factory=scripted_factory(replies)) as convs:
        app = CoveApp(convs)
        async with app.run_test(size=SIZE) as pilot:
            app.query_one(PromptArea).text = "many steps"
            await pilot.press("enter")
            await until(pilot, lambda: last_turn_done(app), "the long turn")
            (turn,) = turns(app)
            assert len(turn.iterations) == count
            folded = turn.query_one(FoldedIterations)
            assert [v.number for v in folded.views] == [1, 2, 3, 4]
            assert len(turn.query(IterationView)) == count - 4
            folded.focus()
            await pilot.press("enter")
            await until(pilot, lambda: not turn.query(FoldedIterations), "the unfolding")
            assert len(turn.query(IterationView)) == count
            first = turn.iterations[1]
            assert first.has_focus and first.codes == ["x1 = 1"]
            await pilot.press("enter")
            assert first.expanded


async def test_a_turn_driven_by_another_process_shows_live(tmp_path: Path) -> None:
    settings = settings_for(tmp_path, block_timeout_s=60, block_timeout_max_s=60)
    spin = scripted_factory([reply(["x = 1", "while True:\n    pass"], thinking="spin a while")])
    async with (
        await Conversations.open(settings, llm_factory=scripted_factory([])) as convs,
        await Conversations.open(settings, llm_factory=spin) as other,
    ):
        conv = await other.create(channel="telegram", title="driven elsewhere")
        app = CoveApp(convs, conv.id)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: app.current == conv.id, "the conversation")
            running = other.send(conv.id, "spin over there")

            def first_block_done() -> IterationView | None:
                shown = turns(app)
                view = shown[-1].iterations.get(1) if shown else None
                return view if view is not None and view.done_blocks == 1 else None

            # The second block spins until cancelled: what shows now shows while it runs.
            await until(pilot, first_block_done, "the first block of the other turn")
            (turn,) = turns(app)
            view = first_block_done()
            assert view is not None and view.live and view.expanded and not turn.finished
            assert turn.request == "spin over there" and view.summary == "spin a while"
            assert view.codes == ["x = 1", "while True:\n    pass"]
            await until(pilot, lambda: app.sidebar.entries[conv.id].running, "the running mark")
            await pilot.press("escape")  # the other one runs it: asked through the store
            await until(pilot, lambda: last_turn_done(app), "the cancelled turn")
            assert turn.status == "cancelled" and not view.live
            await running.finished()


async def test_a_long_conversation_shows_its_newest_turns_and_loads_earlier_ones(
    tmp_path: Path,
) -> None:
    count = TURN_WINDOW + 2
    factory = scripted_factory([reply(answer=f"answer {n}") for n in range(1, count + 2)])
    async with await Conversations.open(settings_for(tmp_path), llm_factory=factory) as convs:
        conv = await convs.create(channel="tui", title="long")
        for n in range(1, count + 1):
            await convs.send(conv.id, f"request {n}").finished()
        app = CoveApp(convs, conv.id)
        async with app.run_test(size=SIZE) as pilot:
            timeline = app.timeline
            await until(pilot, lambda: timeline.turn_count == count, "the transcript")
            assert [t.position for t in turns(app)] == list(range(3, count + 1))
            assert timeline.earlier.positions == [1, 2] and timeline.earlier.display
            line = "2 earlier turn(s) (#1–#2)"
            await until(pilot, lambda: line in shown_text(timeline.earlier), "the earlier line")
            timeline.earlier.focus()
            await pilot.press("enter")
            await until(
                pilot,
                lambda: len(timeline.turns) == count and all(t.finished for t in turns(app)),
                "the earlier turns",
            )
            shown = [w for w in timeline.children if isinstance(w, TurnView)]
            assert [t.position for t in shown] == list(range(1, count + 1))  # in order
            assert [t.answer for t in shown][:3] == ["answer 1", "answer 2", "answer 3"], [
                (t.answer, t.status, t.finished) for t in shown
            ]
            assert not timeline.earlier.display
            # a new turn folds the oldest ones away again
            prompt = app.query_one(PromptArea)
            prompt.focus()
            prompt.text = "one more"
            await pilot.press("enter")
            await until(
                pilot,
                lambda: turns(app)[-1].position == count + 1 and last_turn_done(app),
                "the new turn",
            )
            assert turns(app)[-1].answer == f"answer {count + 1}"
            assert timeline.earlier.positions == [1, 2, 3] and len(timeline.turns) == TURN_WINDOW
