"""JSON API: the conversation list and whole-conversation operations."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from cove.channels.export import FigureLinks, to_json, to_markdown
from cove.channels.web.api_figures import figure_url
from cove.channels.web.api_profile import optional_text
from cove.channels.web.api_turns import message_text, start_turn
from cove.channels.web.errors import BadInput
from cove.channels.web.state import int_field, json_body, text_field, web
from cove.conversation import ConversationRecord
from cove.errors import CoveError
from cove.events import ReplayFinished, ReplayTurnChecked, jsonable

CHANNEL = "web"
MAX_LIST = 500


def conversation_json(record: ConversationRecord) -> dict[str, Any]:
    """A conversation as the API shows it (no lease internals)."""
    return {
        "id": record.id,
        "title": record.title,
        "label": record.label,  # what lists call it: the title, else its first request's start
        "last_status": record.last_status,  # how its last turn ended (None: no turn yet)
        "channel": record.channel,
        "parent_id": record.parent_id,
        "fork_turn": record.fork_turn,
        "created_at": record.created_at,
        "updated_at": record.updated_at,
        "turn_count": record.turn_count,
        "running": record.last_status == "running",
    }


def _limit(request: Request) -> int:
    raw = request.query_params.get("limit", "50")
    try:
        limit = int(raw)
    except ValueError:
        raise BadInput(f"limit must be an integer, got {raw!r}") from None
    if not 1 <= limit <= MAX_LIST:
        raise BadInput(f"limit must be between 1 and {MAX_LIST}")
    return limit


async def list_conversations(request: Request) -> Response:
    convs = web(request).convs
    records = await convs.list(limit=_limit(request))
    return JSONResponse({"conversations": [conversation_json(r) for r in records]})


async def create(request: Request) -> Response:
    """Create a conversation; with ``text``, also send its first message.

    A page creates its conversation with the first message, so that opening "New
    conversation" and leaving leaves nothing behind; ``instructions`` and ``model`` are its
    profile from its first turn. Nothing is created when the message
    cannot be sent (no model endpoint, a bad message); the turn's own failures are recorded
    in it as any turn's are.
    """
    body = await json_body(request)
    title = text_field(body, "title", required=False)
    instructions = optional_text(body, "instructions")
    model = optional_text(body, "model") or None
    state = web(request)
    text = message_text(body) if body.get("text") is not None else None
    if text is not None:
        state.convs.check_model(model)
    record = await state.convs.create(
        channel=CHANNEL, title=title, instructions=instructions, model=model
    )
    if text is not None:
        try:
            await start_turn(state, record.id, text)
        except CoveError:
            await state.convs.delete(record.id)
            raise
    return JSONResponse(conversation_json(record), status_code=201)


async def get(request: Request) -> Response:
    record = await web(request).convs.get(request.path_params["cid"])
    return JSONResponse(conversation_json(record))


async def rename(request: Request) -> Response:
    body = await json_body(request)
    title = text_field(body, "title")
    assert title is not None
    record = await web(request).convs.rename(request.path_params["cid"], title)
    return JSONResponse(conversation_json(record))


async def delete(request: Request) -> Response:
    await web(request).convs.delete(request.path_params["cid"])
    return Response(status_code=204)


async def search(request: Request) -> Response:
    query = request.query_params.get("q", "").strip()
    if not query:
        raise BadInput("query parameter q is required")
    hits = await web(request).convs.search(query)
    return JSONResponse({"hits": jsonable(hits)})


async def export(request: Request) -> Response:
    convs = web(request).convs
    transcript = await convs.inspect(request.path_params["cid"])
    fmt = request.query_params.get("format", "md")
    cid = transcript.conversation.id
    if fmt == "md":
        base = str(request.base_url).rstrip("/")
        links = FigureLinks(lambda ref, f: base + figure_url(cid, f.digest), embed=False)
        body, kind = to_markdown(transcript, links), "text/markdown; charset=utf-8"
    elif fmt == "json":
        body, kind = to_json(transcript), "application/json"
    else:
        raise BadInput(f"format must be md or json, got {fmt!r}")
    disposition = f'attachment; filename="cove-{cid[:12]}.{fmt}"'
    return Response(body, media_type=kind, headers={"content-disposition": disposition})


async def fork(request: Request) -> Response:
    """A fork at ``turn``; ``request``, what it will ask first, names it a retry or an edit."""
    body = await json_body(request)
    asking = text_field(body, "request", required=False)
    record = await web(request).convs.fork(
        request.path_params["cid"], int_field(body, "turn"), request=asking
    )
    return JSONResponse(conversation_json(record), status_code=201)


async def forks(request: Request) -> Response:
    """The conversations forked from this one, by the turn each forked at."""
    records = await web(request).convs.forks(request.path_params["cid"])
    return JSONResponse({"forks": [conversation_json(r) for r in records]})


async def replay(request: Request) -> Response:
    convs = web(request).convs
    record = await convs.get(request.path_params["cid"])
    turns: list[dict[str, Any]] = []
    finished: dict[str, Any] | None = None
    async for event in convs.replay(record.id):
        if isinstance(event, ReplayTurnChecked):
            turns.append(event.to_json())
        elif isinstance(event, ReplayFinished):
            finished = event.to_json()
    return JSONResponse({"turns": turns, "finished": finished})


ROUTES = [
    Route("/api/conversations", list_conversations, methods=["GET"]),
    Route("/api/conversations", create, methods=["POST"]),
    Route("/api/conversations/{cid}", get, methods=["GET"]),
    Route("/api/conversations/{cid}", rename, methods=["PATCH"]),
    Route("/api/conversations/{cid}", delete, methods=["DELETE"]),
    Route("/api/conversations/{cid}/export", export, methods=["GET"]),
    Route("/api/conversations/{cid}/fork", fork, methods=["POST"]),
    Route("/api/conversations/{cid}/forks", forks, methods=["GET"]),
    Route("/api/conversations/{cid}/replay", replay, methods=["POST"]),
    Route("/api/search", search, methods=["GET"]),
]
