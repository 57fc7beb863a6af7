"""The accessibility gate: axe-core, injected into the real pages, finds no serious or critical
violation on the chat, its sidebar (also as a phone's drawer), its branches, the conversation
list, the inspector and a variable's page, in light and in dark mode.

axe-core comes from npm, pinned by ``axe/package-lock.json`` and installed by ``make install``;
without it these tests skip, saying so, except in CI, where they fail.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests.channels.web.browser import Site, answer, login, send

pytestmark = pytest.mark.slow  # a real Chromium per test

AXE = Path(__file__).parent / "axe" / "node_modules" / "axe-core" / "axe.min.js"
BLOCKING = ("serious", "critical")


@pytest.fixture
def axe() -> Path:
    if not AXE.is_file():
        reason = f"axe-core is not installed at {AXE}: run `make install` (it needs npm)"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    return AXE


def violations(page: Any, axe: Path) -> list[str]:
    """The serious and critical violations axe finds on the page as it is, one line each."""
    if not page.evaluate("typeof window.axe !== 'undefined'"):
        page.add_script_tag(path=str(axe))
    found = page.evaluate("axe.run(document, { resultTypes: ['violations'] })")["violations"]
    return [
        f"{v['impact']} {v['id']}: {v['help']} at "
        + json.dumps([node["target"] for node in v["nodes"][:3]])
        for v in found
        if v["impact"] in BLOCKING
    ]


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_no_serious_violation_on_the_key_pages(
    site: Site, browser: Any, axe: Path, scheme: str
) -> None:
    # The pages' policy allows no inline script: the test's own injection is let through.
    context = browser.new_context(
        color_scheme=scheme, bypass_csp=True, viewport={"width": 1200, "height": 800}
    )
    page = context.new_page()
    page.set_default_timeout(20_000)
    try:
        login(page, site.url)
        site.fake.add_replies(
            answer("", ["total = sum([3, 4, 5])", "total"]),
            answer("The total is **{{total}}**."),
        )
        cid = site.conversation()
        page.goto(f"{site.url}/c/{cid}")
        send(page, "add three, four and five")
        page.wait_for_selector("#turn-1[data-status='done'] .answer")
        page.reload()
        page.wait_for_selector("#sidebar-entries li")
        page.click("#turn-1 > details > summary")  # the timeline open, its iterations shown
        page.click("#turn-1 .iteration[data-iteration='1'] summary")
        found = {"chat and sidebar": violations(page, axe)}
        page.click("#shortcuts")
        page.wait_for_selector("dialog#help[open]")
        found["shortcut help"] = violations(page, axe)
        page.keyboard.press("Escape")
        page.fill("#sidebar-search", "total")
        page.wait_for_selector("#sidebar-entries .side-hits mark")
        found["sidebar search"] = violations(page, axe)
        site.fake.add_replies(answer("", ["total = 3 + 4 + 5"]), answer("Again {{total}}."))
        page.goto(f"{site.url}/c/{cid}")
        page.click("#turn-1 button[data-action='retry']")  # a branch: its note, "‹ 2/2" on turn 1
        page.wait_for_url(lambda url: cid not in url)
        page.wait_for_selector("#turn-1[data-status='done'] .answer")
        page.wait_for_selector("#turn-1 .turn-versions a[data-step='previous']")
        found["a branch"] = violations(page, axe)
        page.goto(f"{site.url}/c/{cid}")
        page.click("#branches summary")  # the tree of branches, open
        page.wait_for_selector("#branch-list .branch-tree a[aria-current='page']")
        page.focus("#turn-1 .turn-versions a[data-step='next']")  # the switcher, by keyboard
        found["a conversation's branches"] = violations(page, axe)
        for name, path in (
            ("new chat", "/"),
            ("list", "/conversations"),
            ("list search", "/conversations?q=total"),
            ("inspector", f"/c/{cid}/inspect/1/1"),
            ("variable", f"/c/{cid}/vars/total"),
        ):
            page.goto(f"{site.url}{path}")
            if path == "/":
                page.wait_for_selector("#sidebar-entries li")
            found[name] = violations(page, axe)
        page.set_viewport_size({"width": 390, "height": 844})
        page.goto(f"{site.url}/c/{cid}")
        page.click("#sidebar-toggle")
        page.wait_for_selector("#sidebar-entries li", state="visible")
        found["phone drawer"] = violations(page, axe)
    finally:
        context.close()
    assert {name: lines for name, lines in found.items() if lines} == {}
