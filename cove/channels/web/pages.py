"""Server-rendered pages: the conversation list, the chat view, the inspector, a variable."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, Response
from starlette.routing import Route

from cove.channels.figures import turn_figures
from cove.channels.web.errors import TooLarge
from cove.channels.web.render import code_spans, diff
from cove.channels.web.state import web
from cove.channels.web.timeline import notes_by_iteration, page_timeline, resume_after
from cove.conversation import (
    Conversations,
    SearchHit,
    Transcript,
    TurnRecord,
    VarVersionRecord,
)
from cove.errors import NotFound
from cove.events import outcome

LIST_LIMIT = 200
MAX_HIGHLIGHT_BYTES = 200_000
ICON = Path(__file__).parent / "static" / "favicon.ico"


def _render(request: Request, name: str, context: dict[str, Any]) -> Response:
    response: Response = request.app.state.templates.TemplateResponse(request, name, context)
    return response


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


async def _hits(convs: Conversations, query: str) -> list[Hit]:
    found = await convs.search(query) if query else []
    return [Hit(h, h.label, marked(h.text, h.matches)) for h in found]


async def _list_context(request: Request) -> dict[str, Any]:
    convs = web(request).convs
    query = request.query_params.get("q", "").strip()
    records = await convs.list(limit=LIST_LIMIT)
    hits = await _hits(convs, query)
    return {"conversations": records, "outcome": outcome, "query": query, "hits": hits}


async def home(request: Request) -> Response:
    return _render(request, "list.html", await _list_context(request))


async def list_rows(request: Request) -> Response:
    return _render(request, "_rows.html", await _list_context(request))


def changes_by_iteration(transcript: Transcript) -> dict[tuple[int, int], list[VarVersionRecord]]:
    """The variable versions each iteration wrote, keyed by (turn position, iteration position)."""
    changes: dict[tuple[int, int], list[VarVersionRecord]] = {}
    for version in transcript.var_versions:
        key = (version.turn_position, version.iteration_position)
        changes.setdefault(key, []).append(version)
    return changes


async def chat(request: Request) -> Response:
    convs = web(request).convs
    transcript = await convs.inspect(request.path_params["cid"])
    events = page_timeline(transcript)
    turns, after = resume_after(transcript, events)
    current = await convs.variables(transcript.conversation.id)
    variables = [v for _, v in sorted(current.items()) if v.kind != "deleted"]
    context = {
        "conv": transcript.conversation,
        "turns": turns,
        "after": after,
        "variables": variables,
        "changes": changes_by_iteration(transcript),
        "notes": notes_by_iteration(events),
        "upload_limit": web(request).upload_limit,
    }
    return _render(request, "chat.html", context)


async def new_chat(request: Request) -> Response:
    """A chat with no conversation yet: the first message (or file) creates it."""
    context: dict[str, Any] = {
        "conv": None,
        "turns": [],
        "after": 0,
        "variables": [],
        "changes": {},
        "notes": {},
        "upload_limit": web(request).upload_limit,
    }
    return _render(request, "chat.html", context)


async def turn_fragment(request: Request) -> Response:
    convs = web(request).convs
    position = request.path_params["position"]
    transcript = await convs.inspect(request.path_params["cid"], turn=position)
    turn = next((t for t in transcript.turns if t.position == position), None)
    if turn is None:
        raise NotFound("turn", str(position))
    context = {
        "conv": transcript.conversation,
        "turn": turn,
        "changes": changes_by_iteration(transcript),  # a turn's transcript has what it wrote
        "notes": notes_by_iteration(page_timeline(transcript)),
    }
    return _render(request, "_turn.html", context)


@dataclass(frozen=True)
class Step:
    """A neighbouring iteration the inspector links to."""

    turn: int
    iteration: int  # 1-based


async def _turn(convs: Conversations, cid: str, position: int) -> TurnRecord | None:
    try:
        transcript = await convs.inspect(cid, turn=position)
    except NotFound:
        return None
    return next((t for t in transcript.turns if t.position == position), None)


async def neighbours(
    convs: Conversations, cid: str, turn: TurnRecord, number: int
) -> tuple[Step | None, Step | None]:
    """The iterations before and after iteration ``number`` of ``turn``, across turns."""
    before: Step | None = Step(turn.position, number - 1) if number > 1 else None
    after: Step | None = Step(turn.position, number + 1)
    if number >= len(turn.iterations):
        following = await _turn(convs, cid, turn.position + 1)
        after = Step(following.position, 1) if following and following.iterations else None
    if before is None and turn.position > 1:
        previous = await _turn(convs, cid, turn.position - 1)
        if previous is not None and previous.iterations:
            before = Step(previous.position, len(previous.iterations))
    return before, after


async def inspector(request: Request) -> Response:
    convs = web(request).convs
    position, number = request.path_params["position"], request.path_params["iteration"]
    transcript = await convs.inspect(request.path_params["cid"], turn=position)
    turn = next((t for t in transcript.turns if t.position == position), None)
    if turn is None:
        raise NotFound("turn", str(position))
    iteration = next((i for i in turn.iterations if i.position + 1 == number), None)
    if iteration is None:
        raise NotFound("iteration", str(number))
    before, after = await neighbours(convs, transcript.conversation.id, turn, number)
    system = await convs.system_prompt(iteration.system_prompt_hash)
    # What the iteration's model call was charged as it ran; unknown when its model had no price.
    cost = f"${iteration.usage.cost_usd:.4f}" if turn.cost_known else "unknown"
    context = {
        "conv": transcript.conversation,
        "turn": turn,
        "it": iteration,
        "system": system,
        "cost": cost,
        "before": before,
        "after": after,
        "figures": [found for found in turn_figures(turn) if found[0][1] == number],
    }
    return _render(request, "inspect.html", context)


async def variable(request: Request) -> Response:
    convs = web(request).convs
    record = await convs.get(request.path_params["cid"])
    name = request.path_params["name"]
    history = await convs.var_history(record.id, name)
    if not history:
        raise NotFound("variable", name)
    diffs = [""] + [diff(a.preview, b.preview) for a, b in itertools.pairwise(history)]
    context = {"conv": record, "name": name, "versions": list(zip(history, diffs, strict=True))}
    return _render(request, "var.html", context)


async def highlight_fragment(request: Request) -> Response:
    """A live block's code, highlighted as the finished turn will show it."""
    raw = await request.body()
    if len(raw) > MAX_HIGHLIGHT_BYTES:
        raise TooLarge(f"code over {MAX_HIGHLIGHT_BYTES:,} bytes is not highlighted")
    return HTMLResponse(code_spans(raw.decode("utf-8", "replace")))


async def favicon(request: Request) -> Response:
    """The page icon, for browsers that ask for ``/favicon.ico`` whatever the page links."""
    return FileResponse(
        ICON, media_type="image/x-icon", headers={"cache-control": "public, max-age=86400"}
    )


ROUTES = [
    Route("/", home, methods=["GET"]),
    Route("/new", new_chat, methods=["GET"]),
    Route("/favicon.ico", favicon, methods=["GET"]),
    Route("/fragments/highlight", highlight_fragment, methods=["POST"]),
    Route("/fragments/list", list_rows, methods=["GET"]),
    Route("/c/{cid}", chat, methods=["GET"]),
    Route("/c/{cid}/turns/{position:int}", turn_fragment, methods=["GET"]),
    Route("/c/{cid}/inspect/{position:int}/{iteration:int}", inspector, methods=["GET"]),
    Route("/c/{cid}/vars/{name}", variable, methods=["GET"]),
]
