"""Playwright on Debian's Chromium for the browser tests (never a downloaded browser).

Without ``/usr/bin/chromium`` the browser tests skip, saying why; with ``CI`` set they fail
instead, so CI cannot pass without running them.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from cove.channels.web import create_app
from cove.config import Settings
from tests.channels.web.serve import BEARER, TOKEN, served_in_thread
from tests.fakes.openai_server import FakeOpenAI

CHROMIUM = Path(os.environ.get("COVE_CHROMIUM", "/usr/bin/chromium"))
ARGS = [
    "--no-sandbox",  # Chromium's own sandbox cannot start as root
    "--headless",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def chromium_missing() -> str | None:
    """Why the browser tests cannot run here, or None when they can."""
    if not CHROMIUM.is_file():
        return f"Chromium not found at {CHROMIUM} (apt-get install chromium)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright package is not installed (pip install playwright)"
    return None


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    """One headless Chromium for all the browser tests (they live in one module).

    Module scope, not session: sync Playwright keeps an event loop running in this thread while
    the browser is open, and the async tests of other modules need the thread's loop free.
    """
    missing = chromium_missing()
    if missing is not None:
        if os.environ.get("CI"):
            pytest.fail(f"browser tests are mandatory in CI: {missing}")
        pytest.skip(missing)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        yield chromium
        chromium.close()


TIMEOUT_MS = 20_000

HOSTILE = (
    "Inert: <script>alert('s')</script> <img src=x onerror=\"alert('i')\"> "
    "[click me](javascript:alert('l')) <a href=\"javascript:alert('a')\">raw</a>"
)


def answer(text: str, code: list[str] | None = None, thinking: str = "thinking") -> str:
    body: dict[str, Any] = {"thinking": thinking, "answer": text}
    if code:
        body = {"thinking": thinking, "code": code}
    return json.dumps(body)


@dataclass
class Gate:
    """A scripted reply that waits until the test opens the gate (on the fake's thread)."""

    text: str
    opened: threading.Event = field(default_factory=threading.Event)
    reached: threading.Event = field(default_factory=threading.Event)

    def __call__(self, body: dict[str, Any]) -> str:
        self.reached.set()
        self.opened.wait(30)
        return self.text


@dataclass
class Site:
    url: str
    fake: FakeOpenAI
    settings: Settings

    def conversation(self) -> str:
        created = httpx.post(
            f"{self.url}/api/conversations", json={"title": "Browser test"}, headers=BEARER
        )
        cid: str = created.json()["id"]
        return cid


@pytest.fixture
def site(fake_openai: FakeOpenAI, openai_settings: Settings) -> Iterator[Site]:
    settings = openai_settings.replace(worker_pool_size=1, request_timeout_s=60.0)
    with served_in_thread(create_app(settings)) as url:
        yield Site(url, fake_openai, settings)


def login(page: Any, url: str) -> None:
    """Log the page's browser context in as a person does: open the login URL (the server
    sets the session cookie and redirects to the list)."""
    parts = urlsplit(url)
    page.goto(f"{parts.scheme}://{parts.netloc}/login?token={TOKEN}")
    assert urlsplit(page.url).path == "/"  # the token left the address bar


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """A page in a fresh context; its first visit to a server logs in with the login URL."""
    context = browser.new_context()
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    goto, visited = page.goto, set()

    def logged_in_goto(url: str, **options: Any) -> Any:
        server = urlsplit(url).netloc
        if server not in visited:
            visited.add(server)
            login(page, url)
        return goto(url, **options)

    page.goto = logged_in_goto
    page.dialogs = []  # every dialog's message, in order
    page.answers = []  # what the next dialogs answer (accepted); none left: dismissed

    def on_dialog(dialog: Any) -> None:
        page.dialogs.append(dialog.message)
        if page.answers:
            dialog.accept(page.answers.pop(0))
        else:
            dialog.dismiss()

    page.on("dialog", on_dialog)
    yield page
    context.close()


def send(page: Any, text: str) -> None:
    page.fill("#message", text)
    page.press("#message", "Enter")
