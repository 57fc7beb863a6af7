"""Login token → session cookie, refused requests, Origin and Host checks, security headers."""

from __future__ import annotations

import pytest

from cove.channels.cli.web import login_token
from cove.errors import ConfigError
from tests.channels.web.conftest import Web
from tests.conftest import FAKE_API_KEY

TOKEN = "a-long-enough-test-token-123"


async def test_with_a_token_every_path_needs_the_session_cookie(web: Web) -> None:
    async with web(token=TOKEN) as client:
        refused = await client.get("/api/conversations")
        assert refused.status_code == 401 and refused.json()["status"] == 401
        assert (await client.get("/")).status_code == 401
        assert (await client.post("/api/conversations", json={})).status_code == 401
        assert (await client.get("/login?token=wrong")).status_code == 401
        assert (await client.get("/login")).status_code == 401
        assert not client.cookies

        login = await client.get(f"/login?token={TOKEN}")
        assert login.status_code == 303 and login.headers["location"] == "/"
        cookie = login.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and TOKEN not in cookie
        assert (await client.get("/api/conversations")).status_code == 200
        assert (await client.get("/")).status_code == 200

        client.cookies.clear()
        assert (await client.get("/api/conversations")).status_code == 401
        client.cookies.set("cove_session", "forged")
        assert (await client.get("/api/conversations")).status_code == 401
        client.cookies.clear()
        bearer = {"authorization": f"Bearer {TOKEN}"}
        assert (await client.get("/api/conversations", headers=bearer)).status_code == 200


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


async def test_without_a_token_only_loopback_host_names_are_served(web: Web) -> None:
    async with web() as client:
        rebound = await client.get("/api/conversations", headers={"host": "evil.example"})
        assert rebound.status_code == 403
        assert (
            await client.get("/api/conversations", headers={"host": "localhost:1"})
        ).status_code == 200


async def test_security_headers_and_no_api_key_in_pages(web: Web) -> None:
    async with web() as client:
        cid = (await client.post("/api/conversations", json={})).json()["id"]
        for path in ("/", f"/c/{cid}", "/static/app.js", "/api/conversations", "/nowhere"):
            response = await client.get(path)
            csp = response.headers["content-security-policy"]
            assert "script-src 'self'" in csp and "unsafe-inline" not in csp
            assert response.headers["x-content-type-options"] == "nosniff"
            assert FAKE_API_KEY not in response.text


def test_login_token_rules() -> None:
    assert login_token("127.0.0.1", {}) is None
    assert login_token("localhost", {}) is None
    generated = login_token("0.0.0.0", {})
    assert generated is not None and len(generated) >= 24
    assert login_token("0.0.0.0", {"COVE_WEB_TOKEN": TOKEN}) == TOKEN
    assert login_token("127.0.0.1", {"COVE_WEB_TOKEN": TOKEN}) == TOKEN
    with pytest.raises(ConfigError):
        login_token("0.0.0.0", {"COVE_WEB_TOKEN": "short"})
