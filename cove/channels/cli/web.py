"""``cove web``: serve the web channel (chat, list, inspector) with uvicorn."""

from __future__ import annotations

import contextlib
import os
import secrets
import sys
import threading
import webbrowser

import click

from cove.channels.cli.base import command, examples, load_settings
from cove.errors import ConfigError


@command(
    "web",
    short_help="Serve the chat and inspector in the browser.",
    epilog=examples(
        "cove web --open                      on http://localhost:8000/",
        "cove web --host 0.0.0.0 --port 9000   reachable from other machines, with a login link",
    ),
)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option("--port", type=click.IntRange(1, 65535), default=8000, show_default=True)
@click.option("--open", "open_page", is_flag=True, help="Open the page in a browser.")
def web_command(host: str, port: int, open_page: bool) -> int:
    """Serve the web channel: chat, conversation list and inspector, streamed live.

    A bind other than loopback needs a login: the printed URL carries a token
    (COVE_WEB_TOKEN, or a new one each start).
    """
    return _serve(host, port, open_page)


def login_token(host: str, env: dict[str, str]) -> str | None:
    """The login token: ``COVE_WEB_TOKEN``, or a new one for a non-loopback bind, else None."""
    from cove.channels.web.security import is_loopback

    given = env.get("COVE_WEB_TOKEN") or None
    if given is not None and len(given) < 16:
        raise ConfigError("COVE_WEB_TOKEN must be at least 16 characters")
    if given is None and not is_loopback(host):
        return secrets.token_urlsafe(24)
    return given


def _serve(host: str, port: int, open_page: bool) -> int:
    import uvicorn

    from cove.channels.web import create_app

    settings = load_settings()
    token = login_token(host, dict(os.environ))
    shown = "localhost" if host in ("127.0.0.1", "::1") else host
    url = f"http://{shown}:{port}/"
    if token is not None:
        url += f"login?token={token}"
    print(f"cove web: {url}", file=sys.stderr, flush=True)
    app = create_app(settings, token=token)
    if open_page:
        threading.Timer(1.0, webbrowser.open, (url,)).start()
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="warning",
        timeout_graceful_shutdown=2,
        proxy_headers=False,
    )
    # uvicorn re-raises the Ctrl-C it shut down on: here that is a normal stop.
    with contextlib.suppress(KeyboardInterrupt):
        uvicorn.Server(config).run()
    return 0
