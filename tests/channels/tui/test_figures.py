"""The data conversation of issue #24 in the terminal UI (Pilot): two CSV files attached from the
palette, the pandas answer's number, the chart as a placeholder line under its block that ``o``
opens (written to a file, the path shown, handed to the configured viewer), the same after the
conversation is opened again; at 80x24, every figure of every block on a line of its own and the
key that opens them in the footer. The sandbox has numpy, pandas and matplotlib loaded."""

from __future__ import annotations

import hashlib
import shlex
import sys
from pathlib import Path

import pytest
from textual.widgets import Input

from cove.channels.tui import CoveApp
from cove.channels.tui.screens.dialogs import AskText
from cove.channels.tui.widgets.iteration import IterationView
from cove.channels.tui.widgets.prompt import PromptArea
from cove.conversation import Conversations, scripted_factory
from tests.channels.data_story import (
    CHART_REQUEST,
    MANAGERS,
    QUESTION,
    SALES,
    expected_answer,
    story_replies,
)
from tests.channels.tui.helpers import last_turn_done, shown_text, turns, until
from tests.channels.tui.test_panels import palette
from tests.scripted import reply, settings_for

pytestmark = pytest.mark.slow  # an app driving real turns in sandbox workers

PLACEHOLDER = "▣ figure 1 · Units per month · 500×300 px"


WIDE = (240, 40)  # the path of a figure fits on its line


def shows(view: IterationView, text: str) -> bool:
    """Whether the iteration shows ``text`` on one of its lines."""
    return text in shown_text(view)


async def test_the_data_conversation_and_its_chart_in_the_terminal(tmp_path: Path) -> None:
    for name, text in (("sales.csv", SALES), ("managers.csv", MANAGERS)):
        (tmp_path / name).write_text(text)
    viewed = tmp_path / "viewed.png"  # the "viewer" copies what it is given here
    code = "import shutil, sys; shutil.copy(sys.argv[2], sys.argv[1])"
    viewer = shlex.join([sys.executable, "-c", code, str(viewed)])  # then the figure's path
    settings = settings_for(tmp_path, sandbox_libraries=True, figure_viewer=viewer)
    factory = scripted_factory(story_replies())
    async with await Conversations.open(settings, llm_factory=factory) as convs:
        app = CoveApp(convs)
        async with app.run_test(size=WIDE) as pilot:
            for name in ("sales.csv", "managers.csv"):
                await palette(pilot, app, "Attach a file")
                await until(pilot, lambda: isinstance(app.screen, AskText), "the path question")
                app.screen.query_one(Input).value = str(tmp_path / name)
                await pilot.press("enter")
                await until(pilot, lambda n=name: n in dict(app.attachments), f"{name} attached")
            assert "attached (sent with your next message): sales.csv, managers.csv" in app.notices

            app.query_one(PromptArea).text = QUESTION
            await pilot.press("enter")
            await until(pilot, lambda: last_turn_done(app), "the answer")
            assert turns(app)[0].answer == expected_answer()
            assert app.attachments == []  # they went with that message

            app.query_one(PromptArea).text = CHART_REQUEST
            await pilot.press("enter")
            await until(pilot, lambda: last_turn_done(app, 2), "the chart")
            view = turns(app)[1].iterations[1]
            view.focus()
            await pilot.press("enter")  # expanded, the cursor on the block that drew
            await until(pilot, lambda: shows(view, f"{PLACEHOLDER} · o opens it"), "the line")

            await pilot.press("o")
            assert app.current is not None
            path = settings.store.figures / app.current / "t2-i1-b1-1.png"
            await until(pilot, viewed.exists, "the viewer")
            assert path.read_bytes() == viewed.read_bytes()
            assert any(f"figure saved: {path}" in notice for notice in app.notices)
            await until(pilot, lambda: shows(view, f"{PLACEHOLDER} · {path}"), "the path")
            [conv] = await convs.list()
            block = (await convs.inspect(conv.id, turn=2)).turns[0].iterations[0].blocks[0]
            assert hashlib.sha256(path.read_bytes()).hexdigest() == block.figures[0].digest

        # Opened again (the turn read from the store): the line is there; o on the collapsed
        # iteration opens every figure of it.
        path.unlink()
        viewed.unlink()
        again = CoveApp(convs, conv.id)
        async with again.run_test(size=WIDE) as pilot:
            await until(pilot, lambda: last_turn_done(again, 2), "the transcript")
            view = turns(again)[1].iterations[1]
            assert isinstance(view, IterationView) and not view.expanded
            view.focus()
            await pilot.press("o")
            await until(pilot, viewed.exists, "the viewer")
            assert path.exists()
            await pilot.press("enter")
            await until(pilot, lambda: shows(view, f"{PLACEHOLDER} · {path}"), "the path again")
            assert "▣" not in shown_text(turns(again)[0].iterations[1])  # no figure there


THREE = (
    "import matplotlib.pyplot as plt\n"
    "plt.figure(figsize=(4, 3)); plt.plot([1, 2]); plt.title('rising')\n"
    "plt.figure(figsize=(3, 3)); plt.plot([2, 1]); plt.title('falling')",
    "import matplotlib.pyplot as plt\nplt.figure(figsize=(2, 2)); plt.bar([1], [1])",
)


async def test_at_80x24_every_figure_has_its_line_and_o_opens_them_all(tmp_path: Path) -> None:
    settings = settings_for(tmp_path, sandbox_libraries=True)
    factory = scripted_factory([reply(list(THREE), "three charts")])
    async with await Conversations.open(settings, llm_factory=factory) as convs:
        app = CoveApp(convs)
        async with app.run_test(size=(80, 24)) as pilot:
            app.query_one(PromptArea).text = "Three charts, please."
            await pilot.press("enter")
            await until(pilot, lambda: last_turn_done(app), "the answer")
            assert not app.sidebar.display  # the narrow layout
            view = turns(app)[0].iterations[1]
            view.focus()
            await pilot.press("enter")  # expanded: a line per figure, each whole on one line
            lines = [
                "▣ figure 1 · rising · 400×300 px · o opens it",
                "▣ figure 2 · falling · 300×300 px · o opens it",
                "▣ figure 1 · 200×200 px · o opens it",
            ]
            await until(pilot, lambda: all(shows(view, line) for line in lines), "the lines")
            shown = [line.strip() for line in shown_text(view).splitlines()]
            assert [line for line in shown if line.startswith("▣")] == lines
            keys = {str(key.key_display): key.region for key in app.query("FooterKey")}
            assert keys["o"].right <= 80  # the key that opens them is on the screen

            await pilot.press("enter")  # collapsed: o opens every figure of the iteration
            await pilot.press("o")
            assert app.current is not None
            folder = settings.store.figures / app.current
            names = ["t1-i1-b1-1.png", "t1-i1-b1-2.png", "t1-i1-b2-1.png"]
            await until(pilot, lambda: any("figure saved" in n for n in app.notices), "files")
            [notice] = [n for n in app.notices if "figure saved" in n]
            assert notice.splitlines() == [f"figure saved: {folder / name}" for name in names]
            [conv] = await convs.list()
            blocks = (await convs.inspect(conv.id)).turns[0].iterations[0].blocks
            digests = [f.digest for block in blocks for f in block.figures]
            written = [hashlib.sha256((folder / n).read_bytes()).hexdigest() for n in names]
            assert written == digests
