"""A conversation's transcript as a document to download: Markdown or JSON.

Shared by the channels (``cove export``/``cove show``, the web's export links, the TUI), so that
every one of them hands out the same document.
"""

from __future__ import annotations

import json
import time

from cove.conversation import BlockRecord, IterationRecord, Transcript, TurnRecord
from cove.events import jsonable


def when(timestamp: float | None) -> str:
    """A timestamp as local ``YYYY-MM-DD HH:MM`` (``-`` when unknown)."""
    if timestamp is None:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(timestamp))


def to_json(transcript: Transcript) -> str:
    """The transcript as indented JSON: every record and field the conversation API returns."""
    return json.dumps(jsonable(transcript), indent=1)


def to_markdown(transcript: Transcript) -> str:
    """Render a transcript as Markdown: turns, iterations, code, results, answers."""
    conv = transcript.conversation
    lines = [f"# {conv.title or 'Untitled conversation'}", ""]
    lines.append(f"- id: `{conv.id}`")
    lines.append(f"- channel: {conv.channel}; created {when(conv.created_at)}")
    if conv.parent_id:
        lines.append(f"- forked from `{conv.parent_id}` at turn {conv.fork_turn}")
    lines.append("")
    for turn in transcript.turns:
        lines += _turn_lines(turn)
    if transcript.var_versions:
        lines += ["## Variables", "", "| name | version | type | preview |", "|---|---|---|---|"]
        for v in transcript.var_versions:
            preview = v.preview.replace("|", "\\|").replace("\n", " ")[:80]
            lines.append(f"| {v.name} | {v.version} | {v.type_name} | `{preview}` |")
        lines.append("")
    return "\n".join(lines)


def _turn_lines(turn: TurnRecord) -> list[str]:
    lines = [f"## Turn {turn.position} — {turn.status}", "", f"> {turn.request}", ""]
    for it in turn.iterations:
        lines += _iteration_lines(it)
    if turn.answer:
        lines += ["**Answer:**", "", turn.answer, ""]
    if turn.error:
        lines += [f"**Error:** {turn.error}", ""]
    lines += [
        f"<sub>{turn.tokens_in:,} + {turn.tokens_out:,} tokens · ${turn.cost_usd:.4f}</sub>",
        "",
    ]
    return lines


def _iteration_lines(it: IterationRecord) -> list[str]:
    lines = [f"### Iteration {it.position + 1} ({it.status})", ""]
    if it.thinking:
        lines += [f"*{it.thinking}*", ""]
    if it.parse_error:
        lines += [f"**Unreadable reply:** {it.parse_error}", ""]
    for block in it.blocks:
        lines += _block_lines(block)
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
    return lines


def _block_lines(block: BlockRecord) -> list[str]:
    lines = ["```python", block.code, "```", ""]
    if block.stdout:
        lines += ["```text", block.stdout.rstrip(), "```", ""]
    if block.ok and block.result_preview is not None:
        lines += [f"→ `{block.result_preview}`", ""]
    elif not block.ok:
        lines += [f"**Error:** {block.error}", ""]
    return lines
