"""``cove web``: serve the web channel (chat, list, inspector) with uvicorn."""

from __future__ import annotations

import contextlib
import sys
import threading
import webbrowser

import click

from cove.channels.cli.base import command, examples, load_settings
from cove.channels.cli.extras import require


@command(
    "web",
    short_help="Serve the chat and inspector in the browser.",
    epilog=examples(
        "cove web --open                      on localhost:8000, opened in the browser, logged in",
        "cove web --host 0.0.0.0 --port 9000   reachable from other machines",
        "COVE_WEB_TOKEN=… cove web             a token of your own instead of a new one",
    ),
)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option("--port", type=click.IntRange(1, 65535), default=8000, show_default=True)
@click.option(
    "--allow-host",
    "allow_hosts",
    multiple=True,
    metavar="NAME",
    help="Also answer this Host name on a loopback bind (a reverse proxy's public name).",
)
@click.option("--open", "open_page", is_flag=True, help="Open the login URL in a browser.")
def web_command(host: str, port: int, allow_hosts: tuple[str, ...], open_page: bool) -> int:
    """Serve the web channel: chat, conversation list and inspector, streamed live.

    Every bind needs a login, loopback included: once the port listens, the login URL is
    printed on stderr (it carries a new token each start, or COVE_WEB_TOKEN). Opening it
    gives the browser a session cookie; --open does that for you. Scripts send the header
    Authorization: Bearer <token>.
    """
    require("web", "cove web")
    return _serve(host, port, allow_hosts, open_page)


def _serve(host: str, port: int, allow_hosts: tuple[str, ...], open_page: bool) -> int:
    import uvicorn

    from cove.channels.web import create_app
    from cove.channels.web.listen import listen
    from cove.channels.web.security import Guard, login_url, new_token

    settings = load_settings()
    token = settings.web.token or new_token()
    sock = listen(host, port)  # before anything is printed: a busy port is one error line
    url = login_url(host, port, token)
    print(f"cove web: {url}", file=sys.stderr, flush=True)
    app = Guard(create_app(settings), token, bind=host, allow_hosts=allow_hosts)
    if open_page:  # connections queue on the socket until uvicorn serves them
        threading.Thread(target=webbrowser.open, args=(url,), daemon=True).start()
    config = uvicorn.Config(
        app,
        log_level="warning",
        timeout_graceful_shutdown=2,
        proxy_headers=False,
    )
    # uvicorn re-raises the Ctrl-C it shut down on: here that is a normal stop.
    with contextlib.suppress(KeyboardInterrupt):
        uvicorn.Server(config).run(sockets=[sock])
    return 0
