"""Chunked values through the environment: a value of megabytes is versioned like a small one,
a change carries only the chunks it made, and restore, fork and a worker restart give back
exactly the values."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.environment.test_environment import Harness
from tests.persistence.value_helpers import chunk_bytes

pytestmark = pytest.mark.slow  # sandbox workers started per test

BIG = (
    "big = list(range(300_000))\n"
    "text = 'ab' * 600_000 + 'é'\n"
    "table = [{'id': i, 'name': f'n{i}', 'ok': i % 2 == 0} for i in range(30_000)]\n"
    "raw = bytes(range(256)) * 5_000\n"
    "pairs = {i: str(i) for i in range(60_000)}"
)
SAME = (
    "(big == list(range(300_000)), text == 'ab' * 600_000 + 'é',"
    " table == [{'id': i, 'name': f'n{i}', 'ok': i % 2 == 0} for i in range(30_000)],"
    " raw == bytes(range(256)) * 5_000, pairs == {i: str(i) for i in range(60_000)},"
    " list(pairs)[:3])"
)


@pytest.fixture
async def harness(tmp_path: Path) -> AsyncIterator[Harness]:
    async with Harness.running(tmp_path, sandbox_libraries=False) as h:
        yield h


async def test_values_of_megabytes_are_versioned_and_come_back_exactly(
    harness: Harness,
) -> None:
    env = await harness.open()
    [(_, made)] = await harness.turn(env, BIG)
    assert {v.name: v.kind for v in made} == dict.fromkeys(
        ("big", "text", "table", "raw", "pairs"), "value"
    )
    await env.aclose()
    env = await harness.open()
    assert set(env.restored.restored) == {"big", "text", "table", "raw", "pairs"}
    [(outcome, _)] = await harness.turn(env, SAME)
    assert outcome.result.result_preview == "(True, True, True, True, True, [0, 1, 2])"
    await env.aclose()


async def test_an_append_carries_and_stores_only_the_chunks_it_made(
    harness: Harness, tmp_path: Path
) -> None:
    env = await harness.open()
    [(_, first)] = await harness.turn(env, "nums = list(range(100_000))")
    assert sum(len(data) for _, data in first[0].chunks) > 500_000
    stored = chunk_bytes(tmp_path / "cove.db")
    [(_, second)] = await harness.turn(env, "nums.append(-1)")
    assert [v.name for v in second] == ["nums"]
    assert sum(len(data) for _, data in second[0].chunks) <= 16 * 1024
    assert chunk_bytes(tmp_path / "cove.db") - stored <= 16 * 1024
    [(_, third)] = await harness.turn(env, "len(nums)")
    assert third == ()
    await env.aclose()
    env = await harness.open()
    [(outcome, _)] = await harness.turn(env, "nums == [*range(100_000), -1]")
    assert outcome.result.result_preview == "True"
    await env.aclose()


async def test_a_fork_restores_its_parents_big_value_as_of_the_fork(harness: Harness) -> None:
    env = await harness.open()
    await harness.turn(env, "big = list(range(300_000))")
    await harness.turn(env, "big[5] = -5\nbig.append(1)")
    await env.aclose()
    fork = await harness.store.create_conversation(
        channel="test", parent_id=harness.conversation_id, fork_turn=1
    )
    env = await harness.open(conversation_id=fork.id)
    [(outcome, _), (_, made)] = await harness.turn(
        env, "big == list(range(300_000))", "big.append(7)"
    )
    assert outcome.result.result_preview == "True"
    assert [(v.name, v.version) for v in made] == [("big", 2)]
    await env.aclose()
    env = await harness.open()  # the parent kept its own
    [(outcome, _)] = await harness.turn(env, "(big[5], big[-1], len(big))")
    assert outcome.result.result_preview == "(-5, 1, 300001)"
    await env.aclose()


async def test_a_restarted_worker_gets_the_big_values_back(harness: Harness) -> None:
    env = await harness.open()
    await harness.turn(env, BIG)
    [(outcome, _)] = await harness.turn(env, "while True:\n    pass", timeout_s=1)
    assert outcome.restart is not None
    assert set(outcome.restart.restored) >= {"big", "text", "table", "raw", "pairs"}
    [(outcome, _), (_, made)] = await harness.turn(env, SAME, "big.append(0)")
    assert outcome.result.result_preview == "(True, True, True, True, True, [0, 1, 2])"
    assert sum(len(data) for _, data in made[0].chunks) <= 16 * 1024
    await env.aclose()
