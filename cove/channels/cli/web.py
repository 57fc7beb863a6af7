"""``cove web``: serve the web channel (chat, list, inspector) with uvicorn."""

from __future__ import annotations

import argparse
import contextlib
import os
import secrets
import sys
import threading
import webbrowser
from typing import Any

from cove.channels.cli.common import add_common
from cove.config import Settings
from cove.errors import ConfigError


def register(sub: Any) -> None:
    """Add ``web``."""
    web = sub.add_parser("web", help="serve the chat and inspector in the browser")
    add_common(web)
    web.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    web.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    web.add_argument("--open", action="store_true", help="open the page in a browser")
    web.set_defaults(handler=_serve)


def login_token(host: str, env: dict[str, str]) -> str | None:
    """The login token: ``COVE_WEB_TOKEN``, or a new one for a non-loopback bind, else None."""
    from cove.channels.web.security import is_loopback

    given = env.get("COVE_WEB_TOKEN") or None
    if given is not None and len(given) < 16:
        raise ConfigError("COVE_WEB_TOKEN must be at least 16 characters")
    if given is None and not is_loopback(host):
        return secrets.token_urlsafe(24)
    return given


def _serve(args: argparse.Namespace, settings: Settings) -> int:
    import uvicorn

    from cove.channels.web import create_app

    token = login_token(args.host, dict(os.environ))
    shown = "localhost" if args.host in ("127.0.0.1", "::1") else args.host
    url = f"http://{shown}:{args.port}/"
    if token is not None:
        url += f"login?token={token}"
    print(f"cove web: {url}", file=sys.stderr, flush=True)
    app = create_app(settings, token=token)
    if args.open:
        threading.Timer(1.0, webbrowser.open, (url,)).start()
    config = uvicorn.Config(
        app,
        host=args.host,
        port=args.port,
        log_level="warning",
        timeout_graceful_shutdown=2,
        proxy_headers=False,
    )
    # uvicorn re-raises the Ctrl-C it shut down on: here that is a normal stop.
    with contextlib.suppress(KeyboardInterrupt):
        uvicorn.Server(config).run()
    return 0
