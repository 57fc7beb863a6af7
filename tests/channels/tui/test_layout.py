"""The TUI at 80x24 and 120x40: the sidebar makes room on a narrow terminal (F4 still toggles
it), the footer fits, a long title keeps its age on its line, notifications leave the composer
free, and every iteration line reads ``iteration N/BUDGET``, live or reloaded."""

from __future__ import annotations

from pathlib import Path

from rich.text import Text
from textual.widgets import Footer
from textual.widgets._footer import FooterKey
from textual.widgets._toast import Toast

from cove.channels.tui import CoveApp
from cove.channels.tui.widgets.prompt import PromptArea
from cove.channels.tui.widgets.sidebar import ConversationOptions
from cove.conversation import Conversations, scripted_factory
from tests.channels.tui.helpers import SIZE, last_turn_done, shown_text, turns, until
from tests.scripted import reply, settings_for

NARROW = (80, 24)
LONG_TITLE = "A very long conversation title that cannot fit in the sidebar at all"


async def test_at_80_columns_the_sidebar_makes_room_and_f4_still_toggles_it(
    tmp_path: Path,
) -> None:
    async with await Conversations.open(
        settings_for(tmp_path), llm_factory=scripted_factory([])
    ) as convs:
        await convs.create(channel="tui", title="kept")
        app = CoveApp(convs)
        async with app.run_test(size=NARROW) as pilot:
            await until(pilot, lambda: app.sidebar.entries, "the list")
            await pilot.pause()
            assert not app.sidebar.display and app.timeline.size.width > 70
            await pilot.press("f4")
            await pilot.pause()
            assert app.sidebar.display and app.sidebar.size.width > 20
            await pilot.press("f4")
            await pilot.pause()
            assert not app.sidebar.display
            keys = list(app.query_one(Footer).query(FooterKey))
            assert {k.description for k in keys} >= {"New", "Help", "Sidebar"}
            for key in keys:  # every key of the footer is on the screen, whole
                assert key.region.width > 0 and key.region.right <= NARROW[0], key.description
            await pilot.resize_terminal(*SIZE)
            await pilot.pause()
            assert app.sidebar.display  # wide again: back by itself
            await pilot.resize_terminal(*NARROW)
            await pilot.pause()
            assert not app.sidebar.display


async def test_a_long_title_is_cut_and_keeps_its_age_on_its_line(tmp_path: Path) -> None:
    async with await Conversations.open(
        settings_for(tmp_path), llm_factory=scripted_factory([])
    ) as convs:
        await convs.create(channel="tui", title=LONG_TITLE)
        await convs.create(channel="tui", title="short")
        app = CoveApp(convs)
        async with app.run_test(size=SIZE) as pilot:
            options = app.query_one(ConversationOptions)
            await until(pilot, lambda: options.option_count == 2, "the list")
            await pilot.pause()
            lines = [ln for ln in shown_text(options).splitlines() if ln.strip()]
            assert len(lines) == 2, lines  # one line each: nothing wrapped
            [long_line] = [ln for ln in lines if "A very long" in ln]
            assert "…" in long_line and long_line.rstrip().endswith("now")


async def test_the_end_of_turn_notification_leaves_the_composer_free(tmp_path: Path) -> None:
    factory = scripted_factory([reply(["x = 1"])])
    settings = settings_for(tmp_path, max_iterations=1)
    async with await Conversations.open(settings, llm_factory=factory) as convs:
        app = CoveApp(convs)
        async with app.run_test(size=NARROW, notifications=True) as pilot:
            app.query_one(PromptArea).text = "never answers"
            await pilot.press("enter")
            await until(pilot, lambda: last_turn_done(app), "the turn to end")
            await until(pilot, lambda: list(app.screen.query(Toast)), "the notification")
            await pilot.pause()
            composer = app.query_one(PromptArea).region
            toasts = list(app.screen.query(Toast))
            assert any("max iterations" in str(t.render()) for t in toasts)
            for toast in toasts:
                assert not toast.region.overlaps(composer), (toast.region, composer)


async def test_iterations_read_the_same_live_and_reloaded(tmp_path: Path) -> None:
    factory = scripted_factory([reply(["a = 1"]), reply(["b = 2"]), reply([], "{{b}}")])
    async with await Conversations.open(settings_for(tmp_path), llm_factory=factory) as convs:
        app = CoveApp(convs)
        async with app.run_test(size=SIZE) as pilot:
            app.query_one(PromptArea).text = "two steps"
            await pilot.press("enter")
            await until(pilot, lambda: last_turn_done(app), "the turn to end")
            shown = turns(app)[0]
            live = [str(v.header()) for v in shown.iterations.values()]
            await app.open_conversation(app.current or "")

            def reloaded_view() -> bool:
                views = turns(app)
                return bool(views) and views[0] is not shown and views[0].finished

            await until(pilot, reloaded_view, "the reload")
            reloaded = [str(v.header()) for v in turns(app)[0].iterations.values()]
    assert [h.split(" · ")[0] for h in live] == [f"▸ iteration {n}/10" for n in (1, 2, 3)]
    assert [h.split(" · ")[0] for h in reloaded] == [h.split(" · ")[0] for h in live]


async def test_iteration_lines_stay_one_line_at_80_columns(tmp_path: Path) -> None:
    factory = scripted_factory([reply(["a = 1"], thinking="a thought " * 20), reply([], "ok")])
    async with await Conversations.open(settings_for(tmp_path), llm_factory=factory) as convs:
        app = CoveApp(convs)
        async with app.run_test(size=NARROW) as pilot:
            app.query_one(PromptArea).text = "go"
            await pilot.press("enter")
            await until(pilot, lambda: last_turn_done(app), "the turn to end")
            await pilot.pause()
            first = turns(app)[0].iterations[1]
            assert first.size.height == 1
            line = first.render()
            assert isinstance(line, Text) and line.plain.endswith("…")
            assert line.cell_len == first.content_size.width
