"""What the browser tests ask of a page: is something on screen, the page's own dialog, a frame.

They drive the real page; nothing here reaches into the app's code.
"""

from __future__ import annotations

import json
from typing import Any

# The end of the element is inside the window and inside every scrolling box around it.
_END_IN_VIEW = """(selector) => {
  const node = document.querySelector(selector);
  if (!node) return false;
  let top = 0, bottom = window.innerHeight;
  for (let box = node.parentElement; box; box = box.parentElement) {
    if (!/(auto|scroll|hidden)/.test(getComputedStyle(box).overflowY)) continue;
    const rect = box.getBoundingClientRect();
    top = Math.max(top, rect.top);
    bottom = Math.min(bottom, rect.bottom);
  }
  const end = node.getBoundingClientRect().bottom;
  return end > top && end <= bottom + 1;
}"""


def end_in_view(page: Any, selector: str) -> bool:
    """True when the last line of ``selector`` is on screen."""
    return bool(page.evaluate(f"({_END_IN_VIEW})({json.dumps(selector)})"))


def wait_end_in_view(page: Any, selector: str) -> None:
    """Wait until the last line of ``selector`` is on screen."""
    # A function and its argument: an expression would be evaluated by the page's own polling,
    # which its Content-Security-Policy (no eval) refuses.
    page.wait_for_function(_END_IN_VIEW, arg=selector)


def next_frames(page: Any, count: int = 2) -> None:
    """Wait until the page has drawn ``count`` more frames (layout, resize observers, paint)."""
    page.evaluate(
        """(count) => new Promise((done) => {
            const step = (left) => left ? requestAnimationFrame(() => step(left - 1)) : done();
            step(count);
        })""",
        count,
    )


def scroll_top(page: Any, selector: str) -> float:
    """How far the element ``selector`` is scrolled."""
    return float(page.eval_on_selector(selector, "node => node.scrollTop"))


def dialog(page: Any) -> Any:
    """The page's own open dialog (a ``<dialog>`` element, never the browser's)."""
    page.wait_for_selector("dialog[open]")
    return page.locator("dialog[open]")


def closed(page: Any) -> None:
    """Wait until no dialog of the page is open."""
    page.wait_for_selector("dialog[open]", state="detached")


def answer(page: Any, text: str) -> None:
    """Type ``text`` into the open dialog and press Enter."""
    box = dialog(page).locator("input")
    box.fill(text)
    box.press("Enter")
    closed(page)


def confirm(page: Any) -> None:
    """Press the open dialog's confirming button."""
    dialog(page).locator("button[value='ok']").click()
    closed(page)


def dismiss(page: Any) -> None:
    """Close the open dialog with Escape."""
    dialog(page)
    page.keyboard.press("Escape")
    closed(page)


def failed_responses(page: Any) -> list[str]:
    """Start recording the page's responses with an error status; the list fills as they come."""
    failures: list[str] = []
    page.on(
        "response", lambda r: failures.append(f"{r.status} {r.url}") if r.status >= 400 else None
    )
    return failures
