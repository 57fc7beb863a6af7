"""Variables in the browser: the panel shows each type and size whole, and a variable's page is
headed by its name, gives a length as a length, and shows what changed between versions."""

from __future__ import annotations

from typing import Any

import pytest

from tests.channels.web.browser import Site, answer, send

pytestmark = pytest.mark.slow  # a real Chromium per test

PRIMES = "primes = [2, 3, 5, 7, 11, 13, 17, 19, 23, 29]"
COLLATZ = (
    "def collatz_length(n):\n"
    "    steps = 0\n"
    "    while n != 1:\n"
    "        n = n // 2 if n % 2 == 0 else 3 * n + 1\n"
    "        steps += 1\n"
    "    return steps"
)

# The cell's text is wider than the cell shows (cut with an ellipsis).
_CUT = "node => node.scrollWidth > node.clientWidth"


def cell(name: str, column: str) -> str:
    return f"#vars tr[data-name='{name}'] .{column}"


def test_the_variables_panel_shows_types_and_sizes_whole(site: Site, page: Any) -> None:
    site.fake.add_replies(
        answer("", [PRIMES, COLLATZ, "numbers = list(range(100000))", "mapping = {'a': 1}"]),
        answer("done"),
        answer("", ["primes = primes + [31]"]),
        answer("one more"),
    )
    cid = site.conversation()
    page.goto(f"{site.url}/c/{cid}")
    send(page, "make some variables")
    page.wait_for_selector("#turn-1[data-status='done']")
    page.wait_for_selector(f"{cell('numbers', 'size')}:text('len 100000')")  # live update
    expected = {
        "primes": ("list", "len 10"),
        "collatz_length": ("function", ""),
        "numbers": ("list", "len 100000"),
        "mapping": ("dict", "len 1"),
    }
    for shown in ("live", "reloaded"):
        for name, (kind, size) in expected.items():
            assert page.text_content(cell(name, "type")) == kind, (shown, name)
            assert page.text_content(cell(name, "size")) == size, (shown, name)
            for column in ("type", "size", "version"):
                assert not page.eval_on_selector(cell(name, column), _CUT), (shown, name, column)
        page.reload()
        page.wait_for_selector("#turn-1")

    # On a phone too, only the preview gives way.
    page.set_viewport_size({"width": 390, "height": 800})
    for name in expected:
        for column in ("type", "size", "version"):
            assert not page.eval_on_selector(cell(name, column), _CUT), ("phone", name, column)


def test_a_variable_page_is_headed_by_its_name_and_shows_each_diff(site: Site, page: Any) -> None:
    site.fake.add_replies(
        answer("", [PRIMES]),
        answer("ten primes"),
        answer("", ["primes = primes + [31]"]),
        answer("eleven primes"),
    )
    cid = site.conversation()
    page.goto(f"{site.url}/c/{cid}")
    send(page, "ten primes")
    page.wait_for_selector("#turn-1[data-status='done']")
    send(page, "one more")
    page.wait_for_selector("#turn-2[data-status='done']")
    page.click("#vars tr[data-name='primes'] a")
    page.wait_for_selector("#v2")
    assert page.text_content("h1").strip() == "primes"
    assert page.title().startswith("primes")
    headings = [h.strip() for h in page.locator(".version h2 .label").all_text_contents()]
    assert headings == ["primes v1", "primes v2"]
    first = page.text_content("#v1 .meta")
    assert "bytes" not in first  # ten primes are ten items, not ten bytes
    assert "list" in first and "len 10" in first
    assert "len 11" in page.text_content("#v2 .meta")
    assert page.is_visible("#v2 .diff")  # open without a click
    assert "+" in page.text_content("#v2 .diff") and "31" in page.text_content("#v2 .diff")
