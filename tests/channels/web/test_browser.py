"""The web channel in a real browser: Chromium driven by Playwright, the real openai client
talking to the fake endpoint, a real store and real sandbox workers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.channels.web import ui
from tests.channels.web.browser import HOSTILE, Gate, Site, answer, login, send
from tests.channels.web.process import free_port, start, stop
from tests.channels.web.proxy import CuttableProxy
from tests.channels.web.serve import BEARER
from tests.conftest import FAKE_API_KEY
from tests.fakes.openai_server import FakeOpenAI, Fault

pytestmark = pytest.mark.slow  # a real Chromium per test


def test_send_streams_iterations_and_renders_the_answer(site: Site, page: Any) -> None:
    last = Gate(answer("The **total** is {{total}}."))
    site.fake.add_replies(answer("", ["total = sum([1, 2, 3])", "total"]), last)
    cid = site.conversation()
    page.goto(f"{site.url}/c/{cid}")
    send(page, "add one two three")
    # The first iteration streams in while the turn is still running (folded to one line once
    # the second one starts).
    page.wait_for_selector(
        ".turn.live .iteration[data-iteration='1'] .block.ok .value", state="attached"
    )
    assert page.text_content(".turn.live .block.ok .value") == "→ 6"
    page.wait_for_selector(".turn.live .block pre.code.hl .n", state="attached")  # highlighted
    assert page.text_content(".turn.live .block pre.code") == "total = sum([1, 2, 3])"
    assert page.is_visible("#stop")
    assert page.text_content("#vars tr[data-name='total'] .version") == "v1"
    last.opened.set()
    page.wait_for_selector(".turn[data-status='done'] .answer strong")
    assert page.text_content(".answer strong") == "total"
    assert "The total is 6." in page.text_content(".answer")
    assert page.is_hidden("#stop")
    assert page.locator(".turn").count() == 1
    assert FAKE_API_KEY not in page.content()


def test_stop_cancels_the_running_turn(site: Site, page: Any) -> None:
    site.fake.add_faults(Fault.stall(seconds=30, after_chunks=3))
    site.fake.add_replies(answer("never shown"))
    cid = site.conversation()
    page.goto(f"{site.url}/c/{cid}")
    send(page, "take your time")
    page.wait_for_selector(".turn.live .iteration .delta:not(:empty)")  # the streamed text
    page.click("#stop")
    page.wait_for_selector(".turn[data-status='cancelled']")
    assert "never shown" not in page.text_content("#turns")


def test_reload_mid_turn_resumes_without_gaps_or_duplicates(site: Site, page: Any) -> None:
    second = Gate(answer("", ["b = a + 1"]))
    site.fake.add_replies(answer("", ["a = 41"]), second, answer("b is {{b}}"))
    cid = site.conversation()
    page.goto(f"{site.url}/c/{cid}")
    send(page, "two steps")
    page.wait_for_selector(".turn.live .iteration[data-iteration='2']")
    assert second.reached.wait(10)
    page.reload()
    page.wait_for_selector(".turn.live .iteration[data-iteration='2']")
    assert page.locator(".turn").count() == 1
    assert page.locator(".turn .iteration").count() == 2
    assert page.locator(".turn .block").count() == 1
    assert page.text_content(".turn .block pre.code") == "a = 41"
    second.opened.set()
    page.wait_for_selector(".turn[data-status='done'] .answer")
    assert page.text_content(".answer").strip() == "b is 42"
    assert page.locator(".turn .iteration").count() == 3


def test_hostile_answer_renders_inert(site: Site, page: Any) -> None:
    site.fake.add_replies(
        answer("", ["print(\"<script>alert('o')</script>\")", "'<img src=x onerror=alert(1)>'"]),
        answer(HOSTILE),
    )
    cid = site.conversation()
    page.goto(f"{site.url}/c/{cid}")
    scripts_before = page.evaluate("document.scripts.length")
    send(page, "be nasty")
    page.wait_for_selector(".turn[data-status='done'] .answer")
    page.reload()  # and the server-rendered page too
    page.wait_for_selector(".turn[data-status='done'] .answer")
    assert page.dialogs == []  # type: ignore[attr-defined]
    assert page.evaluate("document.scripts.length") == scripts_before == 1
    assert page.locator("img[onerror]").count() == 0
    assert page.locator("a[href^='javascript']").count() == 0
    assert "<script>alert('s')</script>" in page.text_content(".answer")  # shown as text


def test_fork_from_turn_one_and_a_new_variable_version(site: Site, page: Any) -> None:
    site.fake.add_replies(
        answer("", ["n = 1"]), answer("n is {{n}}"), answer("", ["n = n + 1"]), answer("now {{n}}")
    )
    cid = site.conversation()
    page.goto(f"{site.url}/c/{cid}")
    send(page, "start")
    page.wait_for_selector("#turn-1[data-status='done']")
    assert page.text_content("#vars tr[data-name='n'] .version") == "v1"
    send(page, "again")
    page.wait_for_selector("#turn-2[data-status='done']")
    assert page.text_content("#vars tr[data-name='n'] .version") == "v2"
    page.click("#vars tr[data-name='n'] a")
    page.wait_for_selector("#v2 .diff", state="attached")
    assert "+2" in page.text_content("#v2 .diff")
    page.go_back()
    page.click("#turn-1 button[data-action='fork']")
    page.wait_for_selector(".fork-note")
    assert page.locator(".turn").count() == 1
    assert page.text_content("#vars tr[data-name='n'] .version") == "v1"


def test_uploaded_csv_is_read_by_the_model(site: Site, page: Any, tmp_path: Path) -> None:
    site.fake.add_replies(
        answer(
            "",
            [
                "rows = read_file('people.csv').splitlines()",
                "write_file('count.txt', str(len(rows)))",
                "len(rows)",
            ],
        ),
        answer("{{len(rows)}} rows"),
    )
    cid = site.conversation()
    page.goto(f"{site.url}/c/{cid}")
    csv = tmp_path / "people.csv"
    csv.write_text("name,age\nada,36\nalan,41\n")
    page.set_input_files("#file-input", str(csv))
    page.wait_for_selector("#files a:text('people.csv')")
    send(page, "how many rows?")
    page.wait_for_selector(".turn[data-status='done']")
    assert page.locator(".turn .block .value").all_text_contents()[-1] == "→ 3"
    page.wait_for_selector("#vars tr[data-name='rows'] .size:text('len 3')")
    page.wait_for_selector("#files a:text('count.txt')")  # the file the code wrote
    with page.expect_download() as download:
        page.click("#files a:text('count.txt')")
    assert Path(download.value.path()).read_text() == "3"


def test_oversize_upload_shows_the_limit(site: Site, page: Any, tmp_path: Path) -> None:
    cid = site.conversation()
    page.goto(f"{site.url}/c/{cid}")
    big = tmp_path / "big.bin"
    big.write_bytes(b"x" * (site.settings.sandbox.max_file_read_bytes + 1))
    page.set_input_files("#file-input", str(big))
    page.wait_for_selector("#notice.error")
    assert "upload limit" in page.text_content("#notice")
    assert not (site.settings.store.workspaces / cid / "big.bin").exists()


def test_list_updates_live_renames_and_deletes_with_confirmation(site: Site, page: Any) -> None:
    page.goto(f"{site.url}/conversations")
    page.wait_for_selector("td.empty")
    cid = site.conversation()  # created elsewhere: the open list shows it
    page.wait_for_selector(f"tr[data-id='{cid}']")
    page.click(f"tr[data-id='{cid}'] button[data-action='rename']")
    ui.answer(page, "Renamed in the browser")  # the page's own dialog
    page.wait_for_selector(f"tr[data-id='{cid}'] .title:text('Renamed in the browser')")
    assert httpx.get(f"{site.url}/api/conversations/{cid}", headers=BEARER).json()["title"] == (
        "Renamed in the browser"
    )
    page.click(f"tr[data-id='{cid}'] button[data-action='delete']")
    assert "Renamed in the browser" in ui.dialog(page).text_content()
    ui.dismiss(page)  # kept
    assert httpx.get(f"{site.url}/api/conversations/{cid}", headers=BEARER).status_code == 200
    page.click(f"tr[data-id='{cid}'] button[data-action='delete']")
    ui.confirm(page)
    page.wait_for_selector(f"tr[data-id='{cid}']", state="detached")
    assert httpx.get(f"{site.url}/api/conversations/{cid}", headers=BEARER).status_code == 404


def test_two_tabs_stay_live_and_a_second_message_queues(site: Site, page: Any) -> None:
    first = Gate(answer("first done"))
    site.fake.add_replies(first, answer("second done"))
    cid = site.conversation()
    other = page.context.new_page()
    for tab in (page, other):
        tab.goto(f"{site.url}/c/{cid}")
    send(page, "one")
    page.wait_for_selector(".turn.live")
    assert first.reached.wait(10)
    send(page, "two")
    page.wait_for_selector(".msg.queued")
    first.opened.set()
    for tab in (page, other):
        tab.wait_for_selector("#turn-2[data-status='done']")
        assert tab.locator(".turn").count() == 2
        assert tab.locator(".msg.queued").count() == 0
        assert tab.text_content("#turn-2 .answer").strip() == "second done"


def test_inspector_and_replay(site: Site, page: Any) -> None:
    site.fake.add_replies(answer("", ["z = 5 * 5"]), answer("z is {{z}}"))
    cid = site.conversation()
    page.goto(f"{site.url}/c/{cid}")
    send(page, "square five")
    page.wait_for_selector("#turn-1[data-status='done']")
    page.click("#replay")
    page.wait_for_selector("#replay-report h3")
    assert page.text_content("#replay-report h3") == "Replay matched"
    page.click("#turn-1 summary")
    page.click("#turn-1 .iteration[data-iteration='1'] a.inspect")
    page.wait_for_selector(".inspector")
    text = page.text_content(".inspector")
    assert "z = 5 * 5" in text and "square five" in text and "Turn totals" in text


def test_phone_width_and_dark_mode(site: Site, browser: Any) -> None:
    site.fake.add_replies(answer("", ["wide = 'x' * 500", "wide"]), answer("{{wide}}"))
    cid = site.conversation()
    with httpx.Client(
        base_url=site.url, timeout=30, headers=BEARER
    ) as http:  # a turn with very long lines
        http.post(f"/api/conversations/{cid}/messages", json={"text": "a long line " * 40})
        with http.stream("GET", f"/api/conversations/{cid}/events?after=0") as events:
            next(line for line in events.iter_lines() if '"turn_finished"' in line)
    looks = {}
    for scheme in ("light", "dark"):
        context = browser.new_context(viewport={"width": 390, "height": 800}, color_scheme=scheme)
        phone = context.new_page()
        login(phone, site.url)
        phone.goto(f"{site.url}/c/{cid}")
        phone.wait_for_selector("#composer")
        assert phone.evaluate("document.documentElement.scrollWidth") <= 390  # no sideways scroll
        assert phone.is_visible("#message") and phone.is_visible("#dropzone")
        assert phone.is_visible("#delete") and phone.is_visible("#rename")
        for path in ("/", "/conversations", f"/c/{cid}/inspect/1/1"):
            phone.goto(f"{site.url}{path}")
            assert phone.evaluate("document.documentElement.scrollWidth") <= 390, path
        phone.goto(f"{site.url}/c/{cid}")
        looks[scheme] = phone.evaluate("getComputedStyle(document.body).backgroundColor")
        context.close()
    assert looks["light"] != looks["dark"]


def test_dropped_file_lands_in_the_workspace_and_downloads(site: Site, page: Any) -> None:
    cid = site.conversation()
    page.goto(f"{site.url}/c/{cid}")
    page.evaluate(
        """([name, text]) => {
            const data = new DataTransfer();
            data.items.add(new File([text], name, {type: "text/csv"}));
            const zone = document.getElementById("dropzone");
            const init = {dataTransfer: data, bubbles: true, cancelable: true};
            zone.dispatchEvent(new DragEvent("drop", init));
        }""",
        ["dropped.csv", "a,b\n1,2\n"],
    )
    page.wait_for_selector("#files a:text('dropped.csv')")
    assert (site.settings.store.workspaces / cid / "dropped.csv").read_text() == "a,b\n1,2\n"
    with page.expect_download() as download:
        page.click("#files a:text('dropped.csv')")
    assert download.value.suggested_filename == "dropped.csv"
    assert Path(download.value.path()).read_text() == "a,b\n1,2\n"


def test_dropped_connection_resumes_without_gaps_or_duplicates(site: Site, page: Any) -> None:
    second, third = Gate(answer("", ["b = a + 1"])), Gate(answer("b is {{b}}"))
    site.fake.add_replies(answer("", ["a = 1"]), second, third)
    cid = site.conversation()
    with CuttableProxy(int(site.url.rsplit(":", 1)[1])) as proxy:
        page.goto(f"http://127.0.0.1:{proxy.port}/c/{cid}")
        send(page, "three steps")
        page.wait_for_selector(".turn.live .iteration[data-iteration='2']")
        assert second.reached.wait(10)
        proxy.cut()  # the network drops; EventSource reconnects with Last-Event-ID
        page.wait_for_selector("body[data-stream='reconnecting']", state="attached")
        second.opened.set()  # the turn goes on meanwhile
        assert third.reached.wait(10)
        page.wait_for_selector(".turn.live .iteration[data-iteration='3']")
        assert page.locator(".turn").count() == 1
        assert page.locator(".turn .iteration").count() == 3
        codes = page.locator(".turn .block pre.code").all_text_contents()
        assert codes == ["a = 1", "b = a + 1"]  # the one from the gap, and nothing twice
        third.opened.set()
        page.wait_for_selector(".turn[data-status='done'] .answer")
        assert page.text_content(".answer").strip() == "b is 2"


def test_the_printed_login_url_logs_the_browser_in_and_the_app_works(
    browser: Any, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    fake_openai.add_replies(answer("", ["x = 6 * 7"]), answer("It is {{x}}."))
    endpoint = {
        "OPENAI_BASE_URL": fake_openai.base_url,
        "COVE_MODEL": "fake-model",
        "COVE_WORKER_POOL_SIZE": "1",
    }
    port = free_port()
    process, url = start(tmp_path, "--port", str(port), env=endpoint)  # as a person starts it
    try:
        context = browser.new_context()
        tab = context.new_page()
        tab.set_default_timeout(20_000)
        refused = tab.goto(f"http://localhost:{port}/")
        assert refused is not None and refused.status == 401  # no session yet
        tab.goto(url)  # the URL cove web printed, as clicked in a terminal
        assert tab.url == f"http://localhost:{port}/"  # the token left the address bar
        tab.click("#new-conversation")  # API calls with the cookie, same origin
        tab.wait_for_selector("#composer")
        send(tab, "six times seven?")
        tab.wait_for_selector(".turn[data-status='done'] .answer")
        assert "It is 42." in tab.text_content(".answer")
        cookies = context.cookies()
        assert [(c["name"], c["httpOnly"], c["sameSite"]) for c in cookies] == [
            (f"cove_session_{port}", True, "Strict")
        ]
        assert tab.evaluate("document.cookie") == ""  # out of reach of scripts
        assert "sk-never-shown" not in tab.content()
        context.close()
    finally:
        stop(process)
