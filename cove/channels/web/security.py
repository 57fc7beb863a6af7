"""Access control and browser hardening, as one ASGI middleware.

* With a token in force (any non-loopback bind), ``/login?token=…`` exchanges it once for an
  HttpOnly, SameSite=Strict session cookie; every other path needs the cookie (or an
  ``Authorization: Bearer`` header, for scripts). Without a token, only loopback ``Host`` names
  are served, so a page on another site cannot reach the server by DNS rebinding.
* State-changing requests carrying an ``Origin`` (browsers always send one) must come from this
  server's own origin.
* Every response gets a strict Content-Security-Policy (no inline script), ``nosniff``, no
  framing and no referrer.
"""

from __future__ import annotations

import hmac
import json
import secrets
from collections.abc import MutableMapping
from html import escape
from typing import Any
from urllib.parse import parse_qs

from starlette.types import ASGIApp, Message, Receive, Scope, Send

COOKIE = "cove_session"
LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})
MAX_SESSIONS = 1000
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; "
    "frame-ancestors 'none'; form-action 'self'"
)
_HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
]
_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def is_loopback(host: str) -> bool:
    """True for a host name or address that only this machine can reach."""
    return host in LOOPBACK_NAMES or host.startswith("127.")


class Guard:
    """The security middleware; ``token`` None means loopback-only, no login."""

    def __init__(self, app: ASGIApp, token: str | None) -> None:
        self.app = app
        self.token = token
        self.sessions: set[str] = set()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = _headers(scope)
        send = _secured(send)
        refusal = self._refusal(scope, headers)
        if refusal is not None:
            await _deny(send, *refusal, api=scope["path"].startswith("/api/"))
            return
        if self.token is not None and scope["path"] == "/login":
            await self._login(scope, send)
            return
        await self.app(scope, receive, send)

    def _refusal(self, scope: Scope, headers: dict[str, str]) -> tuple[int, str] | None:
        host = headers.get("host", "")
        hostname = host.rsplit(":", 1)[0] if not host.endswith("]") else host
        if self.token is None and not is_loopback(hostname):
            return 403, f"host {host!r} is not served without a token"
        if scope["method"] not in _SAFE_METHODS:
            origin = headers.get("origin")
            scheme = scope.get("scheme", "http")
            if origin is not None and origin != f"{scheme}://{host}":
                return 403, "cross-origin request refused"
            site = headers.get("sec-fetch-site")
            if origin is None and site not in (None, "same-origin", "none"):
                return 403, "cross-site request refused"
        if self.token is None or scope["path"] == "/login":
            return None
        if self._authenticated(headers):
            return None
        return 401, "log in with the URL printed by `cove web` (it carries the token)"

    def _authenticated(self, headers: dict[str, str]) -> bool:
        assert self.token is not None
        bearer = headers.get("authorization", "")
        if bearer.startswith("Bearer ") and hmac.compare_digest(
            bearer[7:].encode(), self.token.encode()
        ):
            return True
        session = _cookies(headers.get("cookie", "")).get(COOKIE)
        return session is not None and session in self.sessions

    async def _login(self, scope: Scope, send: Send) -> None:
        assert self.token is not None
        given = parse_qs(scope.get("query_string", b"").decode()).get("token", [""])[0]
        if not hmac.compare_digest(given.encode(), self.token.encode()):
            await _deny(send, 401, "wrong or missing token", api=False)
            return
        if len(self.sessions) >= MAX_SESSIONS:
            self.sessions.pop()
        session = secrets.token_urlsafe(32)
        self.sessions.add(session)
        cookie = f"{COOKIE}={session}; HttpOnly; SameSite=Strict; Path=/"
        if scope.get("scheme") == "https":
            cookie += "; Secure"
        # Redirect so the token leaves the address bar and the history.
        await send(
            {
                "type": "http.response.start",
                "status": 303,
                "headers": [(b"location", b"/"), (b"set-cookie", cookie.encode())],
            }
        )
        await send({"type": "http.response.body", "body": b""})


def _headers(scope: Scope) -> dict[str, str]:
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}


def _cookies(header: str) -> dict[str, str]:
    pairs = (part.strip().split("=", 1) for part in header.split(";") if "=" in part)
    return {k: v for k, v in pairs}


def _secured(send: Send) -> Send:
    async def wrapped(message: MutableMapping[str, Any]) -> None:
        if message["type"] == "http.response.start":
            names = {k.lower() for k, _ in message.get("headers", [])}
            extra = [(k, v) for k, v in _HEADERS if k not in names]
            message["headers"] = [*message.get("headers", []), *extra]
        await send(message)

    return wrapped


async def _deny(send: Send, status: int, message: str, *, api: bool) -> None:
    if api:
        body = json.dumps({"error": "forbidden", "message": message, "status": status}).encode()
        kind = b"application/json"
    else:
        body = f"<!doctype html><title>cove</title><p>{status}: {escape(message)}</p>".encode()
        kind = b"text/html; charset=utf-8"
    start: Message = {
        "type": "http.response.start",
        "status": status,
        "headers": [(b"content-type", kind), (b"content-length", str(len(body)).encode())],
    }
    await send(start)
    await send({"type": "http.response.body", "body": body})
