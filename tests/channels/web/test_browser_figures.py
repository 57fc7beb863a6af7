"""The data conversation of issue #24 in Chromium: two CSV files uploaded, a question answered
with pandas (the number in the answer, the pivot table as a table), a chart shown in the turn as
its block finishes and again after a reload, full size in a new tab, downloadable.

The real app, engine and sandbox (numpy, pandas and matplotlib loaded), the real ``openai``
client against the fake endpoint. Every figure of every block is shown, live and after a reload,
and so are those of a turn another process runs. The picture is ``docs/web-figures.png``
(refresh it with ``COVE_SCREENSHOTS=docs``, as in ``test_screenshots.py``).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest

from cove.config import Settings
from tests.channels.data_story import (
    ANALYSIS,
    ANSWER,
    CHART,
    CHART_ANSWER,
    CHART_REQUEST,
    CHART_TITLE,
    MANAGERS,
    QUESTION,
    SALES,
    expected_answer,
)
from tests.channels.web.browser import Gate, Site, send
from tests.channels.web.test_browser_elsewhere import run_elsewhere
from tests.channels.web.test_screenshots import DESKTOP, save, titled
from tests.scripted import reply

pytestmark = pytest.mark.slow  # a real Chromium per test

TALL = {"width": 1200, "height": 1040}
LOADED = "(img) => img.complete && img.naturalWidth"


@pytest.fixture
def openai_settings(openai_settings: Settings) -> Settings:
    """These tests run pandas and matplotlib in the sandbox: its data libraries are on."""
    return openai_settings.replace(sandbox_libraries=True)


def upload(page: Any, tmp_path: Path) -> None:
    """Attach the two CSV files through the page's file picker."""
    (tmp_path / "sales.csv").write_text(SALES)
    (tmp_path / "managers.csv").write_text(MANAGERS)
    page.set_input_files(
        "#file-input", [str(tmp_path / "sales.csv"), str(tmp_path / "managers.csv")]
    )
    page.wait_for_selector("#files li:has-text('managers.csv')")
    page.wait_for_selector("#files li:has-text('sales.csv')")


def test_a_csv_question_and_a_chart_in_the_browser(site: Site, page: Any, tmp_path: Path) -> None:
    page.set_viewport_size(DESKTOP)
    answered = Gate(reply([], CHART_ANSWER, thinking="The chart is drawn."))
    site.fake.add_replies(
        reply([ANALYSIS, "table"], ANSWER, thinking="Merge, group by manager, pivot by month."),
        reply([CHART], thinking="A bar chart of the pivot table."),
        answered,
    )
    cid = titled(page, site, "Sales by region")
    page.goto(f"{site.url}/c/{cid}")
    upload(page, tmp_path)

    send(page, QUESTION)
    page.wait_for_selector("#turn-1[data-status='done']")
    assert page.inner_text("#turn-1 .answer").strip() == expected_answer()
    # The pivot table the block ended with reads as a table (its iterations are folded).
    headers = page.locator("#turn-1 .frame-table thead tr").first.locator("th")
    assert headers.all_text_contents() == ["region", "east", "north", "south", "rolling"]

    send(page, CHART_REQUEST)
    assert answered.reached.wait(120)  # the chart's block has finished; the answer waits
    live = page.wait_for_selector(".turn.live .turn-figures img")
    page.wait_for_function(LOADED, arg=live)  # served, and allowed by the page's CSP
    assert live.evaluate("img => [img.naturalWidth, img.naturalHeight]") == [500, 300]
    assert CHART_TITLE in page.inner_text(".turn.live .turn-figures figcaption")
    assert page.locator(".turn.live .block .figure-link").count() == 1
    answered.opened.set()
    page.wait_for_selector("#turn-2[data-status='done'] .turn-figures img")

    page.reload()  # a finished turn shows its figure from the record
    image = page.wait_for_selector("#turn-2 .turn-figures img")
    page.wait_for_function(LOADED, arg=image)
    assert page.locator(".turn-figures img").count() == 1  # one figure, shown once
    url = page.get_attribute("#turn-2 .figure-open", "href")
    assert url is not None and url.startswith(f"/api/conversations/{cid}/figures/")

    with page.context.expect_page() as opened:  # full size, in a tab of its own
        page.click("#turn-2 .turn-figures img")
    tab = opened.value
    tab.wait_for_load_state()
    assert tab.url == f"{site.url}{url}"
    assert tab.evaluate("document.images[0].naturalWidth") == 500
    tab.close()

    with page.expect_download() as downloaded:
        page.click("#turn-2 .figure-download")
    download = downloaded.value
    assert download.suggested_filename == "t2-i1-b1-1.png"
    png = Path(download.path()).read_bytes()
    assert png.startswith(b"\x89PNG") and hashlib.sha256(png).hexdigest() == url.rsplit("/")[-1]

    page.set_viewport_size(TALL)  # both answers and the whole chart in one picture
    page.goto(f"{site.url}/c/{cid}")
    page.wait_for_selector("#turn-2 .turn-figures img")
    page.wait_for_function(LOADED, arg=page.query_selector("#turn-2 .turn-figures img"))
    page.mouse.move(10, 10)
    save(page, "web-figures.png", tmp_path)


TWO = (
    "import matplotlib.pyplot as plt\n"
    "plt.figure(figsize=(4, 3)); plt.plot([1, 2]); plt.title('rising')\n"
    "plt.figure(figsize=(3, 3)); plt.plot([2, 1]); plt.title('falling')"
)
ONE = "import matplotlib.pyplot as plt\nplt.figure(figsize=(2, 2)); plt.bar([1], [1])"
SHOWN = [("t1-i1-b1-1.png", 400, 300), ("t1-i1-b1-2.png", 300, 300), ("t1-i1-b2-1.png", 200, 200)]


def figures_shown(page: Any, turn: str) -> list[tuple[str, int, int]]:
    """Each figure image under the turn, once loaded: its download name and natural size."""
    images = page.locator(f"{turn} .turn-figures img")
    for image in images.element_handles():
        page.wait_for_function(LOADED, arg=image)
    names = page.locator(f"{turn} .turn-figures .figure-download").evaluate_all(
        "links => links.map(a => a.download)"
    )
    sizes = images.evaluate_all("imgs => imgs.map(i => [i.naturalWidth, i.naturalHeight])")
    return [(name, w, h) for name, (w, h) in zip(names, sizes, strict=True)]


def test_every_figure_of_every_block_live_and_after_a_reload(site: Site, page: Any) -> None:
    answered = Gate(reply([], "three charts"))
    site.fake.add_replies(reply([TWO, ONE]), answered)
    cid = site.conversation()
    page.goto(f"{site.url}/c/{cid}")
    send(page, "Three charts, please.")
    assert answered.reached.wait(120)  # both blocks have finished; the answer waits
    page.wait_for_selector(".turn.live .turn-figures figure:nth-of-type(3) img")
    assert figures_shown(page, ".turn.live") == SHOWN
    links = page.locator(".turn.live .block").evaluate_all(
        "blocks => blocks.map(b => b.querySelectorAll('.figure-link').length)"
    )
    assert links == [2, 1]  # a line per figure in the block that made it
    answered.opened.set()
    page.wait_for_selector("#turn-1[data-status='done']")
    assert figures_shown(page, "#turn-1") == SHOWN

    page.reload()  # from the record: every figure, each once
    page.wait_for_selector("#turn-1 .turn-figures img")
    assert figures_shown(page, "#turn-1") == SHOWN
    assert page.locator(".turn-figures img").count() == 3
    captions = page.locator("#turn-1 .turn-figures .figure-title").all_text_contents()
    assert captions == ["rising", "falling", "Figure 1"]


def test_the_figures_of_a_turn_another_process_runs(site: Site, page: Any) -> None:
    held = Gate(reply([], "drawn elsewhere"))
    site.fake.add_replies(reply([TWO]), held)
    cid = site.conversation()
    process = run_elsewhere(site, cid, "two charts", libraries=True)
    try:
        assert held.reached.wait(120)  # the other process drew, then waits for the model
        page.goto(f"{site.url}/c/{cid}")  # attached mid-turn: its record rebuilt as events
        page.wait_for_selector(".turn.live .turn-figures figure:nth-of-type(2) img")
        assert figures_shown(page, ".turn.live") == SHOWN[:2]
        held.opened.set()
        out, err = process.communicate(timeout=120)
    finally:
        held.opened.set()
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, err
    assert out.strip() == "drawn elsewhere"
    page.wait_for_selector("#turn-1[data-status='done']")
    assert figures_shown(page, "#turn-1") == SHOWN[:2]
