"""What the two turn tools give back: text for the agent to read, the same as structured
content, and a block's figures as images.

The text is short and complete (the conversation and turn, output, value or error, the
variables the turn changed); long output is cut with a marker naming the resource that holds
the full transcript. The structured content carries the same facts as JSON.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import Any

from mcp.types import CallToolResult, ContentBlock, ImageContent, TextContent

from cove.channels.mcp import uris
from cove.channels.mcp.follow import Seen
from cove.results import BlockFigure, VarVersion
from cove.text import cut

#: The longest stdout, stderr, value or answer a result shows (the transcript has all of it).
SHOWN_CHARS = 20_000
#: At most this many figures, of at most this many PNG bytes in all, come back as images; the
#: others are named by their resource URI.
MAX_IMAGES = 8
MAX_IMAGE_BYTES = 8 * 1024 * 1024


def shown(text: str, conversation_id: str) -> str:
    """``text`` cut to ``SHOWN_CHARS``, the marker naming where all of it is."""
    return cut(text, SHOWN_CHARS, f"all of it is in {uris.conversation(conversation_id)}")


def versions_json(changes: Sequence[VarVersion]) -> list[dict[str, Any]]:
    """The variable versions a turn wrote, last version of each name."""
    latest = {change.name: change for change in changes}
    return [
        {
            "name": v.name,
            "version": v.version,
            "kind": v.kind,
            "type": v.type_name,
            "preview": v.preview,
        }
        for v in latest.values()
    ]


def figures_json(conversation_id: str, figures: Sequence[BlockFigure]) -> list[dict[str, Any]]:
    """The figures as JSON, each with the URI of its PNG."""
    return [
        {
            "digest": f.digest,
            "width": f.width,
            "height": f.height,
            "title": f.title,
            "description": f.describe(),
            "uri": uris.figure(conversation_id, f.digest),
        }
        for f in figures
    ]


def run_result(seen: Seen, images: Sequence[ImageContent]) -> CallToolResult:
    """The result of ``run_python``: the block's output, value or error, and what changed."""
    end, cid = seen.end, seen.conversation_id
    block = seen.blocks[-1] if seen.blocks else None
    data: dict[str, Any] = {
        "conversation_id": cid,
        "turn": seen.position,
        "status": end.status,
        "ok": end.status == "done",
        "stdout": shown(block.stdout, cid) if block else "",
        "stderr": shown(block.stderr, cid) if block else "",
        "value": shown(block.result_preview, cid) if block and block.result_preview else None,
        "error": end.error,
        "timed_out": bool(block and block.timed_out),
        "duration_ms": round(block.duration_ms, 1) if block else 0.0,
        "variables": versions_json(seen.changes),
        "figures": figures_json(cid, block.figures if block else ()),
    }
    text = "\n".join(_head(seen, end.status) + _block_lines(data))
    return _result(text, data, images, is_error=end.status != "done")


def ask_result(seen: Seen, images: Sequence[ImageContent]) -> CallToolResult:
    """The result of ``ask_cove``: the answer (or why there is none) and what the turn did."""
    end, cid = seen.end, seen.conversation_id
    figures = [f for block in seen.blocks for f in block.figures]
    data: dict[str, Any] = {
        "conversation_id": cid,
        "turn": seen.position,
        "status": end.status,
        "answer": shown(end.answer, cid) if end.answer else None,
        "error": end.error,
        "iterations": end.iterations,
        "blocks": len(seen.blocks),
        "tokens_in": end.usage.tokens_in,
        "tokens_out": end.usage.tokens_out,
        "cost_usd": end.usage.cost_usd if end.cost_known else None,
        "variables": versions_json(seen.changes),
        "figures": figures_json(cid, figures),
    }
    lines = _head(seen, end.status)
    if data["answer"] is not None:
        lines += ["", data["answer"], ""]
    if end.error:
        lines.append(f"error: {end.error}")
    lines.append(f"{end.iterations} iteration(s), {len(seen.blocks)} block(s) run")
    lines += _changes_lines(data)
    return _result("\n".join(lines), data, images, is_error=end.status != "done")


def figure_image(png: bytes) -> ImageContent:
    """One figure as image content."""
    return ImageContent(data=base64.b64encode(png).decode("ascii"), mime_type="image/png")


def _head(seen: Seen, status: str) -> list[str]:
    return [f"conversation {seen.conversation_id} · turn {seen.position} · {status}"]


def _block_lines(data: dict[str, Any]) -> list[str]:
    lines: list[str] = []
    for name in ("stdout", "stderr"):
        if data[name]:
            lines += [f"{name}:", data[name].rstrip("\n")]
    if data["value"] is not None:
        lines.append(f"value: {data['value']}")
    if data["error"]:
        lines.append(f"error: {data['error']}")
    return lines + _changes_lines(data)


def _changes_lines(data: dict[str, Any]) -> list[str]:
    lines: list[str] = []
    if data["variables"]:
        changed = [
            f"{v['name']} v{v['version']} ({v['type']}) = {v['preview']}" for v in data["variables"]
        ]
        lines += ["variables changed:", *(f"  {line}" for line in changed)]
    for figure in data["figures"]:
        lines.append(f"{figure['description']} · {figure['uri']}")
    return lines


def _result(
    text: str, data: dict[str, Any], images: Sequence[ImageContent], *, is_error: bool
) -> CallToolResult:
    content: list[ContentBlock] = [TextContent(text=text), *images]
    return CallToolResult(content=content, structured_content=data, is_error=is_error)
