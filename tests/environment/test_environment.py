"""The environment on real worker processes and a real store: variables, versions, restarts."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from cove.config import SandboxSettings, Settings
from cove.environment.environment import Environment
from cove.environment.extensions import Extension, NudgeContext, builtin_extensions
from cove.environment.sandbox.host.pool import WorkerPool
from cove.environment.sandbox.outcome import BlockOutcome
from cove.errors import NotFound, SandboxError
from cove.persistence.records import IterationWrite
from cove.persistence.store import Store
from cove.results import BlockResult, TurnOutcome, VarVersion

CLOCK = 1_700_000_000.0
Ran = list[tuple[BlockOutcome, tuple[VarVersion, ...]]]


class FakeTurn:
    """A test double of the engine's TurnHooks."""

    def __init__(self, request: str = "a request", last_answer: str | None = None) -> None:
        self.request = request
        self.last_answer = last_answer
        self.titles: list[str] = []

    async def request_more_iterations(self, n: int) -> int:
        return 10 + n

    async def set_title(self, text: str) -> None:
        self.titles.append(text)

    async def llm_query(self, prompt: str) -> str:
        return prompt.upper()

    async def llm_query_batch(self, prompts: Sequence[str]) -> list[str]:
        return [p.upper() for p in prompts]


class Harness:
    """Plays the engine's part: opens environments and commits what their blocks produced."""

    def __init__(
        self, settings: SandboxSettings, pool: WorkerPool, store: Store, root: Path
    ) -> None:
        self.settings, self.pool, self.store = settings, pool, store
        self.workspace = root / "workspace"
        self.conversation_id = ""

    @classmethod
    @contextlib.asynccontextmanager
    async def running(cls, root: Path, **settings: Any) -> AsyncIterator[Harness]:
        """A harness on a one-worker pool and the store ``root/cove.db``, with a new
        conversation; ``settings`` are ``Settings.load`` overrides."""
        sandbox = Settings.load(env={}, data_dir=root, worker_pool_size=1, **settings).sandbox
        pool = WorkerPool(sandbox, size=1)
        await pool.start()
        try:
            async with Store.open(root / "cove.db") as store:
                harness = cls(sandbox, pool, store, root)
                harness.conversation_id = (await store.create_conversation(channel="test")).id
                yield harness
        finally:
            await pool.aclose()

    async def open(self, **kwargs: Any) -> Environment:
        kwargs.setdefault("conversation_id", self.conversation_id)
        return await Environment.open(
            settings=self.settings,
            pool=self.pool,
            store=self.store,
            workspace=self.workspace,
            **kwargs,
        )

    async def turn(
        self, env: Environment, *codes: str, hooks: FakeTurn | None = None, timeout_s: float = 5
    ) -> Ran:
        turn = await self.store.start_turn(env.conversation_id, "request")
        iteration = await self.store.start_iteration(
            turn.id, 0, system_prompt="s", request_message="r", context_message="c"
        )
        await env.begin_turn(hooks or FakeTurn())
        ran: Ran = []
        for position, code in enumerate(codes):
            outcome = await env.run_block(
                code, position=position, timeout_s=timeout_s, seed=position, clock=CLOCK
            )
            ran.append((outcome, outcome.changes))
        env.end_turn()
        blocks = tuple(
            BlockResult(position=i, code=code, ok=outcome.result.ok, error=outcome.result.error)
            for i, (code, (outcome, _)) in enumerate(zip(codes, ran, strict=True))
        )
        versions = tuple(v for _, writes in ran for v in writes)
        await self.store.finish_iteration(
            iteration,
            IterationWrite(status="ok", blocks=blocks, var_versions=versions),
        )
        await self.store.finish_turn(turn.id, TurnOutcome("done", answer="done"))
        return ran


@pytest.fixture
async def harness(tmp_path: Path) -> AsyncIterator[Harness]:
    async with Harness.running(tmp_path, sandbox_libraries=False) as h:
        yield h


def versions(writes: Sequence[VarVersion]) -> list[tuple[str, int, str]]:
    return [(w.name, w.version, w.kind) for w in writes]


async def test_values_functions_and_classes_survive_blocks_and_reopen(harness: Harness) -> None:
    env = await harness.open()
    ran = await harness.turn(
        env,
        "total = 40",
        "def add(a, b=2):\n    return a + b + total",
        "class Box:\n    def __init__(self, v):\n        self.v = v\n    def get(self):\n"
        "        return self.v",
        "add(0)",
    )
    assert [o.result.ok for o, _ in ran] == [True, True, True, True]
    assert ran[3][0].result.result_preview == "42"
    assert versions(ran[0][1] + ran[1][1] + ran[2][1]) == [
        ("total", 1, "value"),
        ("add", 1, "function"),
        ("Box", 1, "function"),
    ]
    entries = env.var_index.entries()
    assert [e.var.name for e in entries] == ["Box", "add", "total"]
    assert entries[1].var.signature == "add(a, b=2)"
    await env.aclose()

    env = await harness.open()
    assert env.restored.lost == ()
    assert set(env.restored.restored) == {"total", "add", "Box"}
    assert [e.var.name for e in env.var_index.entries()] == ["Box", "add", "total"]
    ran = await harness.turn(env, "Box(add(1)).get()", "total = 1")
    assert ran[0][0].result.result_preview == "43"
    assert versions(ran[1][1]) == [("total", 2, "value")]
    await env.aclose()


async def test_mutation_creates_a_new_version(harness: Harness) -> None:
    env = await harness.open()
    ran = await harness.turn(env, "xs = []", "xs.append(1)", "len(xs)", "ys = xs")
    assert versions(ran[0][1]) == [("xs", 1, "value")]
    assert versions(ran[1][1]) == [("xs", 2, "value")]
    assert ran[1][1][0].preview == "[1]"
    assert ran[2][1] == ()  # reading changes nothing
    assert versions(ran[3][1]) == [("ys", 1, "value")]
    await env.aclose()


async def test_numbering_continues_after_reopen_including_deletions(harness: Harness) -> None:
    env = await harness.open()
    ran = await harness.turn(env, "y = 1", "del y")
    assert versions(ran[1][1]) == [("y", 2, "deleted")]
    assert ran[1][1][0].type_name == "int"
    assert len(env.var_index) == 0
    await env.aclose()

    env = await harness.open()
    assert env.restored.restored == ()
    ran = await harness.turn(env, "y = 'back'")
    assert versions(ran[0][1]) == [("y", 3, "value")]
    await env.aclose()


async def test_opaque_values_are_lost_on_reopen_and_recorded_deleted(harness: Harness) -> None:
    env = await harness.open()
    ran = await harness.turn(env, "it = iter([1, 2])", "n = 5")
    assert versions(ran[0][1]) == [("it", 1, "opaque")]
    await env.aclose()

    env = await harness.open()
    assert env.restored.lost == ("it",) and env.restored.restored == ("n",)
    assert "it" not in env.var_index
    ran = await harness.turn(env, "n + 1")
    assert versions(ran[0][1]) == [("it", 2, "deleted")]
    assert ran[0][1][0].preview.startswith("lost: not restorable")
    assert (await harness.store.vars_as_of(env.conversation_id)).keys() == {"n"}
    await env.aclose()


async def test_a_timeout_restart_records_the_lost_variables(harness: Harness) -> None:
    env = await harness.open()
    ran = await harness.turn(
        env, "it = iter([1])", "keep = [1, 2]", "while True:\n    pass", "keep", timeout_s=1
    )
    outcome, writes = ran[2]
    assert outcome.result.timed_out and not outcome.result.ok
    assert outcome.restart is not None and "it" in outcome.restart.lost
    assert versions(writes) == [("it", 2, "deleted")]
    assert writes[0].type_name == "list_iterator"
    assert ran[3][0].result.result_preview == "[1, 2]"
    assert [e.var.name for e in env.var_index.entries()] == ["keep"]
    await env.aclose()


async def test_forget_deletes_after_the_block(harness: Harness) -> None:
    env = await harness.open()
    ran = await harness.turn(
        env,
        "a = 1\nb = 2",
        "forget('a')\nseen = a + 1\nscratch = 3\nforget('scratch', 'never_defined')",
        "seen",
    )
    outcome, writes = ran[1]
    assert outcome.result.ok, outcome.result.error
    assert versions(writes) == [("seen", 1, "value"), ("a", 2, "deleted")]
    assert writes[1].preview == "forgotten"
    assert ran[2][0].result.result_preview == "2"
    assert [e.var.name for e in env.var_index.entries()] == ["seen", "b"]
    ran = await harness.turn(env, "a")
    assert "NameError" in (ran[0][0].result.error or "")
    await env.aclose()


async def test_forget_refuses_extension_names(harness: Harness) -> None:
    env = await harness.open()
    ran = await harness.turn(env, "forget('read_file')", "forget('REQUEST')", "forget(3)")
    errors = [outcome.result.error or "" for outcome, _ in ran]
    assert "'read_file' is provided by an extension" in errors[0]
    assert "'REQUEST' is provided by an extension" in errors[1]
    assert "3 is not a variable name" in errors[2]
    await env.aclose()


async def test_restore_var_rebuilds_values_and_functions(harness: Harness) -> None:
    env = await harness.open()
    await harness.turn(
        env,
        "def f(x):\n    return x * 2",
        "prices = [1, 2]",
        "prices.append(3)",
        "def f(x):\n    return x * 3",
    )
    ran = await harness.turn(
        env, 'old = restore_var("prices", 1)', 'f = restore_var("f", 1)', "(old, f(5))"
    )
    assert [o.result.ok for o, _ in ran] == [True, True, True], [o.result.error for o, _ in ran]
    assert ran[2][0].result.result_preview == "([1, 2], 10)"
    assert versions(ran[1][1]) == [("f", 3, "function")]
    await env.aclose()


async def test_constants_follow_the_turn(harness: Harness) -> None:
    env = await harness.open()
    ran = await harness.turn(env, "(REQUEST, LAST_ANSWER)", hooks=FakeTurn("sum it", "41"))
    assert ran[0][0].result.result_preview == "('sum it', '41')"
    ran = await harness.turn(env, "REQUEST", hooks=FakeTurn("next one"))
    assert ran[0][0].result.result_preview == "'next one'"
    await env.aclose()


async def test_value_text_reads_current_values(harness: Harness) -> None:
    env = await harness.open()
    await harness.turn(
        env, "name = 'Ada'", "n = [1, 2]", "def g(a):\n    return a", "it = iter([])"
    )
    assert env.value_text("name") == "Ada"
    assert env.value_text("n") == "[1, 2]"
    assert env.value_text("g") == "g(a)"
    assert env.value_text("missing") is None
    assert env.value_text("it") is not None
    await env.aclose()


async def test_kill_running_stops_a_block_at_once(harness: Harness) -> None:
    env = await harness.open()
    await harness.turn(env, "kept = 7")
    marker = harness.workspace / "running"
    block = asyncio.create_task(
        env.run_block(
            "write_file('running', 'yes')\nwhile True:\n    pass",
            position=0,
            timeout_s=60,
            seed=0,
            clock=CLOCK,
        )
    )
    for _ in range(6000):  # wait (at most 60 s) for the block's marker file
        if marker.exists() or block.done():
            break
        await asyncio.sleep(0.01)
    assert marker.exists(), "the block never started"
    await env.kill_running()
    outcome = await block
    assert not outcome.result.ok
    ran = await harness.turn(env, "kept")
    assert ran[0][0].result.result_preview == "7"
    await env.aclose()


async def test_closed_environment_refuses_use(harness: Harness) -> None:
    env = await harness.open()
    await env.aclose()
    await env.aclose()  # idempotent
    assert env.closed
    with pytest.raises(SandboxError, match="is closed"):
        await env.run_block("1", position=0, timeout_s=5, seed=0, clock=CLOCK)
    with pytest.raises(SandboxError, match="is closed"):
        await env.begin_turn(FakeTurn())
    with pytest.raises(SandboxError, match="is closed"):
        env.value_text("x")


async def test_activation_docs_and_nudges(harness: Harness) -> None:
    def failing(ctx: NudgeContext) -> str | None:
        raise RuntimeError("broken nudge")

    hidden = Extension(name="hidden", doc="never active", activate=lambda env: False)
    nudging = Extension(
        name="nudging",
        doc="nudges near the end",
        nudge=lambda ctx: "almost out" if (ctx.budget or 0) - (ctx.iteration or 0) <= 1 else None,
    )
    broken = Extension(name="broken", doc="fails", nudge=failing)
    env = await harness.open(extensions=(*builtin_extensions(), hidden, nudging, broken))
    assert [e.name for e in env.extensions] == ["core", "files", "llm", "nudging", "broken"]
    docs = env.system_prompt_docs()
    assert "## nudging: nudges near the end" in docs and "hidden" not in docs
    assert docs == env.system_prompt_docs()
    assert env.extension_nudges(iteration=1, budget=10) == []
    assert env.extension_nudges(iteration=9, budget=10) == ["almost out"]
    assert env.extension_nudges() == ["almost out"]  # the caller may not know the budget
    await env.aclose()


async def test_a_fork_starts_from_its_parents_variables(harness: Harness) -> None:
    env = await harness.open()
    await harness.turn(env, "x = 1", "keep = 'parent'")
    await harness.turn(env, "x = 2")
    await env.aclose()
    fork = await harness.store.create_conversation(
        channel="test", parent_id=harness.conversation_id, fork_turn=1
    )
    env = await harness.open(conversation_id=fork.id)
    assert set(env.restored.restored) == {"x", "keep"}
    ran = await harness.turn(env, "(x, keep)", "x = 10")
    assert ran[0][0].result.result_preview == "(1, 'parent')"
    assert versions(ran[1][1]) == [("x", 2, "value")]  # the parent's turn 2 is not visible
    await env.aclose()


async def test_as_of_turn_restores_older_state_and_numbers_after_everything(
    harness: Harness,
) -> None:
    env = await harness.open()
    await harness.turn(env, "x = 'first'")
    await harness.turn(env, "x = 'second'", "extra = 1")
    await env.aclose()
    env = await harness.open(as_of_turn=1)
    assert env.restored.restored == ("x",)
    ran = await harness.turn(env, "x", "x = 'third'")
    assert ran[0][0].result.result_preview == "'first'"
    assert versions(ran[1][1]) == [("x", 3, "value")]
    await env.aclose()


async def test_opening_an_unknown_conversation_fails_clearly(harness: Harness) -> None:
    with pytest.raises(NotFound, match="no conversation matches 'nope'"):
        await harness.open(conversation_id="nope")


async def test_imports_are_versioned_and_survive_a_rebuild(harness: Harness) -> None:
    env = await harness.open()
    [(_, made)] = await harness.turn(env, "import math\nfrom re import sub as replace_all")
    assert {(v.name, v.kind, v.preview) for v in made} == {
        ("math", "module", "import math"),
        ("replace_all", "module", "from re import sub as replace_all"),
    }
    await env.aclose()
    reopened = await harness.open()
    [(outcome, _), (_, dropped)] = await harness.turn(
        reopened, "replace_all('a', 'b', str(math.floor(2.5)) + 'a')", "del math"
    )
    assert outcome.result.ok and outcome.result.result_preview == "'2b'"
    assert [(v.name, v.kind) for v in dropped] == [("math", "deleted")]
    await reopened.aclose()
