"""A conversation's figures as images: ``GET /api/conversations/{cid}/figures/{digest}``.

The PNG of a figure a block made, found by its digest among the blocks the conversation sees
(its fork chain included): an unknown conversation, or a digest that is not one of its figures,
is a 404 like any other. A figure's bytes never change for its digest, so the browser may keep
it (privately: it is behind the login) and a repeated request with ``If-None-Match`` gets a 304.
No ``Content-Disposition``: the page's download links name the file (``t1-i1-b2-1.png``), and
a browser prefers the header's name to theirs.
The host checked the PNG when the block ended; ``nosniff`` (from the guard) keeps the browser
from reading it as anything but an image.
"""

from __future__ import annotations

import re

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from cove.channels.web.state import web
from cove.errors import NotFound

DIGEST = re.compile(r"[0-9a-f]{64}")
CACHE = "private, max-age=31536000, immutable"


def figure_url(conversation_id: str, digest: str) -> str:
    """Where the page finds a figure's PNG."""
    return f"/api/conversations/{conversation_id}/figures/{digest}"


async def figure(request: Request) -> Response:
    digest = request.path_params["digest"]
    if not DIGEST.fullmatch(digest):
        raise NotFound("figure", digest[:80])
    convs = web(request).convs
    record = await convs.get(request.path_params["cid"])
    etag = f'"{digest}"'
    headers = {"cache-control": CACHE, "etag": etag}
    if etag in request.headers.get("if-none-match", ""):
        await convs.figure(record.id, digest)  # still one of its figures (not deleted)
        return Response(status_code=304, headers=headers)
    data = await convs.figure(record.id, digest)
    return Response(data, media_type="image/png", headers=headers)


ROUTES = [Route("/api/conversations/{cid}/figures/{digest}", figure, methods=["GET"])]
