"""The conversations as the chat's sidebar and the list page show them: newest first, how each
last turn ended, how long ago, and search hits by content."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from cove.channels.web.state import web
from cove.conversation import Conversations, SearchHit
from cove.events import outcome

LIST_LIMIT = 200
SIDEBAR_LIMIT = 60  # the rest are a click away, on the list page
MARKED = ("running", "failed", "interrupted")  # the outcomes the sidebar marks


@dataclass(frozen=True)
class Hit:
    """A search hit as the list shows it: its conversation's label and its passage in parts."""

    hit: SearchHit
    title: str
    parts: list[tuple[str, bool]]  # (text, True for a match)


def marked(text: str, matches: tuple[tuple[int, int], ...]) -> list[tuple[str, bool]]:
    """``text`` cut into its plain parts and its matches, in order."""
    parts: list[tuple[str, bool]] = []
    at = 0
    for start, end in sorted(matches):
        if start < at:
            continue  # overlapping: the first one wins
        parts += [(text[at:start], False), (text[start:end], True)]
        at = end
    parts.append((text[at:], False))
    return [(part, match) for part, match in parts if part]


def ago(timestamp: float | None, now: float) -> str:
    """How long before ``now`` ``timestamp`` was, as a sidebar says it ("5 min", "3 d")."""
    if not timestamp:
        return ""
    seconds = max(0.0, now - timestamp)
    for unit, size in (("d", 86_400), ("h", 3_600), ("min", 60)):
        if seconds >= size:
            return f"{int(seconds // size)} {unit}"
    return "now"


async def search_hits(convs: Conversations, query: str) -> list[Hit]:
    """The passages matching ``query`` in requests, answers and code (none for no query)."""
    found = await convs.search(query) if query else []
    return [Hit(h, h.label, marked(h.text, h.matches)) for h in found]


async def list_context(request: Request, limit: int = LIST_LIMIT) -> dict[str, Any]:
    """What the list page and the sidebar render: the conversations and the hits of ``?q=``."""
    convs = web(request).convs
    query = request.query_params.get("q", "").strip()
    return {
        "conversations": await convs.list(limit=limit),
        "outcome": outcome,
        "marked_outcomes": MARKED,
        "query": query,
        "hits": await search_hits(convs, query),
        "now": time.time(),
        "ago": ago,
        "current": request.query_params.get("current", ""),
    }


async def sidebar_fragment(request: Request) -> Response:
    """The sidebar's entries, for the page to refresh them (a change, a search)."""
    response: Response = request.app.state.templates.TemplateResponse(
        request, "_sidebar_entries.html", await list_context(request, SIDEBAR_LIMIT)
    )
    return response


ROUTES = [Route("/fragments/sidebar", sidebar_fragment, methods=["GET"])]
