"""Access control and browser hardening for everything cove serves over HTTP, as one ASGI
middleware.

A composition root wraps its whole HTTP surface in one ``Guard``: ``cove web`` the web app,
``cove serve`` the web app with the operations endpoints beside it (and whatever else it mounts
there). So every endpoint is behind the same checks and the same login.

* **A login on every bind**, loopback included: ``/login?token=…`` (the URL printed at start)
  exchanges the token for an HttpOnly, SameSite=Strict session cookie; every other path needs
  the cookie, or an ``Authorization: Bearer <token>`` header (for scripts). A session is a
  random nonce signed with the token (HMAC-SHA256), so every process holding the same token
  accepts it — the nodes behind one proxy — and none that has another does; changing the token
  ends every session, and each ends 30 days after its login. Paths declared
  ``public`` (health checks) are served without it; the endpoint reads ``authenticated(scope)``
  to decide how much it says.
* **Host names.** Bound to a loopback address, the server answers only ``Host`` names that
  are loopback themselves (``localhost`` or a loopback IP literal, the port split off; never a
  name that merely starts like one) plus the names given as ``allow_hosts`` (a reverse proxy's
  public name). A page whose DNS name was rebound to 127.0.0.1 is refused before anything runs.
* State-changing requests carrying an ``Origin`` (browsers always send one) must come from this
  server's own origin.
* Every response gets a strict Content-Security-Policy (no inline script), ``nosniff``, no
  framing and no referrer.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
import secrets
import time
from collections.abc import Collection, MutableMapping
from html import escape
from typing import Any
from urllib.parse import parse_qs

from starlette.types import ASGIApp, Message, Receive, Scope, Send

COOKIE = "cove_session"
#: The scope key a ``Guard`` sets on every request it lets through: is the caller logged in?
AUTHENTICATED = "cove.authenticated"
#: What a session's signature signs besides its nonce (a token's HMAC of a nonce alone could
#: be confused with another use of the same key).
_SESSION_PURPOSE = b"cove session "
#: How long a session lasts (30 days); the next login starts a new one.
SESSION_MAX_AGE_S = 30 * 24 * 3600
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; "
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
_LOGIN_HINT = (
    "log in with the URL printed at start (it carries the token), "
    "or send the header Authorization: Bearer <token>"
)


def new_token() -> str:
    """A fresh login token (32 URL-safe characters)."""
    return secrets.token_urlsafe(24)


def host_name(header: str) -> str | None:
    """The name of a ``Host`` header with its port split off (lower case); None if malformed.

    ``[::1]:8000`` gives ``[::1]``; ``[::1].evil.example`` and ``a:b:c`` are malformed.
    """
    header = header.strip().lower()
    if header.startswith("["):
        end = header.find("]")
        name, rest = header[: end + 1], header[end + 1 :]
        if end < 0 or (rest and not (rest[0] == ":" and rest[1:].isdigit())):
            return None
        return name
    name, colon, port = header.partition(":")
    if colon and not port.isdigit():
        return None
    return name or None


def is_loopback(name: str) -> bool:
    """True for ``localhost`` or an IP literal of the loopback network (IPv6 bracketed or not).

    Names are never compared by prefix: ``127.0.0.1.evil.example`` is somebody else's.
    """
    name = name.lower()
    if name == "localhost":
        return True
    if name.startswith("[") and name.endswith("]"):
        name = name[1:-1]
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def login_url(host: str, port: int, token: str | None) -> str:
    """The URL to print at start: the server's address, with the login token when given."""
    shown = "localhost" if is_loopback(host) else host
    if ":" in shown:
        shown = f"[{shown}]"
    url = f"http://{shown}:{port}/"
    return f"{url}login?token={token}" if token is not None else url


def authenticated(scope: Scope) -> bool:
    """Whether the ``Guard`` in front found the caller logged in (False without a guard)."""
    return bool(scope.get(AUTHENTICATED, False))


class Guard:
    """The one security middleware in front of an HTTP surface (see the module docstring).

    Args:
        app: The ASGI app to guard (everything served behind this server).
        token: The login token (``new_token()`` or a configured one).
        bind: The address the server is bound to; a loopback address restricts ``Host``.
        allow_hosts: More ``Host`` names to answer on a loopback bind (a reverse proxy's).
        public: Paths served without a login (health checks); nothing else is.
    """

    def __init__(
        self,
        app: ASGIApp,
        token: str,
        *,
        bind: str,
        allow_hosts: Collection[str] = (),
        public: Collection[str] = (),
    ) -> None:
        self.app = app
        self.token = token
        self.hosts = frozenset(h.lower() for h in allow_hosts) if is_loopback(bind) else None
        self.public = frozenset(public)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":  # nothing behind a guard speaks WebSocket
            await send({"type": "websocket.close", "code": 1008})
            return
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = _headers(scope)
        send = _secured(send)
        api = scope["path"].startswith("/api/")
        refusal = self._refusal(scope, headers)
        if refusal is not None:
            await _deny(send, *refusal, api=api)
            return
        if scope["path"] == "/login":
            await self._login(scope, send)
            return
        scope[AUTHENTICATED] = self._authenticated(scope, headers)
        if not scope[AUTHENTICATED] and scope["path"] not in self.public:
            await _deny(send, 401, _LOGIN_HINT, api=api)
            return
        await self.app(scope, receive, send)

    def _refusal(self, scope: Scope, headers: dict[str, str]) -> tuple[int, str] | None:
        host = headers.get("host", "")
        name = host_name(host)
        if name is None or (
            self.hosts is not None and not is_loopback(name) and name not in self.hosts
        ):
            return 403, f"host {host!r} is not served here"
        if scope["method"] not in _SAFE_METHODS:
            origin = headers.get("origin")
            scheme = scope.get("scheme", "http")
            if origin is not None and origin != f"{scheme}://{host}":
                return 403, "cross-origin request refused"
            site = headers.get("sec-fetch-site")
            if origin is None and site not in (None, "same-origin", "none"):
                return 403, "cross-site request refused"
        return None

    def _authenticated(self, scope: Scope, headers: dict[str, str]) -> bool:
        bearer = headers.get("authorization", "")
        if bearer.startswith("Bearer ") and _same(bearer[7:], self.token):
            return True
        session = _cookies(headers.get("cookie", "")).get(_cookie_name(scope, headers))
        return session is not None and valid_session(session, self.token)

    async def _login(self, scope: Scope, send: Send) -> None:
        given = parse_qs(scope.get("query_string", b"").decode()).get("token", [""])[0]
        if not _same(given, self.token):
            await _deny(send, 401, "wrong or missing token", api=False)
            return
        session = new_session(self.token)
        name = _cookie_name(scope, _headers(scope))
        cookie = f"{name}={session}; HttpOnly; SameSite=Strict; Path=/; Max-Age={SESSION_MAX_AGE_S}"
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


def _same(given: str, token: str) -> bool:
    return hmac.compare_digest(given.encode(), token.encode())


def _signature(signed: str, token: str) -> str:
    mac = hmac.new(token.encode(), _SESSION_PURPOSE + signed.encode(), hashlib.sha256)
    return mac.hexdigest()


def new_session(token: str, *, issued: float | None = None) -> str:
    """A new session: when it was issued, a random nonce, and their signature with ``token``."""
    signed = f"{int(time.time() if issued is None else issued)}.{secrets.token_urlsafe(24)}"
    return f"{signed}.{_signature(signed, token)}"


def valid_session(session: str, token: str) -> bool:
    """Whether ``session`` was signed with ``token`` (compared in constant time) and issued
    less than ``SESSION_MAX_AGE_S`` ago."""
    signed, dot, signature = session.rpartition(".")
    issued = signed.partition(".")[0]
    if not (dot and issued.isdigit()):
        return False
    if not hmac.compare_digest(signature, _signature(signed, token)):
        return False
    return 0 <= time.time() - int(issued) < SESSION_MAX_AGE_S


def _cookie_name(scope: Scope, headers: dict[str, str]) -> str:
    """``cove_session_<port>``, the port the browser addressed (the ``Host`` header's, else
    the server's): cookies ignore ports, so two servers on one host each keep their own
    session instead of overwriting each other's, and nodes behind one proxy share one."""
    _, colon, port = headers.get("host", "").rpartition(":")
    if colon and port.isdigit():
        return f"{COOKIE}_{port}"
    server = scope.get("server")
    return f"{COOKIE}_{server[1]}" if server and server[1] else COOKIE


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
        error = "unauthorized" if status == 401 else "forbidden"
        body = json.dumps({"error": error, "message": message, "status": status}).encode()
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
