"""Webhook mode: Telegram POSTs updates here; only requests with the secret token count."""

from __future__ import annotations

import hmac
import json
import logging

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from telegram import Update
from telegram.ext import Application

log = logging.getLogger("cove.telegram")
SECRET_HEADER = "x-telegram-bot-api-secret-token"
MAX_UPDATE_BYTES = 1_000_000


def webhook_app(app: Application, path: str, secret: str) -> Starlette:  # type: ignore[type-arg]
    """A Starlette app that feeds verified updates at ``path`` into ``app``'s update queue."""

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
        await app.update_queue.put(update)
        return Response(status_code=200)

    return Starlette(routes=[Route(path, receive, methods=["POST"])])
