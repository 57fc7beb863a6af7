"""The guard in front of the web: a login on every bind, Host names a rebinding attack would
send, Origin checks, security headers."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest

from cove.channels.web import create_app
from cove.channels.web.security import (
    SESSION_MAX_AGE_S,
    host_name,
    is_loopback,
    new_session,
)
from cove.config import Settings
from cove.errors import ConfigError
from tests.channels.web.conftest import Web
from tests.channels.web.serve import BEARER, TOKEN, served
from tests.conftest import FAKE_API_KEY
from tests.scripted import settings_for

REBINDING = (
    "127.0.0.1.evil.example",
    "127.evil.example",
    "localhost.evil.example",
    "[::1].evil.example",
    "evil.example",
    "127.0.0.1:80.evil.example",
    "localhost.",
)


#: A figure's PNG (the route checks the session and the Host before it looks for the figure).
FIGURE = "/api/conversations/c0ffee/figures/" + "0" * 32


async def test_a_request_without_the_session_is_refused_by_default(web: Web) -> None:
    async with web(login=False) as client:
        refused = await client.get("/api/conversations")
        assert refused.status_code == 401 and refused.json()["status"] == 401
        assert "log in with the URL printed at start" in refused.json()["message"]
        assert (await client.get("/")).status_code == 401
        assert (await client.get("/static/app.js")).status_code == 401
        assert (await client.get(FIGURE)).status_code == 401
        assert (await client.post("/api/conversations", json={})).status_code == 401
        assert (await client.get("/login?token=wrong")).status_code == 401
        assert (await client.get("/login")).status_code == 401
        assert not client.cookies

        login = await client.get(f"/login?token={TOKEN}")
        assert login.status_code == 303 and login.headers["location"] == "/"
        cookie = login.headers["set-cookie"]
        port = client.base_url.port
        assert cookie.startswith(f"cove_session_{port}=")  # one session per server, not per host
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and TOKEN not in cookie
        assert (await client.get("/api/conversations")).status_code == 200
        assert (await client.get("/")).status_code == 200

        client.cookies.clear()
        assert (await client.get("/api/conversations")).status_code == 401
        assert f"Max-Age={SESSION_MAX_AGE_S}" in cookie
        for forged in (
            "forged",
            new_session("another-token-0123456789"),  # signed with another token
            new_session(TOKEN, issued=time.time() - SESSION_MAX_AGE_S - 1),  # expired
            new_session(TOKEN, issued=time.time() + 3600).replace(".", ".x", 1),  # altered
        ):
            client.cookies.set(f"cove_session_{port}", forged)
            assert (await client.get("/api/conversations")).status_code == 401, forged
        client.cookies.set(f"cove_session_{port}", new_session(TOKEN))  # any node's session
        assert (await client.get("/api/conversations")).status_code == 200
        client.cookies.clear()
        assert (await client.get("/api/conversations", headers=BEARER)).status_code == 200
        wrong = {"authorization": "Bearer not-the-token-at-all-0123"}
        assert (await client.get("/api/conversations", headers=wrong)).status_code == 401


async def test_host_names_a_rebinding_page_would_send_are_refused(web: Web) -> None:
    async with web() as client:
        port = client.base_url.port
        for name in REBINDING:
            for host in (name, f"{name}:{port}"):
                for path in ("/api/conversations", FIGURE):
                    refused = await client.get(path, headers={"host": host})
                    assert refused.status_code == 403, (host, path)
            # Not even the login is served there.
            login = await client.get(f"/login?token={TOKEN}", headers={"host": name})
            assert login.status_code == 403 and "set-cookie" not in login.headers
        for host in (f"localhost:{port}", f"LOCALHOST:{port}", f"[::1]:{port}", "127.0.0.9"):
            served_here = await client.get("/api/conversations", headers={"host": host})
            assert served_here.status_code == 200, host


async def test_off_loopback_any_host_is_served_but_only_logged_in(tmp_path: Path) -> None:
    app = create_app(settings_for(tmp_path))
    async with served(app, bind="0.0.0.0") as url, httpx.AsyncClient(base_url=url) as client:
        named = {"host": "cove.example.org"}
        assert (await client.get("/api/conversations", headers=named)).status_code == 401
        both = named | BEARER
        assert (await client.get("/api/conversations", headers=both)).status_code == 200


async def test_a_proxy_s_public_name_can_be_allowed_on_loopback(tmp_path: Path) -> None:
    app = create_app(settings_for(tmp_path))
    async with (
        served(app, allow_hosts=("cove.example.org",)) as url,
        httpx.AsyncClient(base_url=url, headers=BEARER) as client,
    ):
        for host, status in (("cove.example.org", 200), ("other.example.org", 403)):
            assert (await client.get("/api/conversations", headers={"host": host})).status_code == (
                status
            )


def test_host_names_are_parsed_never_compared_by_prefix() -> None:
    assert host_name("localhost:8000") == "localhost"
    assert host_name("[::1]:8000") == "[::1]"
    assert host_name("[::1]") == "[::1]"
    assert host_name("127.0.0.1") == "127.0.0.1"
    for malformed in ("[::1].evil.example", "[::1]x", "::1", "a:b", "host:", "[::1"):
        assert host_name(malformed) is None, malformed
    for loopback in ("localhost", "127.0.0.1", "127.1.2.3", "[::1]", "::1", "LocalHost"):
        assert is_loopback(loopback), loopback
    for other in ("127.0.0.1.evil.example", "127.evil.example", "localhost.evil.example",
                  "0.0.0.0", "10.0.0.1", "[::]", "127.1", "localhost."):  # fmt: skip
        assert not is_loopback(other), other


async def test_cross_origin_state_changes_are_refused(web: Web) -> None:
    async with web() as client:
        own = str(client.base_url).rstrip("/")
        evil = {"origin": "http://evil.example"}
        refused = await client.post("/api/conversations", json={}, headers=evil)
        assert refused.status_code == 403
        cross_site = {"sec-fetch-site": "cross-site"}
        assert (
            await client.post("/api/conversations", json={}, headers=cross_site)
        ).status_code == 403
        assert (await client.get("/api/conversations")).json()["conversations"] == []
        same = await client.post("/api/conversations", json={}, headers={"origin": own})
        assert same.status_code == 201
        cid = same.json()["id"]
        assert (await client.delete(f"/api/conversations/{cid}", headers=evil)).status_code == 403
        assert (await client.get(f"/api/conversations/{cid}")).status_code == 200


async def test_security_headers_and_no_api_key_in_pages(web: Web) -> None:
    async with web() as client:
        cid = (await client.post("/api/conversations", json={})).json()["id"]
        anonymous = httpx.AsyncClient(base_url=client.base_url)
        async with anonymous:
            refusals = [
                await anonymous.get("/"),
                await anonymous.get("/", headers={"host": "evil.example"}),
            ]
        paths = ("/", f"/c/{cid}", "/static/app.js", "/api/conversations", "/nowhere")
        for response in [*[await client.get(path) for path in paths], *refusals]:
            csp = response.headers["content-security-policy"]
            assert "script-src 'self'" in csp and "unsafe-inline" not in csp
            assert response.headers["x-content-type-options"] == "nosniff"
            assert FAKE_API_KEY not in response.text


def test_a_configured_token_must_be_long_enough() -> None:
    def configured_token(env: dict[str, str]) -> str | None:
        return Settings.load(env=env).web.token

    assert configured_token({}) is None
    assert configured_token({"COVE_WEB_TOKEN": ""}) is None
    assert configured_token({"COVE_WEB_TOKEN": TOKEN}) == TOKEN
    with pytest.raises(ConfigError) as caught:
        configured_token({"COVE_WEB_TOKEN": "short"})
    assert "web_token must be at least 16 characters" in str(caught.value)
    assert "(environment variable COVE_WEB_TOKEN)" in str(caught.value)


async def test_forking_and_the_branch_pages_are_behind_the_guard(web: Web) -> None:
    async with web() as client:
        cid = (await client.post("/api/conversations", json={"title": "Root"})).json()["id"]
        fork_url, body = f"/api/conversations/{cid}/fork", {"turn": 0, "request": "again"}
        evil = {"origin": "http://evil.example"}
        assert (await client.post(fork_url, json=body, headers=evil)).status_code == 403
        rebound = {"host": "127.0.0.1.evil.example"}
        assert (await client.post(fork_url, json=body, headers=rebound)).status_code == 403
        assert (await client.get(f"/c/{cid}", headers=rebound)).status_code == 403
        assert (await client.get(f"/api/conversations/{cid}/forks")).json()["forks"] == []
        branch = (await client.post(fork_url, json=body)).json()["id"]  # logged in, own origin
        assert (await client.get(f"/c/{branch}")).status_code == 200
        client.cookies.clear()
        assert (await client.post(fork_url, json=body)).status_code == 401
        for page in (f"/c/{branch}", f"/c/{cid}", f"/api/conversations/{cid}/forks"):
            assert (await client.get(page)).status_code == 401, page
