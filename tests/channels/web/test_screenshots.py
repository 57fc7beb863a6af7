"""The README's pictures of the web, taken from the real app in Chromium.

Every run takes them (into a temporary folder) and checks what each must show, so they cannot
go stale unnoticed; to refresh the ones in ``docs/``:
``COVE_SCREENSHOTS=docs .venv/bin/python -m pytest tests/channels/web/test_screenshots.py``.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.channels.web.browser import Gate, Site, answer, send
from tests.channels.web.serve import BEARER
from tests.channels.web.ui import end_in_view, next_frames
from tests.fakes.openai_server import Fault

pytestmark = pytest.mark.slow  # a real Chromium per test

DESKTOP = {"width": 1200, "height": 820}
PHONE = {"width": 390, "height": 844}

SALES = [
    answer(
        "",
        ["sales = [120, 95, 143, 170, 160]", "total = sum(sales)", "total"],
        thinking="Add up the monthly sales first.",
    ),
    answer(
        "",
        ["mean = total / len(sales)", "best = 1 + max(range(len(sales)), key=lambda i: sales[i])"],
        thinking="Now the mean and the best month.",
    ),
    answer(
        "| | sales |\n|---|--:|\n| total | {{total}} |\n| mean | {{mean}} |\n\n"
        "The best month was month **{{best}}**.",
        thinking="Everything is known.",
    ),
]

PRIMES = [
    ("Sieve up to 60.", ["limit = 60", "sieve = [True] * (limit + 1)"]),
    (
        "Cross out the multiples of each prime.",
        [
            "for n in range(2, int(limit ** 0.5) + 1):\n"
            "    if sieve[n]:\n"
            "        sieve[n * n :: n] = [False] * len(sieve[n * n :: n])"
        ],
    ),
    ("Collect what is left.", ["primes = [n for n in range(2, limit + 1) if sieve[n]]", "primes"]),
    ("The gaps between neighbours.", ["gaps = [b - a for a, b in zip(primes, primes[1:])]"]),
    ("The widest gap.", ["widest = max(gaps)", "widest"]),
]
STREAMING = json.dumps(
    {"thinking": "Now where the widest gap sits, and how often each gap occurs.", "code": ["0"]}
)


def save(page: Any, name: str, folder: Path) -> None:
    """Take the picture; with COVE_SCREENSHOTS set, copy it there too."""
    path = folder / name
    page.screenshot(path=str(path))
    assert path.stat().st_size > 10_000  # a picture of a page, not of an empty window
    target = os.environ.get("COVE_SCREENSHOTS")
    if target:
        shutil.copyfile(path, Path(target) / name)


def titled(page: Any, site: Site, title: str) -> str:
    created = httpx.post(f"{site.url}/api/conversations", json={"title": title}, headers=BEARER)
    cid: str = created.json()["id"]
    return cid


def test_the_chat_and_the_inspector(site: Site, page: Any, tmp_path: Path) -> None:
    page.set_viewport_size(DESKTOP)
    site.fake.add_replies(*SALES)
    cid = titled(page, site, "Quarterly sales")
    page.goto(f"{site.url}/c/{cid}")
    send(page, "What were the total and mean sales, and the best month?")
    page.wait_for_selector("#turn-1[data-status='done'] .answer table")
    page.goto(f"{site.url}/c/{cid}#turn-1")
    page.click("#turn-1 summary")  # its iterations, from the top
    page.wait_for_selector("#turn-1 .iteration[data-iteration='2']")
    page.click("#turn-1 .iteration[data-iteration='1'] summary")  # the first one open
    page.mouse.move(10, 10)  # no hover effect in the picture
    save(page, "web-chat.png", tmp_path)
    page.goto(f"{site.url}/c/{cid}/inspect/1/1")
    page.wait_for_selector("a[rel='next']")
    save(page, "web-inspector.png", tmp_path)


def test_a_live_turn_following_its_newest_iteration(site: Site, page: Any, tmp_path: Path) -> None:
    page.set_viewport_size(DESKTOP)
    thinking, code = PRIMES[-1]
    last = Gate(answer("", code, thinking=thinking))
    site.fake.add_replies(
        *(answer("", code, thinking=thinking) for thinking, code in PRIMES[:-1]),
        last,
        STREAMING,
    )
    cid = titled(page, site, "Prime gaps below 60")
    page.goto(f"{site.url}/c/{cid}")
    send(page, "Which primes are below 60, and where is the widest gap between neighbours?")
    assert last.reached.wait(60)  # four iterations first, on a loaded machine too
    site.fake.add_faults(Fault.stall(seconds=60, after_chunks=4))  # the next reply streams, slowly
    last.opened.set()
    newest = ".turn.live .iteration[data-iteration='6'] .delta:not(:empty)"
    page.wait_for_selector(newest)
    next_frames(page)
    assert end_in_view(page, newest)  # the page follows the newest iteration
    assert page.is_hidden(".turn.live .iteration[data-iteration='1'] .block")  # folded
    page.mouse.move(10, 10)
    save(page, "web-live.png", tmp_path)
    page.click("#stop")
    page.wait_for_selector(".turn[data-status='cancelled']")


def test_the_list_on_a_desktop_and_on_a_phone(site: Site, page: Any, tmp_path: Path) -> None:
    running = Gate(answer("never shown"))
    site.fake.add_replies(
        answer("", ["primes = [n for n in range(2, 60) if all(n % d for d in range(2, n))]"]),
        answer("There are {{len(primes)}} primes below 60."),
        running,
    )
    done = titled(page, site, "Primes below 60")
    page.goto(f"{site.url}/c/{done}")
    send(page, "How many primes are below 60?")
    page.wait_for_selector("#turn-1[data-status='done']")
    for title in ("Quarterly sales", "Cleaning the survey export"):
        titled(page, site, title)
    failed = titled(page, site, "Collatz sequence lengths")
    site.fake.add_faults(Fault.error(401, "invalid key"))
    page.goto(f"{site.url}/c/{failed}")
    send(page, "How long is the Collatz sequence of 27?")
    page.wait_for_selector("#turn-1[data-status='failed']")
    live = titled(page, site, "Word counts in the report")
    page.goto(f"{site.url}/c/{live}")
    send(page, "Count the words of report.txt")
    assert running.reached.wait(60)

    page.set_viewport_size(DESKTOP)
    page.goto(f"{site.url}/conversations")
    page.wait_for_selector(f"tr[data-id='{live}'] :text('running')")
    save(page, "web-list.png", tmp_path)
    page.set_viewport_size(PHONE)
    page.reload()
    page.wait_for_selector(f"tr[data-id='{live}'] :text('running')")
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    save(page, "web-phone-list.png", tmp_path)
    # The chat opens beside the sidebar: newest first, the running one and the failed one marked.
    page.set_viewport_size(DESKTOP)
    page.goto(site.url)
    page.wait_for_selector(f"#sidebar-entries li[data-id='{live}'] .mark.running")
    page.wait_for_selector(f"#sidebar-entries li[data-id='{failed}'] .mark.failed")
    assert page.evaluate("document.activeElement.id") == "message"
    page.mouse.move(10, 10)
    save(page, "web-new-chat.png", tmp_path)
    page.set_viewport_size(PHONE)
    page.goto(f"{site.url}/c/{done}")
    page.click("#sidebar-toggle")
    page.wait_for_selector(f"#sidebar-entries li[data-id='{live}'] .mark.running")
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    save(page, "web-phone-drawer.png", tmp_path)
    running.opened.set()
    page.goto(f"{site.url}/c/{live}")
    page.wait_for_selector(".turn[data-status='done']")


LOAN = [
    answer(
        "",
        [
            "principal, rate, years = 20_000, 0.05 / 12, 10",
            "months = years * 12",
            "payment = round(principal * rate / (1 - (1 + rate) ** -months), 2)",
            "payment",
        ],
        thinking="The annuity formula, with the monthly rate.",
    ),
    answer("The monthly payment is **{{payment}}** over {{months}} months."),
]


def test_the_branches_of_a_conversation(site: Site, page: Any, tmp_path: Path) -> None:
    """A turn asked three ways ("‹ 2/3 ›" over it), and the tree of branches, named apart."""
    page.set_viewport_size(DESKTOP)
    site.fake.add_replies(
        *LOAN,
        answer("", ["interest = round(payment * months - principal, 2)", "interest"]),
        answer("Over the ten years you pay **{{interest}}** in interest."),
    )
    cid = titled(page, site, "Loan repayments")
    page.goto(f"{site.url}/c/{cid}")
    send(page, "A loan of 20,000 at 5% over 10 years: what is the monthly payment?")
    page.wait_for_selector("#turn-1[data-status='done'] .answer")
    send(page, "How much interest is that in total?")
    page.wait_for_selector("#turn-2[data-status='done'] .answer")

    site.fake.add_replies(  # a retry of turn 2: the same question, answered as a share
        answer(
            "",
            [
                "interest = round(payment * months - principal, 2)",
                "share = round(100 * interest / principal, 1)",
            ],
        ),
        answer("**{{interest}}** in interest: {{share}}% of the loan."),
    )
    page.click("#turn-2 button[data-action='retry']")
    page.wait_for_url(lambda url: cid not in url)
    page.wait_for_selector("#turn-2[data-status='done'] .answer")
    retried = page.url.split("/c/", 1)[1].split("#", 1)[0]
    site.fake.add_replies(  # an edit of turn 2, made in the retry: a branch of a branch
        answer(
            "",
            [
                "rate = 0.04 / 12",
                "cheaper = round(principal * rate / (1 - (1 + rate) ** -months), 2)",
                "saved = round(payment - cheaper, 2)",
            ],
        ),
        answer("At 4% the payment would be **{{cheaper}}**, {{saved}} less a month."),
    )
    page.click("#turn-2 button[data-action='edit']")
    page.fill("#message", "And at 4% instead?")
    page.press("#message", "Enter")
    page.wait_for_url(lambda url: cid not in url and retried not in url)
    page.wait_for_selector("#turn-2[data-status='done'] .answer")
    page.goto(f"{site.url}/c/{cid}")
    page.click("#turn-1 button[data-action='fork']")  # a branch after turn 1
    page.wait_for_selector("#branches .fork-note")

    page.goto(f"{site.url}/c/{retried}")
    page.wait_for_selector("#sidebar-entries li")
    assert page.text_content("#turn-2 .turn-versions .count [aria-hidden]") == "2/3"
    page.focus("#turn-2 .turn-versions a[data-step='next']")  # as the keyboard reaches it
    page.mouse.move(10, 10)
    save(page, "web-branches.png", tmp_path)
    page.click("#branches summary")
    page.wait_for_selector("#branch-list .branch-tree a[aria-current='page']")
    assert page.locator("#branch-list .branch-tree a").count() == 4
    page.mouse.move(10, 10)
    save(page, "web-branch-list.png", tmp_path)
