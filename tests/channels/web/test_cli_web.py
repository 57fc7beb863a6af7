"""``cove web`` as a person starts it: a real process, the login URL it prints, the browser's
cookie or a script's bearer token; Host names a rebinding attack would send are refused."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

import httpx
import pytest

from tests.channels.web.process import LOGIN_URL, free_port, start, stop

pytestmark = pytest.mark.slow  # real turns in sandbox workers behind a server

REBINDING = ("127.0.0.1.evil.example", "127.evil.example", "localhost.evil.example")


def test_cove_web_on_loopback_needs_the_printed_login_url(tmp_path: Path) -> None:
    port = free_port()
    process, url = start(tmp_path, "--port", str(port))
    try:
        match = LOGIN_URL.match(f"cove web: {url}")
        assert match is not None and int(match.group(2)) == port
        base = f"http://127.0.0.1:{port}"
        with httpx.Client(base_url=base) as client:
            # Nothing is served without the cookie: pages, the API, static files, changes.
            for path in ("/", "/api/conversations", "/static/app.js", "/c/x"):
                assert client.get(path).status_code == 401, path
            assert client.post("/api/conversations", json={}).status_code == 401
            assert client.get("/login?token=wrong").status_code == 401
            login = client.get(url.replace("localhost", "127.0.0.1"))
            assert login.status_code == 303 and login.headers["location"] == "/"
            assert client.get("/api/conversations").status_code == 200
            page = client.get("/")
            assert page.status_code == 200 and "sk-never-shown" not in page.text
    finally:
        stop(process)


def test_cove_web_refuses_host_names_a_rebinding_page_would_send(tmp_path: Path) -> None:
    port = free_port()
    token = "token-for-the-rebinding-test-0123456789"
    process, url = start(tmp_path, "--port", str(port), token=token)
    try:
        assert url == f"http://localhost:{port}/login?token={token}"
        bearer = {"authorization": f"Bearer {token}"}
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", headers=bearer) as client:
            for name in (*REBINDING, "[::1].evil.example", "evil.example"):
                for host in (name, f"{name}:{port}"):
                    refused = client.get("/api/conversations", headers={"host": host})
                    assert refused.status_code == 403, host
            for host in (f"localhost:{port}", f"127.0.0.1:{port}", f"[::1]:{port}", "127.0.0.2"):
                served = client.get("/api/conversations", headers={"host": host})
                assert served.status_code == 200, host
    finally:
        stop(process)


def test_cove_web_open_opens_the_login_url_in_the_browser(tmp_path: Path) -> None:
    opened = tmp_path / "opened"
    os.mkfifo(opened)  # the "browser" writes the URL it was given; the test reads it
    browser = tmp_path / "browser"
    browser.write_text(f'#!/bin/sh\nprintf "%s" "$1" > {opened}\n')
    browser.chmod(browser.stat().st_mode | stat.S_IXUSR)
    given: list[str] = []
    reader = threading.Thread(target=lambda: given.append(opened.read_text()), daemon=True)
    reader.start()
    port = free_port()
    process, url = start(tmp_path, "--port", str(port), "--open", env={"BROWSER": str(browser)})
    try:
        reader.join(timeout=60)
        assert given == [url]
        with httpx.Client(follow_redirects=True) as client:  # one click: logged in
            page = client.get(url.replace("localhost", "127.0.0.1"))
            assert page.status_code == 200 and "conversation" in page.text.lower()
    finally:
        stop(process)
