"""Snapshots of the main screens, so layout changes show up as SVG diffs.

Only screens whose content does not depend on ids, clocks or timings are snapshotted (an empty
database's main screen, the help screen). Update with ``pytest --snapshot-update``.
"""

from __future__ import annotations

from pathlib import Path

from syrupy.assertion import SnapshotAssertion
from syrupy.extensions.image import SVGImageSnapshotExtension

from cove.channels.tui import CoveApp
from cove.conversation import Conversations, scripted_factory
from tests.channels.tui.helpers import SIZE, until
from tests.scripted import settings_for


async def screenshots(tmp_path: Path, *keys: str) -> str:
    settings = settings_for(tmp_path).replace(model="snapshot-model")
    async with await Conversations.open(settings, llm_factory=scripted_factory([])) as convs:
        app = CoveApp(convs)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: app.status.endpoint != "endpoint: ?", "the start")
            await pilot.press(*keys)
            await pilot.pause()
            return app.export_screenshot(title="cove")


async def test_main_screen(tmp_path: Path, snapshot: SnapshotAssertion) -> None:
    svg = await screenshots(tmp_path)
    assert svg == snapshot(extension_class=SVGImageSnapshotExtension)


async def test_help_screen(tmp_path: Path, snapshot: SnapshotAssertion) -> None:
    svg = await screenshots(tmp_path, "f1")
    assert svg == snapshot(extension_class=SVGImageSnapshotExtension)
