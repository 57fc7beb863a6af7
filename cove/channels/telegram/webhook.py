"""Webhook mode: Telegram POSTs updates here; only requests with the secret token count.

Telegram posts an update again when the first post was not acknowledged in time, and behind a
proxy the second post may reach another node: each update is handled only by the first process
to record it (``Conversations.first_delivery``); a repeat is acknowledged and dropped. When the
record cannot be made (the database is unreachable) the post is refused with 503, so Telegram
delivers it again later rather than the update being lost or run twice.
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

FirstDelivery = Callable[[int], Awaitable[bool]]
"""Whether an update id is delivered for the first time (recording it); raises when it cannot
tell."""


def webhook_app(
    app: Application,  # type: ignore[type-arg]
    path: str,
    secret: str,
    first: FirstDelivery,
) -> Starlette:
    """A Starlette app that feeds verified updates at ``path`` into ``app``'s update queue, each
    update once (``first``)."""

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
            new = await first(update.update_id)
        except Exception:
            log.exception(
                "could not record update %s: refused, to be delivered again", update.update_id
            )
            return Response(status_code=503)
        if not new:
            log.info("update %s was delivered before: dropped", update.update_id)
            return Response(status_code=200)
        await app.update_queue.put(update)
        return Response(status_code=200)

    return Starlette(routes=[Route(path, receive, methods=["POST"])])
