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
from cove.channels.web.branches import Branches, branches
from cove.channels.web.errors import TooLarge
from cove.channels.web.listing import list_context
from cove.channels.web.render import code_spans, diff
from cove.channels.web.state import web
from cove.channels.web.timeline import notes_by_iteration, page_timeline, resume_after
from cove.conversation import (
    Conversations,
    Transcript,
    TurnRecord,
    VarVersionRecord,
)
from cove.errors import NotFound

MAX_HIGHLIGHT_BYTES = 200_000
ICON = Path(__file__).parent / "static" / "favicon.ico"


def _render(request: Request, name: str, context: dict[str, Any]) -> Response:
    response: Response = request.app.state.templates.TemplateResponse(request, name, context)
    return response


async def home(request: Request) -> Response:
    """The chat with no conversation yet, beside the sidebar: the first message creates it."""
    return _render(request, "chat.html", await _chat_context(request, None))


async def conversations_page(request: Request) -> Response:
    """All conversations as a table, with their actions and search hits."""
    return _render(request, "list.html", await list_context(request))


async def list_rows(request: Request) -> Response:
    return _render(request, "_rows.html", await list_context(request))


def changes_by_iteration(transcript: Transcript) -> dict[tuple[int, int], list[VarVersionRecord]]:
    """The variable versions each iteration wrote, keyed by (turn position, iteration position)."""
    changes: dict[tuple[int, int], list[VarVersionRecord]] = {}
    for version in transcript.var_versions:
        key = (version.turn_position, version.iteration_position)
        changes.setdefault(key, []).append(version)
    return changes


def requests(transcript: Transcript) -> dict[int, str]:
    """Turn position → request, of the turns a transcript holds."""
    return {turn.position: turn.request for turn in transcript.turns}


async def _chat_context(request: Request, transcript: Transcript | None) -> dict[str, Any]:
    """The chat page's context: a conversation's turns and variables (none for a new chat).

    The sidebar's entries come from their fragment once the page is shown: the chat loads as
    fast as without them.
    """
    context: dict[str, Any] = {"query": request.query_params.get("q", "").strip()}
    context.update(
        conv=None,
        turns=[],
        after=0,
        variables=[],
        changes={},
        notes={},
        branches=Branches(),
        upload_limit=web(request).upload_limit,
    )
    if transcript is None:
        return context
    events = page_timeline(transcript)
    turns, after = resume_after(transcript, events)
    convs = web(request).convs
    current = await convs.variables(transcript.conversation.id)
    context.update(
        conv=transcript.conversation,
        turns=turns,
        after=after,
        variables=[v for _, v in sorted(current.items()) if v.kind != "deleted"],
        changes=changes_by_iteration(transcript),
        notes=notes_by_iteration(events),
        branches=await branches(convs, transcript.conversation, requests(transcript)),
    )
    return context


async def chat(request: Request) -> Response:
    transcript = await web(request).convs.inspect(request.path_params["cid"])
    return _render(request, "chat.html", await _chat_context(request, transcript))


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
        "branches": await branches(convs, transcript.conversation, requests(transcript)),
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
    decided = await convs.approvals(transcript.conversation.id, turn.position)
    context = {
        "conv": transcript.conversation,
        "turn": turn,
        "it": iteration,
        "system": system,
        "cost": cost,
        "before": before,
        "after": after,
        "figures": [found for found in turn_figures(turn) if found[0][1] == number],
        "approvals": [a for a in decided if a.iteration_position == iteration.position],
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
    Route("/new", home, methods=["GET"]),
    Route("/conversations", conversations_page, methods=["GET"]),
    Route("/favicon.ico", favicon, methods=["GET"]),
    Route("/fragments/highlight", highlight_fragment, methods=["POST"]),
    Route("/fragments/list", list_rows, methods=["GET"]),
    Route("/c/{cid}", chat, methods=["GET"]),
    Route("/c/{cid}/turns/{position:int}", turn_fragment, methods=["GET"]),
    Route("/c/{cid}/inspect/{position:int}/{iteration:int}", inspector, methods=["GET"]),
    Route("/c/{cid}/vars/{name}", variable, methods=["GET"]),
]
