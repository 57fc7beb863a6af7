"""The extension spec and registry, called directly (no sandbox): dispatch, hooks, docs, shape."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from cove.config import Settings
from cove.environment.extensions import (
    CORE,
    FILES,
    LLM,
    Call,
    CallContext,
    Extension,
    ExtensionConstant,
    ExtensionFunction,
    ExtensionRegistry,
    Retry,
    Return,
    builtin_extensions,
    render_docs,
)
from cove.environment.extensions.shape import describe_shape
from cove.errors import ConfigError


class FakeTurn:
    """A test double of the engine's TurnHooks."""

    def __init__(self, request: str = "hello", last_answer: str | None = None) -> None:
        self.request = request
        self.last_answer = last_answer
        self.budget = 10
        self.titles: list[str] = []
        self.prompts: list[str] = []

    async def request_more_iterations(self, n: int) -> int:
        self.budget += n
        return self.budget

    async def set_title(self, text: str) -> None:
        self.titles.append(text)

    async def llm_query(self, prompt: str) -> str:
        self.prompts.append(prompt)
        return f"reply to {prompt}"

    async def llm_query_batch(self, prompts: Sequence[str]) -> list[str]:
        self.prompts.extend(prompts)
        return [f"reply to {p}" for p in prompts]


def make_ctx(tmp_path: Path, hooks: FakeTurn | None = None) -> CallContext:
    return CallContext(
        environment=None,  # type: ignore[arg-type]
        conversation_id="c1",
        workspace=tmp_path,
        store=None,  # type: ignore[arg-type]
        settings=Settings.load(env={}, sandbox_libraries=False, data_dir=tmp_path).sandbox,
        hooks=hooks,
    )


def add(ctx: CallContext, a: int, b: int = 0) -> int:
    """Add two numbers."""
    return a + b


async def slow_add(ctx: CallContext, a: int, b: int) -> int:
    """Add, asynchronously."""
    return a + b


def one(name: str, impl: Any, **hooks: Any) -> ExtensionRegistry:
    fn = ExtensionFunction(name=name, implementation=impl, doc="d", signature=f"{name}()", **hooks)
    return ExtensionRegistry([Extension(name="t", doc="test", functions=(fn,))])


async def test_sync_and_async_implementations(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path)
    assert await one("add", add).dispatch(ctx, "add", [1], {"b": 2}) == 3
    assert await one("slow_add", slow_add).dispatch(ctx, "slow_add", [1, 2], {}) == 3


async def test_unknown_function_and_bad_arguments_read_clearly(tmp_path: Path) -> None:
    ctx, registry = make_ctx(tmp_path), one("add", add)
    with pytest.raises(NameError, match="no extension function named 'nope'"):
        await registry.dispatch(ctx, "nope", [], {})
    with pytest.raises(TypeError, match=r"^add\(\): missing a required argument: 'a'$"):
        await registry.dispatch(ctx, "add", [], {})
    with pytest.raises(TypeError, match=r"^add\(\): got an unexpected keyword argument 'c'$"):
        await registry.dispatch(ctx, "add", [1], {"c": 2})


async def test_os_errors_lose_their_host_paths(tmp_path: Path) -> None:
    def opener(ctx: CallContext) -> str:
        return (tmp_path / "missing").read_text()

    with pytest.raises(FileNotFoundError) as caught:
        await one("opener", opener).dispatch(make_ctx(tmp_path), "opener", [], {})
    assert str(caught.value) == "opener(): No such file or directory"
    assert str(tmp_path) not in str(caught.value)


async def test_before_short_circuits_or_rewrites(tmp_path: Path) -> None:
    calls: list[tuple[Any, ...]] = []

    def impl(ctx: CallContext, x: int) -> int:
        calls.append((x,))
        return x

    def before(ctx: CallContext, call: Call) -> Call | Return | None:
        if call.args == (0,):
            return Return("cached")
        if call.args == (1,):
            return Call((100,), {})
        return None

    registry = one("f", impl, before=before)
    ctx = make_ctx(tmp_path)
    assert await registry.dispatch(ctx, "f", [0], {}) == "cached"
    assert await registry.dispatch(ctx, "f", [1], {}) == 100
    assert await registry.dispatch(ctx, "f", [7], {}) == 7
    assert calls == [(100,), (7,)]


async def test_after_rewrites_the_result(tmp_path: Path) -> None:
    async def after(ctx: CallContext, call: Call, result: Any) -> Any:
        return {"args": list(call.args), "result": result}

    registry = one("add", add, after=after)
    assert await registry.dispatch(make_ctx(tmp_path), "add", [2, 3], {}) == {
        "args": [2, 3],
        "result": 5,
    }


async def test_on_error_falls_back(tmp_path: Path) -> None:
    def boom(ctx: CallContext) -> None:
        raise ValueError("broken")

    def on_error(ctx: CallContext, call: Call, exc: Exception, attempt: int) -> Return:
        return Return(f"fallback after {type(exc).__name__}: {exc}")

    registry = one("boom", boom, on_error=on_error)
    assert await registry.dispatch(make_ctx(tmp_path), "boom", [], {}) == (
        "fallback after ValueError: broken"
    )


async def test_on_error_retry_is_bounded(tmp_path: Path) -> None:
    attempts: list[int] = []

    def flaky(ctx: CallContext, succeed_at: int) -> str:
        attempts.append(len(attempts))
        if len(attempts) < succeed_at:
            raise ConnectionError(f"attempt {len(attempts)} failed")
        return f"ok after {len(attempts)}"

    def on_error(ctx: CallContext, call: Call, exc: Exception, attempt: int) -> Retry:
        return Retry()

    registry = one("flaky", flaky, on_error=on_error, max_retries=2)
    ctx = make_ctx(tmp_path)
    assert await registry.dispatch(ctx, "flaky", [3], {}) == "ok after 3"
    attempts.clear()
    with pytest.raises(ConnectionError, match="attempt 3 failed"):
        await registry.dispatch(ctx, "flaky", [10], {})
    assert len(attempts) == 3  # the first call and two retries, then the error stands


async def test_retry_may_rewrite_arguments(tmp_path: Path) -> None:
    def strict(ctx: CallContext, x: int) -> int:
        if x < 0:
            raise ValueError("negative")
        return x

    def on_error(ctx: CallContext, call: Call, exc: Exception, attempt: int) -> Retry:
        return Retry(Call((abs(call.args[0]),), {}))

    registry = one("strict", strict, on_error=on_error)
    assert await registry.dispatch(make_ctx(tmp_path), "strict", [-4], {}) == 4


def test_duplicate_names_are_refused() -> None:
    fn = ExtensionFunction(name="x", implementation=add, doc="", signature="x()")
    a = Extension(name="a", doc="", functions=(fn,))
    b = Extension(name="b", doc="", constants=(ExtensionConstant("x", "clash", 1),))
    with pytest.raises(ConfigError, match="extension 'b' binds 'x', already bound by 'a'"):
        ExtensionRegistry([a, b])


def test_builtin_extensions_bind_distinct_names() -> None:
    registry = ExtensionRegistry(builtin_extensions())
    assert {"var_history", "read_file", "llm_query", "forget", "shape"} <= set(registry.names)


def test_docs_render_every_function_and_constant_stably() -> None:
    text = render_docs([CORE, FILES, LLM])
    assert text == render_docs([CORE, FILES, LLM])
    assert text.startswith("## core: ")
    for ext in (CORE, FILES, LLM):
        assert f"## {ext.name}: {ext.doc}" in text
        for fn in ext.functions:
            assert f"- {fn.signature}" in text
            for example in fn.examples:
                assert f"e.g. {example}" in text
    assert "- REQUEST: this turn's request (str)" in text
    assert "Each item:" not in text  # only the first paragraph of a docstring is shown


async def test_constants_follow_the_turn(tmp_path: Path) -> None:
    request, last = CORE.constants
    assert request.resolve(make_ctx(tmp_path)) is None
    turn = FakeTurn("sum it", last_answer="42")
    assert request.resolve(make_ctx(tmp_path, turn)) == "sum it"
    assert last.resolve(make_ctx(tmp_path, turn)) == "42"


async def test_turn_functions_delegate_to_the_hooks(tmp_path: Path) -> None:
    registry = ExtensionRegistry(builtin_extensions())
    turn = FakeTurn()
    ctx = make_ctx(tmp_path, turn)
    assert await registry.dispatch(ctx, "llm_query", ["q"], {}) == "reply to q"
    assert await registry.dispatch(ctx, "llm_query_batch", [["a", "b"]], {}) == [
        "reply to a",
        "reply to b",
    ]
    assert await registry.dispatch(ctx, "request_more_iterations", [5], {}) == 15
    await registry.dispatch(ctx, "set_title", ["  Sales   report  "], {})
    assert turn.titles == ["Sales report"]


async def test_turn_functions_outside_a_turn_fail_clearly(tmp_path: Path) -> None:
    registry = ExtensionRegistry(builtin_extensions())
    ctx = make_ctx(tmp_path)
    with pytest.raises(RuntimeError, match=r"llm_query\(\) is only available while a turn"):
        await registry.dispatch(ctx, "llm_query", ["q"], {})
    with pytest.raises(RuntimeError, match="only available while a turn"):
        await registry.dispatch(ctx, "request_more_iterations", [2], {})


async def test_turn_function_arguments_are_checked(tmp_path: Path) -> None:
    registry = ExtensionRegistry(builtin_extensions())
    ctx = make_ctx(tmp_path, FakeTurn())
    with pytest.raises(ValueError, match="prompt must be a non-empty str"):
        await registry.dispatch(ctx, "llm_query", [""], {})
    with pytest.raises(TypeError, match="prompts must be a list of str"):
        await registry.dispatch(ctx, "llm_query_batch", ["abc"], {})
    with pytest.raises(ValueError, match=r"prompts\[1\] must be a non-empty str"):
        await registry.dispatch(ctx, "llm_query_batch", [["a", 3]], {})
    with pytest.raises(ValueError, match="n must be at least 1"):
        await registry.dispatch(ctx, "request_more_iterations", [0], {})
    with pytest.raises(TypeError, match="n must be an int"):
        await registry.dispatch(ctx, "request_more_iterations", [True], {})
    with pytest.raises(ValueError, match="text must be a non-empty str"):
        await registry.dispatch(ctx, "set_title", ["   "], {})


def test_shape_describes_structure() -> None:
    assert describe_shape(3) == "int"
    assert describe_shape("abc") == "str[3]"
    assert describe_shape([1, 2, 3]) == "list[3] of int"
    assert describe_shape([]) == "list[0]"
    assert describe_shape((1, "a")) == "tuple[2] of mixed int|str"
    assert describe_shape({"a": 1, "b": [1.5]}) == "dict[2] {a: int, b: list[1] of float}"
    rows = [{"id": i, "name": "x"} for i in range(40)] + [{"id": 40, "name": None}]
    assert describe_shape(rows) == "list[41] of dict rows {id: int, name: NoneType|str[1]}"
    assert (
        describe_shape({1: {"x": {"y": {"z": 1}}}})
        == "dict[1] {1: dict[1] {x: dict[1] {y: dict[1]}}}"
    )
    wide = {f"k{i}": i for i in range(20)}
    assert describe_shape(wide).endswith("k11: int, … +8 more}")
    assert len(describe_shape([[str(i) * 50 for i in range(5)]] * 3)) <= 600
