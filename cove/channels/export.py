"""A conversation's transcript as a document to download: Markdown or JSON.

Shared by the channels (``cove export``/``cove show``, the web's export links, the TUI), so that
every one of them hands out the same document.

JSON numbering is by position and starts at 1 everywhere: a turn is ``position`` 1, 2, … in its
conversation (a fork's first own turn continues its parent's count), an iteration is
``position`` 1, 2, … in its turn, a block ``position`` 1, 2, … in its iteration; a variable
version names where it was written by ``turn_position``, ``iteration_position`` and
``block_position``, counted the same way. Database row ids (``id``, ``turn_id``,
``iteration_id``) are not part of the output. A cost nobody knows (the model had no price) is
``null`` beside ``"cost_known": false``, never ``0.0``.

Figures: the Markdown describes each (size, title, axis labels) with its digest; given
``FigureLinks`` it shows each as an image of a file beside the document (``cove export -o``,
the TUI's export: ``channels/figures.py`` writes them) or links it (the web's export: the
figure's URL on the server).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from cove.conversation import (
    ApprovalRecord,
    BlockRecord,
    IterationRecord,
    Transcript,
    TurnRecord,
    VarVersionRecord,
)
from cove.events import jsonable
from cove.results import BlockFigure
from cove.text import clean, json_escaped


def when(timestamp: float | None) -> str:
    """A timestamp as local ``YYYY-MM-DD HH:MM`` (``-`` when unknown)."""
    if timestamp is None:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(timestamp))


def to_json(transcript: Transcript) -> str:
    """The transcript as indented JSON, numbered by position from 1 (``transcript_json``), with
    no raw control character in the text (``json_escaped``)."""
    return json_escaped(json.dumps(transcript_json(transcript), indent=1))


def to_markdown(transcript: Transcript, figures: FigureLinks | None = None) -> str:
    """Render a transcript as Markdown: turns, iterations, code, results, answers.

    Control characters anywhere in it (the model's or the sandbox's escape sequences) are made
    visible (``clean``): the document is safe to print on a terminal.

    Args:
        transcript: What to render.
        figures: Where each figure can be had (a file written beside the document: shown as
            an image; a URL: a link). None: each figure is described with its digest.
    """
    return clean(_markdown(transcript, figures))


@dataclass(frozen=True)
class FigureLinks:
    """Where a document's figures are: ``target(ref, figure)`` gives each one's address (a
    relative file path or a URL); ``embed`` shows them as images, else as links."""

    target: Callable[[tuple[int, int, int], BlockFigure], str]
    embed: bool = True

    def line(self, ref: tuple[int, int, int], figure: BlockFigure) -> str:
        """The figure's Markdown line."""
        text = figure.describe().replace("\\", "\\\\").replace("[", "\\[").replace("]", "\\]")
        address = quote(self.target(ref, figure), safe="/:?=&#")
        return f"{'!' if self.embed else ''}[{text}]({address})"


def _markdown(transcript: Transcript, figures: FigureLinks | None = None) -> str:
    conv = transcript.conversation
    lines = [f"# {conv.title or 'Untitled conversation'}", ""]
    lines.append(f"- id: `{conv.id}`")
    lines.append(f"- channel: {conv.channel}; created {when(conv.created_at)}")
    if conv.parent_id:
        lines.append(f"- forked from `{conv.parent_id}` at turn {conv.fork_turn}")
    lines.append("")
    for turn in transcript.turns:
        lines += _turn_lines(turn, figures)
    if transcript.var_versions:
        lines += ["## Variables", "", "| name | version | type | preview |", "|---|---|---|---|"]
        for v in transcript.var_versions:
            preview = v.preview.replace("|", "\\|").replace("\n", " ")[:80]
            lines.append(f"| {v.name} | {v.version} | {v.type_name} | `{preview}` |")
        lines.append("")
    return "\n".join(lines)


def _turn_lines(turn: TurnRecord, figures: FigureLinks | None) -> list[str]:
    lines = [f"## Turn {turn.position} — {turn.status}", ""]
    if turn.model is not None:
        lines += [f"> {turn.request}", ""]
    elif turn.iterations:  # its request is the code of its one block, shown below
        lines += ["*Code run with no model:*", ""]
    else:
        lines += ["*Code run with no model (stopped before it ran):*", "", "```python"]
        lines += [turn.request, "```", ""]
    for it in turn.iterations:
        lines += _iteration_lines(it, turn.position, figures)
    if turn.answer:
        lines += ["**Answer:**", "", turn.answer, ""]
    if turn.error:
        lines += [f"**Error:** {turn.error}", ""]
    cost = f"${turn.usage.cost_usd:.4f}" if turn.cost_known else "cost unknown"
    lines += [
        f"<sub>{turn.usage.tokens_in:,} + {turn.usage.tokens_out:,} tokens · {cost}</sub>",
        "",
    ]
    return lines


def _iteration_lines(it: IterationRecord, turn: int, figures: FigureLinks | None) -> list[str]:
    lines = [f"### Iteration {it.position + 1} ({it.status})", ""]
    if it.thinking:
        lines += [f"*{it.thinking}*", ""]
    if it.parse_error:
        lines += [f"**Unreadable reply:** {it.parse_error}", ""]
    total = max(len(it.planned_blocks), len(it.blocks))
    for block in it.blocks:
        # Labelled, so consecutive blocks never run together into one listing.
        lines += [f"Block {block.position + 1} of {total}:", ""]
        lines += _block_lines(block, (turn, it.position + 1, block.position + 1), figures)
    if it.running_block is not None:
        lines += [
            f"**Block {it.running_block + 1} of {len(it.planned_blocks)} was running "
            "when the turn stopped:**",
            "",
            "```python",
            it.planned_blocks[it.running_block],
            "```",
            "",
        ]
    if it.refusal:
        lines += [f"**Refused:** {it.refusal}", ""]
    return lines


def _block_lines(
    block: BlockRecord, ref: tuple[int, int, int], figures: FigureLinks | None
) -> list[str]:
    lines = ["```python", block.code, "```", ""]
    if block.stdout:
        lines += ["```text", block.stdout.rstrip(), "```", ""]
    if block.ok and block.result_preview is not None:
        if "\n" in block.result_preview:  # a table (a DataFrame's own text)
            lines += ["→", "", "```text", block.result_preview, "```", ""]
        else:
            lines += [f"→ `{block.result_preview}`", ""]
    elif not block.ok:
        lines += [f"**Error:** {block.error}", ""]
    for figure in block.figures:
        if figures is None:
            lines += [f"- {figure.describe()} (PNG sha256 `{figure.digest[:16]}`)"]
        else:
            lines += [f"- {figures.line(ref, figure)}"]
    if block.figures:
        lines.append("")
    return lines


ROW_IDS = ("id", "turn_id", "iteration_id")


def transcript_json(transcript: Transcript) -> dict[str, Any]:
    """A transcript as JSON, numbered by position from 1."""
    data: dict[str, Any] = jsonable(transcript)
    data["turns"] = [_turn(turn) for turn in data["turns"]]
    data["var_versions"] = [_version(v) for v in data["var_versions"]]
    return data


def approvals_json(approvals: Sequence[ApprovalRecord]) -> list[dict[str, Any]]:
    """Decisions on extension calls as JSON: where each was made counted from 1 (``turn``,
    ``iteration``, ``block``, ``call``: its order among the block's extension calls)."""
    return [
        {
            "turn": a.turn_position,
            "iteration": a.iteration_position + 1,
            "block": a.block_position + 1,
            "call": a.seq + 1,
            "extension": a.extension,
            "function": a.function,
            "effect": a.effect,
            "arguments": a.arguments,
            "approved": a.approved,
            "reason": a.reason,
            "why": a.why,
            "remember": a.remember,
            "at": a.at,
        }
        for a in approvals
    ]


def versions_json(versions: Sequence[VarVersionRecord]) -> list[dict[str, Any]]:
    """Variable versions as JSON, with where each was written counted from 1."""
    return [_version(jsonable(v)) for v in versions]


def _version(version: dict[str, Any]) -> dict[str, Any]:
    return {
        **version,
        "iteration_position": version["iteration_position"] + 1,
        "block_position": version["block_position"] + 1,
    }


def _turn(turn: dict[str, Any]) -> dict[str, Any]:
    out = _without_row_ids(turn)
    known = turn.get("cost_known", True)
    out["iterations"] = [_iteration(it, known) for it in turn.get("iterations", [])]
    if not known:
        out["cost_usd"] = None  # unknown, not free
    return out


def _iteration(it: dict[str, Any], cost_known: bool) -> dict[str, Any]:
    out = _without_row_ids(it)
    out["position"] = it["position"] + 1
    out["blocks"] = [_counted(b) for b in it.get("blocks", [])]
    out["subqueries"] = [_counted(s) for s in it.get("subqueries", [])]
    if not cost_known:
        out["cost_usd"] = None
        for sub in out["subqueries"]:
            sub["cost_usd"] = None
    return out


def _counted(item: dict[str, Any]) -> dict[str, Any]:
    out = _without_row_ids(item)
    for key in ("position", "block_position"):
        if isinstance(out.get(key), int):
            out[key] += 1
    return out


def _without_row_ids(item: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in item.items() if k not in ROW_IDS}
