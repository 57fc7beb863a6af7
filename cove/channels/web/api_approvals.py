"""JSON API: the answer to an approval card (``approvals.py``)."""

from __future__ import annotations

from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from cove.channels.web.state import json_body, web


def _flag(body: dict[str, Any], name: str, *, required: bool) -> bool:
    """A boolean field of the body (422 when it is something else, or missing and required)."""
    value = body.get(name, None if required else False)
    if not isinstance(value, bool):
        raise HTTPException(422, f"field {name!r} must be true or false")
    return value


async def answer(request: Request) -> Response:
    """``{"approved": bool, "remember": bool}``: the answer to a card (404 unknown, 409 decided)."""
    body = await json_body(request)
    approved = _flag(body, "approved", required=True)
    remember = _flag(body, "remember", required=False)
    state = web(request)
    cid = request.path_params["cid"]
    state.approvals.answer(cid, request.path_params["aid"], approved, remember)
    return JSONResponse({"approved": approved, "remember": remember})


ROUTES = [
    Route("/api/conversations/{cid}/approvals/{aid}", answer, methods=["POST"]),
]
