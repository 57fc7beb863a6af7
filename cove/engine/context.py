"""The O(1) context: the request message and the context message of every LLM call.

Every LLM call sends three messages (DESIGN §5): ``system_prompt`` (see ``cove.engine.prompt``),
``request_message`` (the turn's request, preceded on a later turn by a bounded handover of the
previous turn) and ``context_message``::

    [iteration 3/10]
    <prior_thinking> the previous iteration's thinking </prior_thinking>
    <journal> the blocks of the last JOURNAL_ITERATIONS iterations, oldest first </journal>
    <var_index> one line per variable, most recently written first </var_index>
    [nudge] ...

Blocks are referenced as ``tT.iN.K`` (turn T, iteration N, block K, all 1-based as the model sees
them) in every turn, so a reference stays valid when the journal crosses a turn boundary.
Every value is cut to its budget in ``cove.engine.budgets`` with a visible marker that says where
the full value lives, so each message has a hard ceiling whatever came before.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from cove.engine import budgets as b
from cove.engine.prompt import system_prompt
from cove.environment.var_index import VarEntry
from cove.results import BlockResult
from cove.text import cut

__all__ = [
    "JOURNAL_ITERATIONS",
    "Handover",
    "JournalEntry",
    "context_message",
    "cut",
    "request_message",
    "system_prompt",
]

JOURNAL_ITERATIONS = b.JOURNAL_ITERATIONS

# Where the model finds what a cut marker removed.
_SEE_HISTORY = "see history()"
_SEE_VARIABLE = "store it in a variable; see history()"
_OVERFLOW_HINT = 'var_history("name") or shape(name) shows any variable'
_OMITTED_RESERVE = 120  # room kept in the journal for the "earlier blocks" line


@dataclass(frozen=True)
class JournalEntry:
    """One block as the journal shows it.

    Attributes:
        ref: The block's reference, ``tT.iN.K``, e.g. ``t2.i3.1``.
        block: The block's result.
    """

    ref: str
    block: BlockResult


@dataclass(frozen=True)
class Handover:
    """What a later turn's first iteration sees of the previous turn."""

    request: str
    answer: str | None
    thinking: str | None


def request_message(
    request: str, handover: Handover | None, attachments: Sequence[tuple[str, int]] = ()
) -> str:
    """The second message: the turn's request, with the previous turn's handover when given.

    Args:
        request: The user's request of this turn (cut to ``REQUEST_CHARS``; the sandbox keeps
            the full text as ``REQUEST``).
        handover: The previous turn, passed at the first iteration of a later turn.
        attachments: ``(file name, size in bytes)`` of the files attached to this turn; they
            are announced so the model knows to read them from the workspace.

    Returns:
        Text of at most ``REQUEST_MESSAGE_CHARS`` characters.
    """
    shown = cut(request, b.REQUEST_CHARS, "the full request is in REQUEST", keep_tail=True)
    files = attachments_note(attachments)
    if handover is None:
        return f"{shown}\n\n{files}" if files else shown
    answer = (
        cut(handover.answer, b.HANDOVER_ANSWER_CHARS, "the full answer is in LAST_ANSWER")
        if handover.answer is not None
        else "(the previous turn ended without an answer)"
    )
    parts = [
        "<previous_turn>",
        "<request>",
        cut(handover.request, b.HANDOVER_REQUEST_CHARS, "search() finds earlier requests"),
        "</request>",
        "<answer>",
        answer,
        "</answer>",
    ]
    if handover.thinking:
        parts += [
            "<last_thinking>",
            cut(handover.thinking, b.HANDOVER_THINKING_CHARS, "see history()", keep_tail=True),
            "</last_thinking>",
        ]
    parts += ["</previous_turn>", "", "<request>", shown, "</request>"]
    if files:
        parts += ["", files]
    return "\n".join(parts)


def attachments_note(attachments: Sequence[tuple[str, int]]) -> str:
    """The ``<attachments>`` section listing the turn's files, or "" when there are none.

    At most ``ATTACHMENTS_CHARS`` characters: names are cut, and files past the budget are
    counted instead of listed (``list_files()`` shows them all).
    """
    if not attachments:
        return ""
    head = "<attachments> files attached to this request, in the workspace (read_file(name)):"
    tail = "</attachments>"
    room = b.ATTACHMENTS_CHARS - len(head) - len(tail) - 2
    lines: list[str] = []
    for index, (name, size) in enumerate(attachments):
        entry = f"- {cut(name, 120, 'list_files()')} ({size:,} bytes)"
        more = len(attachments) - index - 1
        reserve = len(f"- and {more} more: list_files()") + 1 if more else 0
        if len(entry) + 1 + reserve > room:
            lines.append(f"- and {len(attachments) - index} more: list_files()")
            break
        lines.append(entry)
        room -= len(entry) + 1
    return "\n".join([head, *lines, tail])


def context_message(
    *,
    iteration: int,
    budget: int,
    prior_thinking: str | None,
    journal: Sequence[JournalEntry],
    var_index: Sequence[VarEntry],
    nudges: Sequence[str],
    steering: Sequence[str] = (),
    var_count: int | None = None,
    image: str | None = None,
) -> str:
    """The third message: where the model stands, in at most ``CONTEXT_CHARS`` characters.

    Args:
        iteration: This iteration's number within the turn, starting at 1.
        budget: The turn's live iteration budget.
        prior_thinking: The previous iteration's thinking (None at the first iteration).
        journal: Blocks of the last ``JOURNAL_ITERATIONS`` iterations, oldest first. When they
            do not all fit, the newest win and the oldest are dropped with a note.
        var_index: Every current user variable, in any order — or only the most recently
            written ones (at least ``VAR_INDEX_ROWS``), with ``var_count`` saying how many exist.
        nudges: Hint texts, most important first; at most ``MAX_NUDGES`` are shown.
        steering: Messages the person sent while the turn ran, oldest first (shown last, so
            the model reads them right before it replies).
        var_count: How many current variables exist (default: ``len(var_index)``).
        image: The figure attached to the call (a ``BlockFigure.describe`` line and its block's
            reference), when ``model_images`` sends one: named at the end, and its
            ``IMAGE_CHARS`` taken from the journal's room.
    """
    sections = [cut(f"[iteration {iteration}/{budget}]", b.HEADER_CHARS, "")]
    if prior_thinking:
        sections.append(_prior_thinking(prior_thinking))
    sections.append(_journal(journal, b.IMAGE_CHARS if image else 0))
    sections.append(_var_index(var_index, len(var_index) if var_count is None else var_count))
    if nudges:
        sections.append(_nudges(nudges))
    if steering:
        sections.append(_steering(steering))
    if image:
        sections.append(cut(f"[attached image: {image}]", b.FIGURE_CHARS + 60, ""))
    return "\n\n".join(sections)


def _steering(notes: Sequence[str]) -> str:
    open_tag = (
        "<from_the_user>\nThe person added this while you were working; take it into account:\n"
    )
    close_tag = "\n</from_the_user>"
    room = b.STEERING_CHARS - len(open_tag) - len(close_tag)
    return open_tag + cut("\n---\n".join(n.strip() for n in notes), room, "") + close_tag


def _prior_thinking(thinking: str) -> str:
    open_tag, close_tag = "<prior_thinking>\n", "\n</prior_thinking>"
    room = b.PRIOR_THINKING_CHARS - len(open_tag) - len(close_tag)
    return open_tag + cut(thinking.strip(), room, "see history()", keep_tail=True) + close_tag


def _journal(entries: Sequence[JournalEntry], reserved: int = 0) -> str:
    open_tag, close_tag = "<journal>\n", "\n</journal>"
    if not entries:
        return open_tag + "(no blocks yet)" + close_tag
    room = b.JOURNAL_CHARS - len(open_tag) - len(close_tag) - _OMITTED_RESERVE - reserved
    shown: list[str] = []
    used = 0
    # Newest first, so the blocks the model just wrote always get the space.
    for entry in reversed(entries):
        text = _entry(entry, compact=False)
        if used + len(text) + 1 > room:
            text = _entry(entry, compact=True)
            if used + len(text) + 1 > room:
                break
        shown.append(text)
        used += len(text) + 1
    omitted = len(entries) - len(shown)
    lines = list(reversed(shown))
    if omitted:
        noun = "block is" if omitted == 1 else "blocks are"
        lines.insert(0, f"… {omitted} earlier {noun} not shown; history() returns them")
    return open_tag + "\n".join(lines) + close_tag


def _entry(entry: JournalEntry, *, compact: bool) -> str:
    block = entry.block
    limits = (
        (b.COMPACT_CODE_CHARS, b.COMPACT_RESULT_CHARS, b.COMPACT_STDOUT_CHARS)
        if compact
        else (b.BLOCK_CODE_CHARS, b.BLOCK_RESULT_CHARS, b.BLOCK_STDOUT_CHARS)
    )
    stderr_limit = b.COMPACT_STDERR_CHARS if compact else b.BLOCK_STDERR_CHARS
    error_limit = b.COMPACT_ERROR_CHARS if compact else b.BLOCK_ERROR_CHARS
    if block.timed_out:
        status = f"timed out after {block.duration_ms:,.0f} ms"
    else:
        status = "ok" if block.ok else "failed"
        if block.duration_ms >= b.SLOW_BLOCK_MS:
            status += f" (slow: {block.duration_ms:,.0f} ms)"
    ref = cut(entry.ref, b.BLOCK_REF_CHARS, "")
    code = cut(block.code.strip("\n"), limits[0], _SEE_HISTORY, keep_tail=True)
    lines = [f"[{ref}] {status}", "```python", code, "```"]
    if block.result_preview is not None:
        lines.append(_field("=>", cut(block.result_preview, limits[1], _SEE_VARIABLE)))
    if block.stdout:
        stdout = cut(block.stdout.rstrip("\n"), limits[2], _SEE_VARIABLE, keep_tail=True)
        lines.append(_field("stdout:", stdout))
    if block.stderr:
        stderr = cut(block.stderr.rstrip("\n"), stderr_limit, _SEE_HISTORY, keep_tail=True)
        lines.append(_field("stderr:", stderr))
    for figure in block.figures[: b.BLOCK_FIGURES]:
        lines.append(cut(figure.describe(), b.FIGURE_CHARS, ""))
    if len(block.figures) > b.BLOCK_FIGURES:
        lines.append(f"… {len(block.figures) - b.BLOCK_FIGURES} more figures")
    if block.error:
        lines.append(_field("error:", cut(block.error, error_limit, _SEE_HISTORY, keep_tail=True)))
    return "\n".join(lines)


def _field(label: str, text: str) -> str:
    return f"{label}\n{text}" if "\n" in text else f"{label} {text}"


def _var_index(entries: Sequence[VarEntry], total: int) -> str:
    open_tag, close_tag = "<var_index>\n", "\n</var_index>"
    if not entries:
        return open_tag + "(no variables yet)" + close_tag
    ordered = sorted(entries, key=lambda e: (-e.updated_seq, e.var.name))
    room = b.VAR_INDEX_CHARS - len(open_tag) - len(close_tag) - _OMITTED_RESERVE
    lines: list[str] = []
    used = 0
    for entry in ordered[: b.VAR_INDEX_ROWS]:
        line = _var_line(entry)
        if used + len(line) + 1 > room:
            break
        lines.append(line)
        used += len(line) + 1
    hidden = max(total, len(ordered)) - len(lines)
    if hidden:
        noun = "variable" if hidden == 1 else "variables"
        lines.append(f"… {hidden:,} more {noun}, written earlier; {_OVERFLOW_HINT}")
    return open_tag + "\n".join(lines) + close_tag


def _var_line(entry: VarEntry) -> str:
    var = entry.var
    name = cut(var.name, b.VAR_NAME_CHARS, "")
    head = f"{name} v{var.version}"
    if var.kind == "function" and var.signature:
        return f"{head} function {_one_line(var.signature, b.VAR_SIGNATURE_CHARS)}"
    type_name = cut(var.type_name, b.VAR_TYPE_CHARS, "")
    size = "" if var.size is None else f"({var.size:,} {_unit(var.type_name)})"
    line = f"{head} {type_name}{size} = {_one_line(var.preview, b.VAR_PREVIEW_CHARS)}"
    if var.kind == "opaque":
        line += " [opaque: not saved, lost if the sandbox restarts]"
    return line


def _unit(type_name: str) -> str:
    if type_name == "str":
        return "chars"
    if type_name in ("bytes", "bytearray"):
        return "bytes"
    return "items"


def _one_line(text: str, limit: int) -> str:
    # The line already shows the size, so a bare ellipsis marks the cut without eating the row.
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _nudges(nudges: Sequence[str]) -> str:
    lines = [f"[nudge] {cut(' '.join(n.split()), b.NUDGE_CHARS, '')}" for n in nudges]
    return cut("\n".join(lines[: b.MAX_NUDGES]), b.NUDGES_CHARS, "")
