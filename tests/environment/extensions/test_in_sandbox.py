"""Extension calls from sandbox code on real worker processes: results, errors, hooks, built-ins."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from cove.environment.extensions import (
    Call,
    CallContext,
    Extension,
    ExtensionFunction,
    Retry,
    Return,
    builtin_extensions,
)
from tests.environment.test_environment import FakeTurn, Harness, harness  # noqa: F401

attempts: list[int] = []


def greet(ctx: CallContext, name: str, *, punct: str = "!") -> str:
    return f"hello {name}{punct}"


async def fetch(ctx: CallContext, n: int) -> list[int]:
    await asyncio.sleep(0)
    return list(range(n))


def explode(ctx: CallContext) -> None:
    raise ValueError("the gauge is broken")


def cached_before(ctx: CallContext, call: Call) -> Return | Call | None:
    if call.args == ("cached",):
        return Return("from cache")
    if call.args == ("shout",):
        return Call(("SHOUT",), call.kwargs)
    return None


def wrap_after(ctx: CallContext, call: Call, result: Any) -> Any:
    return {"wrapped": result}


def fall_back(ctx: CallContext, call: Call, exc: Exception, attempt: int) -> Return:
    return Return(f"fallback ({exc})")


def flaky(ctx: CallContext, succeed_at: int) -> str:
    attempts.append(1)
    if len(attempts) < succeed_at:
        raise ConnectionError(f"try {len(attempts)} failed")
    return f"ok on try {len(attempts)}"


def retry(ctx: CallContext, call: Call, exc: Exception, attempt: int) -> Retry:
    return Retry()


def fn(name: str, impl: Any, **hooks: Any) -> ExtensionFunction:
    return ExtensionFunction(name=name, implementation=impl, doc="", signature=f"{name}()", **hooks)


TEST_EXTENSION = Extension(
    name="testing",
    doc="functions for these tests",
    functions=(
        fn("greet", greet),
        fn("fetch", fetch),
        fn("explode", explode),
        fn("echo", greet, before=cached_before, after=wrap_after),
        fn("safe_explode", explode, on_error=fall_back),
        fn("flaky", flaky, on_error=retry, max_retries=2),
    ),
)


@pytest.fixture
async def env_harness(harness: Harness) -> AsyncIterator[tuple[Harness, Any]]:  # noqa: F811
    env = await harness.open(extensions=(*builtin_extensions(), TEST_EXTENSION))
    yield harness, env
    await env.aclose()


async def run(pair: tuple[Harness, Any], *codes: str, hooks: FakeTurn | None = None) -> list[Any]:
    h, env = pair
    return [outcome for outcome, _ in await h.turn(env, *codes, hooks=hooks)]


async def test_sync_and_async_functions_return_values(env_harness: Any) -> None:
    outcomes = await run(env_harness, "greet('Ada', punct='?')", "fetch(3)")
    assert [o.value_preview for o in outcomes] == ["'hello Ada?'", "[0, 1, 2]"]


async def test_errors_surface_as_readable_block_errors(env_harness: Any) -> None:
    outcomes = await run(
        env_harness,
        "x = 1\nexplode()",
        "greet()",
        "greet('a', loud=True)",
        "try:\n    explode()\nexcept ExtensionError as exc:\n    caught = str(exc)\ncaught",
    )
    assert not outcomes[0].ok
    assert outcomes[0].error == "ExtensionError: ValueError: the gauge is broken (line 2)"
    assert "missing a required argument: 'name'" in outcomes[1].error
    assert "greet(): got an unexpected keyword argument 'loud'" in outcomes[2].error
    assert outcomes[3].value_preview == "'ValueError: the gauge is broken'"
    for outcome in outcomes[:3]:
        assert "Traceback" not in outcome.error and "/cove/" not in outcome.error


async def test_hooks_short_circuit_rewrite_and_fall_back(env_harness: Any) -> None:
    outcomes = await run(
        env_harness, "echo('cached')", "echo('shout')", "echo('x', punct='.')", "safe_explode()"
    )
    assert [o.value_preview for o in outcomes] == [
        "'from cache'",
        "{'wrapped': 'hello SHOUT!'}",
        "{'wrapped': 'hello x.'}",
        "'fallback (the gauge is broken)'",
    ]


async def test_retry_is_bounded(env_harness: Any) -> None:
    attempts.clear()
    ok = await run(env_harness, "flaky(3)")
    assert ok[0].value_preview == "'ok on try 3'"
    attempts.clear()
    failed = await run(env_harness, "flaky(9)")
    assert failed[0].error == "ExtensionError: ConnectionError: try 3 failed (line 1)"
    assert len(attempts) == 3


async def test_turn_functions_and_llm_from_code(env_harness: Any) -> None:
    turn = FakeTurn()
    outcomes = await run(
        env_harness,
        "llm_query('hi')",
        "llm_query_batch(['a', 'b'])",
        "request_more_iterations(3)",
        "set_title('My  title')",
        "shape([{'a': 1}, {'a': 2}])",
        hooks=turn,
    )
    assert [o.value_preview for o in outcomes] == [
        "'HI'",
        "['A', 'B']",
        "13",
        None,
        "'list[2] of dict rows {a: int}'",
    ]
    assert turn.titles == ["My title"]


async def test_turn_functions_outside_a_turn_fail_clearly(env_harness: Any) -> None:
    _, env = env_harness
    outcome, _ = await env.run_block("llm_query('hi')", position=0, timeout_s=5, seed=0, clock=0.0)
    assert outcome.error == (
        "ExtensionError: RuntimeError: llm_query() is only available while a turn is running "
        "(line 1)"
    )


async def test_history_and_search_from_code(env_harness: Any) -> None:
    await run(env_harness, "alpha = 'needle'")
    outcomes = await run(env_harness, "history(1)", "search('needle')[0]['kind']")
    assert "'ref': 't1.i1.1'" in outcomes[0].value_preview
    assert outcomes[1].value_preview == "'code'"


async def test_files_from_code_stay_in_the_workspace(env_harness: Any, tmp_path: Path) -> None:
    outcomes = await run(
        env_harness,
        "write_file('data/a.txt', 'one\\ntwo')",
        "read_file('data/a.txt').splitlines()",
        "[e['path'] for e in list_files('data')]",
        "read_file('../cove.db', binary=True)",
        "write_file('/tmp/escape.txt', 'x')",
    )
    assert [o.value_preview for o in outcomes[:3]] == ["7", "['one', 'two']", "['data/a.txt']"]
    assert outcomes[3].error == (
        "ExtensionError: PermissionError: read_file(): '..' is not allowed in paths "
        "('../cove.db') (line 1)"
    )
    assert "absolute paths are not allowed" in outcomes[4].error
    assert (tmp_path / "workspace" / "data" / "a.txt").read_text() == "one\ntwo"
