"""Webhook mode: Telegram POSTs updates here; only requests with the secret token count.

An update is kept in the store before it is acknowledged (``inbox.py``): once the webhook has
answered 200 Telegram never posts it again, so a node that dies after answering must leave it
for another node. Telegram also posts an update again when the first post was not acknowledged
in time, and behind a proxy the second post may reach another node: an update is kept (and
run) only by the first process to record its id; a repeat is acknowledged and dropped. When
the update cannot be kept (the database is unreachable) the post is refused with 503, so
Telegram delivers it again later rather than the update being lost or run twice.
"""

from __future__ import annotations

import hmac
import json
import logging
from collections.abc import Awaitable, Callable

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from telegram import Update
from telegram.ext import Application

log = logging.getLogger("cove.telegram")
SECRET_HEADER = "x-telegram-bot-api-secret-token"
MAX_UPDATE_BYTES = 1_000_000

Keep = Callable[[Update, str], Awaitable[bool]]
"""Keep an update (its JSON given) until it is handled, and run it; whether it is new. Raises
when it cannot be kept."""


def webhook_app(
    app: Application,  # type: ignore[type-arg]
    path: str,
    secret: str,
    keep: Keep,
) -> Starlette:
    """A Starlette app that keeps verified updates posted at ``path`` (``keep``), each once,
    before acknowledging them."""

    async def receive(request: Request) -> Response:
        given = request.headers.get(SECRET_HEADER, "")
        if not hmac.compare_digest(given.encode(), secret.encode()):
            log.warning("refused a webhook request without the right secret token")
            return Response(status_code=403)
        body = await request.body()
        if len(body) > MAX_UPDATE_BYTES:
            return Response(status_code=413)
        try:
            data = json.loads(body)
            update = Update.de_json(data, app.bot)
        except (ValueError, TypeError, KeyError):
            return Response(status_code=400)
        try:
            new = await keep(update, json.dumps(data))
        except Exception:
            log.exception(
                "could not keep update %s: refused, to be delivered again", update.update_id
            )
            return Response(status_code=503)
        if not new:
            log.info("update %s was delivered before: dropped", update.update_id)
        return Response(status_code=200)

    return Starlette(routes=[Route(path, receive, methods=["POST"])])
