"""Iterations: atomic commits, blobs, transcripts, recent blocks, sub-queries and search."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from cove.errors import Busy, NotFound, StoreError
from cove.persistence.records import IterationWrite, ReplyWrite, SubqueryWrite
from cove.persistence.store import Store
from cove.results import TurnOutcome, Usage, VarVersion
from tests.persistence.store_helpers import (
    SYSTEM_PROMPT,
    add_iteration,
    add_turn,
    count,
    iteration_write,
    raw,
)


async def _running_turn(store: Store) -> tuple[str, int]:
    conversation = await store.create_conversation(channel="cli")
    turn = await store.start_turn(conversation.id, "compute the total")
    return conversation.id, turn.id


async def test_an_iteration_commits_with_all_it_produced(store: Store) -> None:
    conversation_id, turn_id = await _running_turn(store)
    iteration_id = await store.start_iteration(
        turn_id, 0, system_prompt=SYSTEM_PROMPT, request_message="req", context_message="ctx",
        seed=7,
    )  # fmt: skip
    result = replace(
        iteration_write(variables={"total": (1, "3"), "gone": (2, None)}),
        subqueries=(SubqueryWrite(0, 1, "summarise", "short", "mini", Usage(3, 4, 0.1), 5.0),),
    )

    await store.finish_iteration(iteration_id, result)

    transcript = await store.transcript(conversation_id)
    (iteration,) = transcript.turns[0].iterations
    assert (iteration.id, iteration.status, iteration.seed) == (iteration_id, "ok", 7)
    assert (iteration.request_message, iteration.context_message) == ("req", "ctx")
    assert result.reply is not None
    assert (iteration.raw_reply, iteration.thinking) == (result.reply.raw_reply, "think")
    assert (iteration.usage.tokens_in, iteration.usage.tokens_out, iteration.llm_ms) == (
        10,
        5,
        12.0,
    )
    assert [(b.position, b.code, b.stdout) for b in iteration.blocks] == [
        (0, "x = 0", "out 0\n"),
        (1, "x = 1", "out 1\n"),
        (2, "x = 2", "out 2\n"),
    ]
    block = iteration.blocks[0]
    assert (block.ok, block.result_encoded, block.seed, block.clock) == (
        True,
        "1",
        0,
        1_700_000_000.0,
    )
    assert [(s.prompt, s.reply, s.block_position) for s in iteration.subqueries] == [
        ("summarise", "short", 1)
    ]
    assert [(v.name, v.version, v.kind, v.encoded) for v in transcript.var_versions] == [
        ("total", 1, "value", "3"),
        ("gone", 2, "deleted", None),
    ]
    assert await store.subqueries(turn_id) == list(iteration.subqueries)
    assert await store.system_prompt(iteration.system_prompt_hash) == SYSTEM_PROMPT


async def test_the_system_prompt_is_stored_once(store: Store, db_path: Path) -> None:
    _, turn_id = await _running_turn(store)
    for position in range(3):
        await add_iteration(store, turn_id, position)
    assert count(db_path, "blob") == 1
    with pytest.raises(NotFound):
        await store.system_prompt("0" * 64)


async def test_a_failing_write_leaves_nothing_behind(store: Store, db_path: Path) -> None:
    _, turn_id = await _running_turn(store)
    iteration_id = await store.start_iteration(
        turn_id, 0, system_prompt="s", request_message="r", context_message="c"
    )
    orphan = VarVersion("x", "value", "1", "int", "1", version=1, block_position=9)
    broken = replace(iteration_write(), var_versions=(orphan,))

    with pytest.raises(StoreError, match="names block 9"):
        await store.finish_iteration(iteration_id, broken)

    assert (count(db_path, "block"), count(db_path, "var_version")) == (0, 0)
    with raw(db_path) as conn:
        assert conn.execute("SELECT status FROM iteration").fetchone() == ("running",)
        assert conn.execute("SELECT count(*) FROM search_fts").fetchone() == (0 + 1,)  # request
    await store.finish_iteration(iteration_id, iteration_write())  # still writable
    assert count(db_path, "block") == 3


async def test_a_reused_version_number_is_refused_atomically(store: Store, db_path: Path) -> None:
    _, turn_id = await _running_turn(store)
    await add_iteration(store, turn_id, 0, iteration_write(variables={"x": (1, "1")}))
    iteration_id = await store.start_iteration(
        turn_id, 1, system_prompt="s", request_message="r", context_message="c"
    )

    with pytest.raises(StoreError, match="UNIQUE"):
        await store.finish_iteration(iteration_id, iteration_write(variables={"x": (1, "2")}))

    assert count(db_path, "block") == 3


async def test_finishing_twice_or_after_the_turn_ended_is_busy(store: Store) -> None:
    _, turn_id = await _running_turn(store)
    iteration_id = await add_iteration(store, turn_id, 0)

    with pytest.raises(Busy, match="already ok"):
        await store.finish_iteration(iteration_id, iteration_write())
    with pytest.raises(StoreError, match="not a finished iteration status"):
        await store.finish_iteration(iteration_id, iteration_write(status="running"))
    with pytest.raises(NotFound):
        await store.finish_iteration(999, iteration_write())
    with pytest.raises(NotFound):
        await store.start_iteration(999, 0, system_prompt="s", request_message="r",
                                    context_message="c")  # fmt: skip
    await store.finish_turn(turn_id, TurnOutcome("done"))
    with pytest.raises(Busy, match="no longer running"):
        await store.start_iteration(turn_id, 1, system_prompt="s", request_message="r",
                                    context_message="c")  # fmt: skip


async def test_large_values_go_to_blobs_and_read_back_as_text(store: Store, db_path: Path) -> None:
    conversation_id, turn_id = await _running_turn(store)
    big = '"' + "x" * 10_000 + '"'
    result = iteration_write(blocks=1, result=big, variables={"big": (1, big), "small": (1, "1")})

    await add_iteration(store, turn_id, 0, result)

    with raw(db_path) as conn:
        stored = dict(conn.execute("SELECT name, encoded IS NULL FROM var_version").fetchall())
        block_row = conn.execute("SELECT result_encoded, result_blob FROM block").fetchone()
    assert stored == {"big": 1, "small": 0}
    assert block_row[0] is None and len(block_row[1]) == 64
    assert count(db_path, "blob") == 2  # the system prompt + one copy of the big value
    assert (await store.var_version(conversation_id, "big", 1)).encoded == big
    assert (await store.vars_as_of(conversation_id))["big"].encoded == big
    (_, _, block), *_ = await store.recent_blocks(conversation_id, 1)
    assert block.result_encoded == big


async def test_recent_blocks_are_the_last_ones_across_turns_oldest_first(store: Store) -> None:
    conversation = await store.create_conversation(channel="cli")
    await add_turn(store, conversation.id)
    turn = await store.start_turn(conversation.id, "second")
    await add_iteration(store, turn.id, 0, iteration_write(blocks=2, code="a{n}"))
    await add_iteration(store, turn.id, 1, iteration_write(blocks=1, code="b{n}"))

    recent = await store.recent_blocks(conversation.id, 4)

    assert [(t, i, b.code) for t, i, b in recent] == [
        (1, 0, "x = 2"),
        (2, 0, "a0"),
        (2, 0, "a1"),
        (2, 1, "b0"),
    ]
    assert await store.recent_blocks(conversation.id, 0) == []


async def test_transcript_of_one_turn(store: Store) -> None:
    conversation = await store.create_conversation(channel="cli")
    await add_turn(store, conversation.id, "first", variables={"x": (1, "1")})
    await add_turn(store, conversation.id, "second", variables={"x": (2, "2")})

    transcript = await store.transcript(conversation.id, turn=2)

    assert [t.request for t in transcript.turns] == ["second"]
    assert [len(t.iterations) for t in transcript.turns] == [1]
    assert [v.version for v in transcript.var_versions] == [2]
    with pytest.raises(NotFound):
        await store.transcript("nope")


async def test_search_finds_requests_answers_and_code(store: Store) -> None:
    conversation = await store.create_conversation(channel="cli")
    turn_id = await add_turn(store, conversation.id, "what do the invoices total", answer="990")
    other = await store.create_conversation(channel="cli")
    await add_turn(store, other.id, "invoices by month", answer="a table")
    turn = await store.start_turn(conversation.id, "more")
    await add_iteration(store, turn.id, 0, iteration_write(blocks=1, code="invoices_total = 3"))

    hits = await store.search("invoices")
    scoped = await store.search("invoices", conversation_id=conversation.id)
    answers = await store.search("990")

    # Words split at underscores, so code naming ``invoices_total`` matches "invoices" too.
    assert {(h.conversation_id, h.kind) for h in hits} == {
        (conversation.id, "request"),
        (conversation.id, "code"),
        (other.id, "request"),
    }
    assert [(h.kind, h.turn_id, h.turn_position) for h in scoped if h.kind == "request"] == [
        ("request", turn_id, 1)
    ]
    assert [(h.kind, h.turn_position) for h in scoped if h.kind == "code"] == [("code", 2)]
    assert all("[invoices]" in h.snippet for h in scoped)
    assert [(h.kind, h.turn_id) for h in answers] == [("answer", turn_id)]
    code_hits = await store.search("invoices_total = 3")
    assert [(h.kind, h.turn_position) for h in code_hits] == [("code", 2)]
    assert len(await store.search("invoices", limit=1)) == 1


@pytest.mark.parametrize(
    "text", ['"', "invoices AND (", "NEAR(a b", "*", "col:x", "-invoices", "  ", "'; DROP"]
)
async def test_search_text_cannot_break_the_query(store: Store, text: str) -> None:
    conversation = await store.create_conversation(channel="cli")
    await add_turn(store, conversation.id, "invoices")
    assert isinstance(await store.search(text), list)


async def test_search_matches_quoted_words_literally(store: Store) -> None:
    conversation = await store.create_conversation(channel="cli")
    await add_turn(store, conversation.id, 'say "hello" OR goodbye')
    assert len(await store.search('"hello" OR')) == 1
    assert await store.search("hello NOT") == []


async def test_an_iteration_without_blocks_is_fine(store: Store) -> None:
    conversation_id, turn_id = await _running_turn(store)
    iteration_id = await store.start_iteration(
        turn_id, 0, system_prompt="s", request_message="r", context_message="c"
    )
    unreadable = IterationWrite(
        status="parse_error", parse_error="no JSON", reply=ReplyWrite(raw_reply="???")
    )
    await store.finish_iteration(iteration_id, unreadable)
    (iteration,) = (await store.transcript(conversation_id)).turns[0].iterations
    assert (iteration.status, iteration.parse_error, iteration.blocks) == (
        "parse_error",
        "no JSON",
        (),
    )
