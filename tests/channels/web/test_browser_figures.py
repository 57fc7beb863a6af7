"""The data conversation of issue #24 in Chromium: two CSV files uploaded, a question answered
with pandas (the number in the answer, the pivot table as a table), a chart shown in the turn as
its block finishes and again after a reload, full size in a new tab, downloadable.

The real app, engine and sandbox (numpy, pandas and matplotlib loaded), the real ``openai``
client against the fake endpoint. The picture is ``docs/web-figures.png`` (refresh it with
``COVE_SCREENSHOTS=docs``, as in ``test_screenshots.py``).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

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
from tests.channels.web.test_screenshots import DESKTOP, save, titled
from tests.scripted import reply

TALL = {"width": 1200, "height": 1040}
LOADED = "(img) => img.complete && img.naturalWidth"


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
