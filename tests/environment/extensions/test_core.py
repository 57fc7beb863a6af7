"""The core extension's history helpers against a real store (no sandbox needed here)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from cove import codec
from cove.codec.shapes import Definition
from cove.config import Settings
from cove.environment.extensions import CallContext, ExtensionRegistry, builtin_extensions
from cove.persistence.records import IterationWrite
from cove.persistence.store import Store
from cove.results import BlockResult, TurnOutcome, VarVersion


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    async with Store.open(tmp_path / "cove.db") as opened:
        yield opened


def version(name: str, number: int, value: Any, kind: str = "value") -> VarVersion:
    encoded = None if kind == "deleted" else codec.encode(value)
    return VarVersion(
        name=name,
        version=number,
        block_position=0,
        kind=kind,  # type: ignore[arg-type]
        encoded=encoded,
        type_name=type(value).__name__,
        preview=codec.preview(value),
    )


async def commit_turn(
    store: Store, conversation_id: str, request: str, code: str, *versions: VarVersion
) -> None:
    turn = await store.start_turn(conversation_id, request)
    iteration = await store.start_iteration(
        turn.id, 0, system_prompt="s", request_message=request, context_message="c"
    )
    block = BlockResult(position=0, code=code, ok=True, result_preview="done")
    await store.finish_iteration(
        iteration,
        IterationWrite(status="ok", blocks=(block,), var_versions=versions),
    )
    await store.finish_turn(turn.id, TurnOutcome("done", answer="ok"))


@pytest.fixture
async def ctx(store: Store, tmp_path: Path) -> CallContext:
    conv = await store.create_conversation(channel="test")
    await commit_turn(store, conv.id, "make a list", "xs = [1, 2]", version("xs", 1, [1, 2]))
    await commit_turn(store, conv.id, "grow it", "xs.append(3)", version("xs", 2, [1, 2, 3]))
    source = "def double(x):\n    return 2 * x\n"
    await commit_turn(
        store,
        conv.id,
        "define double",
        source,
        version("double", 1, Definition("function", "double", source), kind="function"),
        version("xs", 3, None, kind="deleted"),
    )
    return context_of(store, conv.id, tmp_path)


def context_of(store: Store, conversation_id: str, tmp_path: Path) -> CallContext:
    """A call context on ``store``'s conversation (no sandbox: these helpers read the store)."""
    return CallContext(
        environment=None,  # type: ignore[arg-type]
        conversation_id=conversation_id,
        workspace=tmp_path,
        store=store,
        settings=Settings.load(env={}, sandbox_libraries=False, data_dir=tmp_path).sandbox,
        hooks=None,
    )


REGISTRY = ExtensionRegistry(builtin_extensions())


async def call(ctx: CallContext, name: str, *args: Any) -> Any:
    return await REGISTRY.dispatch(ctx, name, list(args), {})


async def test_var_history_lists_every_version(ctx: CallContext) -> None:
    history = await call(ctx, "var_history", "xs")
    assert [(h["version"], h["kind"], h["preview"], h["turn"]) for h in history] == [
        (1, "value", "[1, 2]", 1),
        (2, "value", "[1, 2, 3]", 2),
        (3, "deleted", "None", 3),
    ]
    assert set(history[0]) == {
        "version", "kind", "type", "preview", "turn", "iteration", "block", "thinned"
    }  # fmt: skip
    assert not any(h["thinned"] for h in history)
    with pytest.raises(LookupError, match="no variable named 'nope'"):
        await call(ctx, "var_history", "nope")
    with pytest.raises(ValueError, match="is not a variable name"):
        await call(ctx, "var_history", "not a name")


async def test_var_diff_is_a_unified_diff(ctx: CallContext) -> None:
    diff = await call(ctx, "var_diff", "xs", 1, 2)
    assert diff.splitlines() == ["--- xs v1", "+++ xs v2", "@@ -1 +1 @@", "-[1, 2]", "+[1, 2, 3]"]
    assert await call(ctx, "var_diff", "xs", 2, 2) == "xs v2 and v2 are equal"
    deleted = await call(ctx, "var_diff", "xs", 2, 3)
    assert "+<deleted NoneType: None>" in deleted
    with pytest.raises(LookupError, match="variable 'xs' has no version 9"):
        await call(ctx, "var_diff", "xs", 1, 9)
    with pytest.raises(ValueError, match="version must be at least 1"):
        await call(ctx, "var_diff", "xs", 0, 1)


async def test_restore_var_returns_values_and_definitions(ctx: CallContext) -> None:
    assert await call(ctx, "restore_var", "xs", 1) == [1, 2]
    restored = await call(ctx, "restore_var", "double", 1)
    assert isinstance(restored, Definition) and restored.name == "double"
    with pytest.raises(ValueError, match="version 3 of 'xs' is its deletion"):
        await call(ctx, "restore_var", "xs", 3)
    with pytest.raises(LookupError, match="has no version 7"):
        await call(ctx, "restore_var", "xs", 7)


async def test_restore_var_refuses_opaque_versions(ctx: CallContext, store: Store) -> None:
    opaque = VarVersion(
        name="sock",
        version=1,
        block_position=0,
        kind="opaque",
        encoded=codec.encode_opaque(object()),
        type_name="object",
        preview="<object>",
    )
    await commit_turn(store, ctx.conversation_id, "open", "sock = thing()", opaque)
    with pytest.raises(ValueError, match="was not restorable"):
        await call(ctx, "restore_var", "sock", 1)
    diff = await call(ctx, "var_diff", "sock", 1, 1)
    assert diff == "sock v1 and v1 are equal"


async def test_history_returns_recent_blocks_oldest_first(ctx: CallContext) -> None:
    history = await call(ctx, "history", 2)
    assert [h["code"] for h in history] == ["xs.append(3)", "def double(x):\n    return 2 * x\n"]
    assert history[0]["ref"] == "t2.i1.1"
    assert history[0]["ok"] is True and history[0]["result"] == "done"
    assert len(await call(ctx, "history")) == 3
    with pytest.raises(ValueError, match="n must be between 1 and 50"):
        await call(ctx, "history", 0)


async def test_search_finds_this_conversations_text(ctx: CallContext, store: Store) -> None:
    other = await store.create_conversation(channel="test")
    await commit_turn(store, other.id, "grow another", "ys = 1")
    hits = await call(ctx, "search", "grow")
    assert [(h["turn"], h["kind"]) for h in hits] == [(2, "request")]
    assert "[grow]" in hits[0]["snippet"]
    with pytest.raises(ValueError, match="text must be a non-empty str"):
        await call(ctx, "search", " ")


async def test_set_title_outside_a_turn_writes_the_store(ctx: CallContext, store: Store) -> None:
    await call(ctx, "set_title", "Lists\nand doubles")
    assert (await store.get_conversation(ctx.conversation_id)).title == "Lists and doubles"


async def test_var_diff_of_a_big_list_shows_what_differs_and_restore_var_reads_it(
    store: Store, tmp_path: Path
) -> None:
    conv = await store.create_conversation(channel="test")
    numbers = list(range(1_000_000))
    changed = numbers.copy()
    changed[500_000] = -1
    await commit_turn(store, conv.id, "r", "big = ...", chunked("big", 1, numbers))
    await commit_turn(store, conv.id, "r", "big[500_000] = -1", chunked("big", 2, changed))
    context = context_of(store, conv.id, tmp_path)
    diff = (await call(context, "var_diff", "big", 1, 2)).splitlines()
    assert diff[:2] == ["--- big v1", "+++ big v2"]
    assert "-500000" in diff and "+-1" in diff
    assert len(diff) < 600  # one run of items, not a million lines cut at the limit
    assert diff[-1] == "[the other items are unchanged (shared chunks: neither read nor shown)]"
    assert await call(context, "restore_var", "big", 2) == changed
    assert await call(context, "var_diff", "big", 2, 2) == "big v2 and v2 are equal"


async def test_a_thinned_version_says_so(tmp_path: Path) -> None:
    async with Store.open(tmp_path / "thin.db", history_budget=1) as store:
        conv = await store.create_conversation(channel="test")
        for number in (1, 2, 3):
            value = [number] * 100_000
            await commit_turn(store, conv.id, "r", "x = ...", chunked("x", number, value))
        context = context_of(store, conv.id, tmp_path)
        history = await call(context, "var_history", "x")
        assert [h["thinned"] for h in history] == [True, True, False]
        with pytest.raises(ValueError, match="thinned to keep the conversation's history"):
            await call(context, "restore_var", "x", 2)
        assert "was thinned" in await call(context, "var_diff", "x", 2, 3)
        assert await call(context, "restore_var", "x", 3) == [3] * 100_000


def chunked(name: str, number: int, value: Any) -> VarVersion:
    """A version whose value is stored as a tree of chunks, as the sandbox reports it."""
    tree = codec.encode_tree(value, max_bytes=1 << 30, max_depth=100)
    return VarVersion(
        name=name,
        version=number,
        block_position=0,
        kind="value",
        encoded=tree.root,
        type_name=type(value).__name__,
        preview=codec.preview(value),
        chunks=tuple(tree.chunks.items()),
    )
