"""The ``core`` extension: the conversation's own history, its variables' versions, the turn.

Everything older than the context message is one call away: ``var_history``, ``var_diff``,
``restore_var``, ``history``, ``search``. ``forget`` deletes variables once the running block has
finished (the environment runs the deletion in the worker and records it as versions).
"""

from __future__ import annotations

import asyncio
import difflib
import keyword
import pprint
from typing import Any

from cove import codec
from cove.codec.preview import text_of
from cove.codec.shapes import Definition, Opaque
from cove.environment.extensions import diff
from cove.environment.extensions.base import (
    CallContext,
    Extension,
    ExtensionConstant,
    ExtensionFunction,
)
from cove.environment.extensions.shape import describe_shape
from cove.errors import NotFound
from cove.persistence.records import VarVersionRecord
from cove.persistence.store import Store

MAX_HISTORY = 50
MAX_DIFF_LINES = 2_000
MAX_DIFF_LINE_CHARS = 2_000
MAX_TITLE_CHARS = 100

_PROMPT = """
Variables are versioned: every assignment or mutation that changes a value makes a new version.
restore_var returns a stored value (functions and classes come back as live definitions): assign
it, e.g. `x = restore_var("x", 2)`. Blocks of the running iteration are not in history() yet.
"""


def _check_name(function: str, name: Any) -> str:
    if not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(name):
        raise ValueError(f"{function}(): {name!r} is not a variable name")
    return name


def _check_int(function: str, label: str, value: Any, low: int, high: int | None = None) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{function}(): {label} must be an int, not {type(value).__name__}")
    if value < low or (high is not None and value > high):
        bound = f"between {low} and {high}" if high is not None else f"at least {low}"
        raise ValueError(f"{function}(): {label} must be {bound}, got {value}")
    return value


async def _version(ctx: CallContext, function: str, name: str, version: Any) -> VarVersionRecord:
    _check_int(function, "version", version, 1)
    try:
        return await ctx.store.var_version(ctx.conversation_id, name, version)
    except NotFound:
        raise LookupError(_no_version(function, name, version)) from None


def _no_version(function: str, name: str, version: int) -> str:
    return f"{function}(): variable {name!r} has no version {version}"


async def var_history(ctx: CallContext, name: str) -> list[dict[str, Any]]:
    """Every stored version of a variable, oldest first.

    Each item: version, kind (value|function|opaque|deleted), type, preview, turn, iteration, block.
    """
    _check_name("var_history", name)
    try:
        records = await ctx.store.var_history(ctx.conversation_id, name)
    except NotFound:
        records = []
    if not records:
        raise LookupError(f"var_history(): no variable named {name!r} in this conversation")
    return [
        {
            "version": r.version,
            "kind": r.kind,
            "type": r.type_name,
            "preview": r.preview,
            "turn": r.turn_position,
            "iteration": r.iteration_position,
            "block": r.block_position,
            "thinned": r.thinned,
        }
        for r in records
    ]


def _value_lines(record: VarVersionRecord, chunks: dict[str, bytes]) -> list[str]:
    if record.kind == "deleted" or record.encoded is None:
        return [f"<{record.kind} {record.type_name}: {record.preview}>"]
    value = codec.decode(record.encoded, chunks=chunks.__getitem__)
    if isinstance(value, Opaque):
        return [f"<opaque {value.type_name}: {value.repr}>"]
    if isinstance(value, Definition):
        return value.source.splitlines()
    if isinstance(value, str):
        return value.splitlines()
    if codec.is_data(value):
        return data_lines(value, MAX_DIFF_LINES + 1)
    try:
        return pprint.pformat(value, width=88, sort_dicts=False).splitlines()
    except ValueError:  # an int past the digit limit of str(), somewhere inside
        return text_of(value).splitlines()


def data_lines(value: Any, limit: int) -> list[str]:
    """An array or a pandas value as lines to diff: one row per line, every row (up to
    ``limit``), not the shortened table pandas and numpy print."""
    if hasattr(value, "to_csv"):  # a DataFrame or a Series
        return str(value.head(limit).to_csv()).splitlines()
    if value.ndim == 0:
        return [repr(value.item())]
    return [repr(row) for row in value[:limit].tolist()]


async def var_diff(ctx: CallContext, name: str, v1: int, v2: int) -> str:
    """A unified diff between two versions of a variable (values pretty-printed, one per line).

    Two versions of a long list or dict are compared run by run: only the runs that differ are
    read and shown (``diff.py``).
    """
    _check_name("var_diff", name)
    for version in (v1, v2):
        _check_int("var_diff", "version", version, 1)
    try:
        return await version_diff(ctx.store, ctx.conversation_id, name, v1, v2)
    except NotFound as exc:
        raise LookupError(_no_version("var_diff", name, int(exc.key))) from None


async def version_diff(store: Store, conversation_id: str, name: str, v1: int, v2: int) -> str:
    """The text of ``var_diff``: a unified diff between two versions of a variable.

    Raises:
        NotFound: The conversation has no such version (``key`` is the version number).
    """
    old, new = [await _stored(store, conversation_id, name, v) for v in (v1, v2)]
    if old.digest is not None and old.digest == new.digest:
        return f"{name} v{v1} and v{v2} are equal"
    for record in (old, new):
        if record.thinned:
            return (
                f"{name} v{record.version} was thinned to keep the conversation's history "
                f"budget: only its preview was kept ({record.preview})"
            )
    runs = [diff.items_of(r.encoded) if r.encoded else None for r in (old, new)]
    if runs[0] is not None and runs[1] is not None:
        lines, cut = await diff.runs_diff(
            runs[0], runs[1], (f"{name} v{v1}", f"{name} v{v2}"),
            store.chunks, store.value_chunks, MAX_DIFF_LINES,
        )  # fmt: skip
        text = "\n".join(_bounded(lines))
        return text + (f"\n[diff limited to {MAX_DIFF_LINES:,} lines]" if cut else "")
    chunks = await store.value_chunks([r.encoded for r in (old, new) if r.encoded])
    if sum(map(len, chunks.values())) > diff.WHOLE_LIMIT:
        return (
            f"{name} v{v1} and v{v2} differ; they are too large to diff whole "
            f"(over {diff.WHOLE_LIMIT // 1_000_000} MB): compare parts of them instead"
        )
    # Decoding, pretty-printing and diffing are CPU work: off the event loop.
    return await asyncio.to_thread(_diff, name, v1, v2, old, new, chunks)


async def _stored(store: Store, conversation_id: str, name: str, version: int) -> VarVersionRecord:
    try:
        return await store.var_version(conversation_id, name, version)
    except NotFound as exc:
        message = f"variable {name!r} has no version {version}"
        raise NotFound("version", str(version), message) from exc


async def version_text(store: Store, record: VarVersionRecord) -> str:
    """A stored version's value in full as text: pretty-printed, a definition's source, a
    table's rows; a deleted, opaque or thinned version is its preview.

    A value over ``diff.WHOLE_LIMIT`` bytes of chunks is not read: the text says so.
    """
    if record.thinned:
        return f"<{record.type_name}, thinned to keep the history budget: {record.preview}>"
    if record.kind == "deleted" or record.encoded is None:
        return "\n".join(_value_lines(record, {}))
    chunks = await store.value_chunks([record.encoded])
    if sum(map(len, chunks.values())) > diff.WHOLE_LIMIT:
        return (
            f"<{record.type_name}: too large to show whole "
            f"(over {diff.WHOLE_LIMIT // 1_000_000} MB): {record.preview}>"
        )
    # Decoding and pretty-printing are CPU work: off the event loop.
    return "\n".join(await asyncio.to_thread(_value_lines, record, chunks))


def _diff(
    name: str,
    v1: int,
    v2: int,
    old: VarVersionRecord,
    new: VarVersionRecord,
    chunks: dict[str, bytes],
) -> str:
    """The diff text; its input is cut to ``MAX_DIFF_LINES`` lines of ``MAX_DIFF_LINE_CHARS``
    first, so the quadratic part of difflib has a fixed ceiling whatever the values are."""
    before, after = _value_lines(old, chunks), _value_lines(new, chunks)
    cut = len(before) > MAX_DIFF_LINES or len(after) > MAX_DIFF_LINES
    before, after = _bounded(before), _bounded(after)
    lines = difflib.unified_diff(before, after, f"{name} v{v1}", f"{name} v{v2}", lineterm="")
    text = "\n".join(lines)
    if cut:
        text += f"\n[diff limited to the first {MAX_DIFF_LINES:,} lines of each version]"
    return text or f"{name} v{v1} and v{v2} are equal"


def _bounded(lines: list[str]) -> list[str]:
    return [
        line if len(line) <= MAX_DIFF_LINE_CHARS else line[:MAX_DIFF_LINE_CHARS] + "…"
        for line in lines[:MAX_DIFF_LINES]
    ]


async def restore_var(ctx: CallContext, name: str, version: int) -> Any:
    """Return the value a variable had at ``version``; assign it: ``x = restore_var("x", 2)``.

    Functions and classes come back as definitions the sandbox rebuilds from their source.
    """
    _check_name("restore_var", name)
    record = await _version(ctx, "restore_var", name, version)
    if record.kind == "deleted":
        raise ValueError(f"restore_var(): version {version} of {name!r} is its deletion")
    if record.thinned:
        raise ValueError(
            f"restore_var(): version {version} of {name!r} was thinned to keep the "
            "conversation's history budget; only its preview was kept"
        )
    if record.kind == "opaque" or not record.encoded or not codec.is_restorable(record.encoded):
        raise ValueError(
            f"restore_var(): version {version} of {name!r} ({record.type_name}) was not "
            "restorable; only its preview was kept"
        )
    chunks = await ctx.store.value_chunks([record.encoded])
    return codec.decode(record.encoded, chunks=chunks.__getitem__)


def forget(ctx: CallContext, *names: str) -> None:
    """Delete these variables once the current block has finished (recorded as deletions)."""
    checked = [_check_name("forget", name) for name in names]
    ctx.environment.forget_after_block(checked)


async def history(ctx: CallContext, n: int = 5) -> list[dict[str, Any]]:
    """The last ``n`` recorded blocks, oldest first: ref, code, ok, result, error, stdout."""
    _check_int("history", "n", n, 1, MAX_HISTORY)
    rows = await ctx.store.recent_blocks(ctx.conversation_id, n)
    ordered = sorted(rows, key=lambda row: (row[0], row[1], row[2].position))
    return [
        {
            "ref": f"t{turn}.i{iteration + 1}.{block.position + 1}",
            "code": block.code,
            "ok": block.ok,
            "result": block.result_preview,
            "error": block.error,
            "stdout": block.stdout,
        }
        for turn, iteration, block in ordered
    ]


async def search(ctx: CallContext, text: str) -> list[dict[str, Any]]:
    """Full-text search over this conversation's requests, answers and code."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError("search(): text must be a non-empty str")
    hits = await ctx.store.search(text, conversation_id=ctx.conversation_id, limit=20)
    return [{"turn": h.turn_position, "kind": h.kind, "snippet": h.snippet} for h in hits]


async def set_title(ctx: CallContext, text: str) -> None:
    """Set the conversation's title (3-7 words)."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError("set_title(): text must be a non-empty str")
    title = " ".join(text.split())[:MAX_TITLE_CHARS]
    if ctx.hooks is not None:
        await ctx.hooks.set_title(title)
    else:
        await ctx.store.set_title(ctx.conversation_id, title)


def shape(ctx: CallContext, value: Any) -> str:
    """A compact structural description: type, length, keys or columns, element types."""
    return describe_shape(value)


async def request_more_iterations(ctx: CallContext, n: int) -> int:
    """Ask for ``n`` more iterations in this turn; returns the new budget."""
    _check_int("request_more_iterations", "n", n, 1)
    return await ctx.turn("request_more_iterations").request_more_iterations(n)


def _request(ctx: CallContext) -> str | None:
    return ctx.hooks.request if ctx.hooks is not None else None


def _last_answer(ctx: CallContext) -> str | None:
    return ctx.hooks.last_answer if ctx.hooks is not None else None


def _fn(name: str, impl: Any, signature: str, *examples: str) -> ExtensionFunction:
    return ExtensionFunction(
        name=name,
        implementation=impl,
        doc=impl.__doc__ or "",
        signature=signature,
        examples=examples,
    )


CORE = Extension(
    name="core",
    doc="Your conversation's history, its variables' versions and the running turn.",
    prompt=_PROMPT,
    functions=(
        _fn("var_history", var_history, "var_history(name) -> list[dict]", 'var_history("df")'),
        _fn("var_diff", var_diff, "var_diff(name, v1, v2) -> str", 'print(var_diff("cfg", 1, 3))'),
        _fn(
            "restore_var",
            restore_var,
            "restore_var(name, version) -> value",
            'prices = restore_var("prices", 2)',
        ),
        _fn("forget", forget, "forget(*names) -> None", 'forget("tmp", "scratch")'),
        _fn("history", history, "history(n=5) -> list[dict]", "history(10)"),
        _fn("search", search, "search(text) -> list[dict]", 'search("invoice total")'),
        _fn("set_title", set_title, "set_title(text) -> None", 'set_title("Quarterly sales")'),
        _fn("shape", shape, "shape(value) -> str", "shape(rows)"),
        _fn(
            "request_more_iterations",
            request_more_iterations,
            "request_more_iterations(n) -> int",
            "request_more_iterations(5)",
        ),
    ),
    constants=(
        ExtensionConstant("REQUEST", "this turn's request (str)", compute=_request),
        ExtensionConstant(
            "LAST_ANSWER", "the previous turn's answer (str or None)", compute=_last_answer
        ),
    ),
)
