"""The chat view follows the work as chat products do: it stays at the newest iteration while a
turn streams, lets go when the reader scrolls up, and a "jump to latest" control brings it back."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.channels.web.browser import Gate, Site, answer, send
from tests.channels.web.ui import end_in_view, next_frames, scroll_top, wait_end_in_view
from tests.fakes.openai_server import Fault

pytestmark = pytest.mark.slow  # a real Chromium per test

# Low windows, and a long turn first: the finished iterations fold to one line each, and the
# thread must still be taller than the window for following to mean anything.
DESKTOP = {"width": 1000, "height": 420}
PHONE = {"width": 375, "height": 600}


def opened_with_a_long_turn(site: Site, page: Any) -> str:
    """A conversation, open in the page, whose first turn answered at length."""
    site.fake.add_replies(long_answer(0))
    cid = site.conversation()
    page.goto(f"{site.url}/c/{cid}")
    send(page, "first, at length")
    page.wait_for_selector("#turn-1[data-status='done'] .answer")
    return cid


def steps(count: int) -> list[Gate]:
    """One gated reply per iteration, each running a block, so a turn grows step by step."""
    return [
        Gate(answer("", [f"step_{n} = {n} * {n}", f"step_{n}"], thinking=f"Working on step {n}."))
        for n in range(1, count + 1)
    ]


def let_through(gates: list[Gate]) -> None:
    for gate in gates:
        assert gate.reached.wait(30)
        gate.opened.set()


def iteration(n: int) -> str:
    return f".turn.live .iteration[data-iteration='{n}']"


def test_a_live_turn_follows_its_newest_iteration_until_the_reader_scrolls_up(
    site: Site, page: Any
) -> None:
    page.set_viewport_size(DESKTOP)
    opened_with_a_long_turn(site, page)
    gates = steps(9)
    site.fake.add_replies(*gates, answer("All nine steps are done."))
    send(page, "nine steps, one at a time")

    let_through(gates[:6])
    assert gates[6].reached.wait(30)  # iteration 7 is running
    page.wait_for_selector(iteration(7))
    next_frames(page)
    assert end_in_view(page, iteration(7)), "the page stayed behind the newest iteration"
    assert page.locator(iteration(1)).count() == 1
    assert not end_in_view(page, "#turn-1 .answer")  # the thread is taller than the window
    assert page.is_hidden("#jump-latest")  # nothing to jump to: the reader is at the end

    # The reader scrolls up to read iteration 1: the page lets go and offers the way back.
    page.mouse.move(400, 250)
    page.mouse.wheel(0, -2000)
    page.wait_for_selector("#jump-latest", state="visible")
    held = scroll_top(page, "#thread")
    gates[6].opened.set()
    assert gates[7].reached.wait(30)
    page.wait_for_selector(iteration(8))
    next_frames(page)
    assert scroll_top(page, "#thread") == held, "new output pulled the reader away"
    assert not end_in_view(page, iteration(8))
    assert page.is_visible("#jump-latest")

    page.click("#jump-latest")
    wait_end_in_view(page, iteration(8))
    page.wait_for_selector("#jump-latest", state="hidden")

    # Following again: the rest streams in view, and so does the answer that ends the turn.
    let_through(gates[7:])
    page.wait_for_selector("#turn-2[data-status='done'] .answer")
    next_frames(page)
    assert end_in_view(page, "#turn-2 .answer")
    assert page.is_hidden("#jump-latest")


def test_scrolling_back_to_the_end_by_hand_follows_again(site: Site, page: Any) -> None:
    page.set_viewport_size(DESKTOP)
    opened_with_a_long_turn(site, page)
    gates = steps(6)
    site.fake.add_replies(*gates, answer("done"))
    send(page, "six steps")
    let_through(gates[:4])
    assert gates[4].reached.wait(30)
    page.wait_for_selector(iteration(5))
    page.mouse.move(400, 250)
    page.mouse.wheel(0, -2000)
    page.wait_for_selector("#jump-latest", state="visible")
    page.mouse.wheel(0, 5000)  # all the way down again
    page.wait_for_selector("#jump-latest", state="hidden")
    gates[4].opened.set()
    assert gates[5].reached.wait(30)
    page.wait_for_selector(iteration(6))
    next_frames(page)
    assert end_in_view(page, iteration(6))
    gates[5].opened.set()
    page.wait_for_selector("#turn-2[data-status='done']")


def long_answer(n: int) -> str:
    return answer("\n\n".join(f"Answer {n}, paragraph {p}." for p in range(1, 9)))


def test_a_conversation_opens_at_its_latest_turn_or_at_the_turn_linked(
    site: Site, page: Any
) -> None:
    page.set_viewport_size(DESKTOP)
    site.fake.add_replies(*(long_answer(n) for n in range(1, 4)))
    cid = site.conversation()
    page.goto(f"{site.url}/c/{cid}")
    for n in range(1, 4):
        send(page, f"question {n}")
        page.wait_for_selector(f"#turn-{n}[data-status='done']")
    page.reload()
    page.wait_for_selector("#turn-3 .answer")
    next_frames(page)
    assert end_in_view(page, "#turn-3 .answer")
    assert not end_in_view(page, "#turn-1 .answer")
    assert page.is_hidden("#jump-latest")

    page.goto(f"{site.url}/c/{cid}#turn-1")  # a search hit links to its turn
    page.wait_for_selector("#turn-1 .answer")
    next_frames(page)
    top = page.eval_on_selector("#turn-1", "node => node.getBoundingClientRect().top")
    assert 0 <= top < DESKTOP["height"] / 2
    page.wait_for_selector("#jump-latest", state="visible")

    # Sending from there brings the reader to the new turn.
    site.fake.add_replies(answer("the fourth answer"))
    send(page, "question 4")
    page.wait_for_selector("#turn-4[data-status='done'] .answer")
    next_frames(page)
    assert end_in_view(page, "#turn-4 .answer")


def test_on_a_phone_too_the_page_follows_the_newest_iteration(site: Site, page: Any) -> None:
    page.set_viewport_size(PHONE)
    opened_with_a_long_turn(site, page)
    gates = steps(6)
    site.fake.add_replies(*gates, answer("done"))
    send(page, "six steps on a phone")
    let_through(gates[:5])
    assert gates[5].reached.wait(30)
    page.wait_for_selector(iteration(6))
    next_frames(page)
    assert end_in_view(page, iteration(6))
    assert not end_in_view(page, "#turn-1 .answer")
    assert page.is_visible("#message")  # the composer stays on screen
    assert end_in_view(page, "#composer")
    gates[5].opened.set()
    page.wait_for_selector("#turn-2[data-status='done']")


def test_a_reply_streamed_in_many_small_chunks_keeps_the_page_at_its_end(
    site: Site, page: Any
) -> None:
    page.set_viewport_size(DESKTOP)
    site.fake.chunk_size = 3  # hundreds of deltas, each a few characters
    thinking = "\n".join(f"Line {n} of a long train of thought." for n in range(1, 120))
    site.fake.add_faults(Fault.stall(seconds=60, after_chunks=800))  # then it waits, mid-reply
    site.fake.add_replies(json.dumps({"thinking": thinking, "answer": "done"}))
    cid = site.conversation()
    page.goto(f"{site.url}/c/{cid}")
    send(page, "think out loud at length")
    delta = ".turn.live .iteration[data-iteration='1'] .delta"
    page.wait_for_function(
        "(s) => (document.querySelector(s)?.textContent.length ?? 0) >= 2000", arg=delta
    )
    page.wait_for_function("(s) => document.querySelector(s).scrollHeight > 1000", arg=delta)
    next_frames(page)
    assert end_in_view(page, delta), "the page fell behind the streamed text"
    assert page.is_hidden("#jump-latest")

    page.mouse.move(400, 250)
    page.mouse.wheel(0, -600)  # the reader scrolls up into the text: the page lets go
    page.wait_for_selector("#jump-latest", state="visible")
    assert not end_in_view(page, delta)
    page.keyboard.press("Escape")  # leaves the message box the request was sent from
    page.keyboard.press("Escape")  # stop (a shortcut), the page stays where the reader is
    page.wait_for_selector(".turn[data-status='cancelled']")
