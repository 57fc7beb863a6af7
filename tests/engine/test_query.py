"""Turns end to end over HTTP: the real openai client, the fake endpoint, real workers and store."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from cove.config import Price, Settings
from cove.engine.llm.openai import OpenAIClient
from cove.events import (
    BlockFinished,
    IterationStarted,
    ModelDelta,
    Nudge,
    SandboxRestarted,
    TitleChanged,
    VarsChanged,
)
from tests.engine.harness import engine_stack
from tests.fakes.openai_server import FakeOpenAI, Fault

pytestmark = pytest.mark.slow  # sandbox workers started per test


def reply(code: list[Any] | str | None = None, answer: str | None = None, **extra: Any) -> str:
    body: dict[str, Any] = {"thinking": extra.pop("thinking", "working"), **extra}
    if code is not None:
        body["code"] = code
    if answer is not None:
        body["answer"] = answer
    return json.dumps(body)


async def test_variables_survive_across_turns(
    fake_openai: FakeOpenAI, openai_settings: Settings, tmp_path: Path
) -> None:
    fake_openai.add_replies(
        reply(
            ["prices = [3, 4, 5]", "total = sum(prices)\ntotal"],
            "Total: {{total}}",
            title="Price totals",
        ),
        reply(["prices.append(10)\ntotal = sum(prices)"], "New total: {{total}}"),
    )
    async with (
        OpenAIClient(openai_settings.model) as llm,
        engine_stack(openai_settings, llm, tmp_path) as stack,
    ):
        events, first = await stack.turn("sum the prices")
        assert first.status == "done"
        assert first.answer == "Total: 12"
        assert any(isinstance(e, ModelDelta) for e in events)
        assert any(isinstance(e, TitleChanged) and e.title == "Price totals" for e in events)
        _, second = await stack.turn("add 10 and sum again")
        assert second.answer == "New total: 22"
        history = await stack.store.var_history(stack.conversation.id, "prices")
        assert [v.version for v in history] == [1, 2]
        assert stack.conversation.title == "Price totals"
        # The second turn's first prompt carries the handover of the first turn.
        handover = fake_openai.requests[1]["messages"][1]["content"]
        assert "Total: 12" in handover
        assert first.usage.tokens_in > 0 and first.usage.tokens_out > 0
        assert first.usage.cost_usd == 0 and not first.cost_known  # fake-model is not priced


async def test_every_prompt_and_raw_reply_is_stored_exactly(
    fake_openai: FakeOpenAI, openai_settings: Settings, tmp_path: Path
) -> None:
    replies = [reply(["x = 41"]), reply(["x + 1"], "{{x}}")]
    fake_openai.add_replies(*replies)
    async with (
        OpenAIClient(openai_settings.model) as llm,
        engine_stack(openai_settings, llm, tmp_path) as stack,
    ):
        await stack.turn("compute")
        transcript = await stack.store.transcript(stack.conversation.id)
    iterations = transcript.turns[0].iterations
    assert [it.raw_reply for it in iterations] == replies
    for it, request in zip(iterations, fake_openai.requests, strict=True):
        messages = request["messages"]
        assert messages[1]["content"] == it.request_message
        assert messages[2]["content"] == it.context_message
        assert await stack_system_prompt(tmp_path, it.system_prompt_hash) == messages[0]["content"]


async def stack_system_prompt(tmp_path: Path, digest: str) -> str:
    from cove.persistence.store import Store

    async with Store.open(str(tmp_path / "cove.db")) as store:
        return await store.system_prompt(digest)


async def test_malformed_reply_becomes_an_error_iteration_the_model_sees(
    fake_openai: FakeOpenAI, openai_settings: Settings, tmp_path: Path
) -> None:
    fake_openai.add_replies("this is not json at all", reply(["1 + 1"], "two"))
    async with (
        OpenAIClient(openai_settings.model) as llm,
        engine_stack(openai_settings, llm, tmp_path) as stack,
    ):
        _, final = await stack.turn("add")
        transcript = await stack.store.transcript(stack.conversation.id)
    assert final.status == "done"
    first, second = transcript.turns[0].iterations
    assert first.status == "parse_error" and first.parse_error
    assert first.raw_reply == "this is not json at all"
    assert "unreadable reply" in second.context_message


async def test_rate_limits_and_server_errors_are_retried(
    fake_openai: FakeOpenAI, openai_settings: Settings, tmp_path: Path
) -> None:
    fake_openai.add_faults(Fault.rate_limit(0.01), Fault.server_error(502))
    fake_openai.add_replies(reply(["6 * 7"], "42"))
    async with (
        OpenAIClient(openai_settings.model) as llm,
        engine_stack(openai_settings, llm, tmp_path) as stack,
    ):
        _, final = await stack.turn("multiply")
    assert final.status == "done" and final.answer == "42"


async def test_rejected_response_format_falls_back(
    fake_openai: FakeOpenAI, openai_settings: Settings, tmp_path: Path
) -> None:
    fake_openai.unsupported.add("json_schema")
    fake_openai.add_replies(reply(["v = 1"]), reply(["v"], "{{v}}"))
    async with (
        OpenAIClient(openai_settings.model) as llm,
        engine_stack(openai_settings, llm, tmp_path) as stack,
    ):
        _, final = await stack.turn("go")
    assert final.status == "done"
    formats = [r.get("response_format", {}).get("type") for r in fake_openai.requests]
    assert formats[0] == "json_schema" and formats[-1] == "json_object"


async def test_dead_endpoint_fails_the_turn_and_keeps_what_was_committed(
    fake_openai: FakeOpenAI, openai_settings: Settings, tmp_path: Path
) -> None:
    def endpoint_down(body: dict[str, Any]) -> str:
        raise RuntimeError("the endpoint is down")  # the fake answers every call with a 500

    fake_openai.add_replies(reply(["kept = 'safe'"]))
    fake_openai.respond_with(endpoint_down)  # once the first reply is used up
    async with (
        OpenAIClient(openai_settings.model) as llm,
        engine_stack(openai_settings, llm, tmp_path) as stack,
    ):
        _, final = await stack.turn("store something")
        transcript = await stack.store.transcript(stack.conversation.id)
        variables = await stack.store.vars_as_of(stack.conversation.id)
    assert final.status == "failed"
    assert final.error and "500" in final.error
    assert len(fake_openai.requests) == 1 + 1 + openai_settings.model.max_retries
    assert transcript.turns[0].status == "failed"
    first, second = transcript.turns[0].iterations
    assert first.status == "ok"
    assert second.status == "error" and second.raw_reply is None
    assert variables["kept"].preview == "'safe'"


async def test_unreachable_endpoint_fails_with_a_clear_message(
    openai_settings: Settings, tmp_path: Path
) -> None:
    settings = openai_settings.replace(base_url="http://127.0.0.1:9/v1", max_retries=1)
    async with OpenAIClient(settings.model) as llm, engine_stack(settings, llm, tmp_path) as stack:
        _, final = await stack.turn("anything")
    assert final.status == "failed"
    assert final.error and "127.0.0.1:9" in final.error


async def test_max_iterations_ends_with_a_fallback_answer(
    fake_openai: FakeOpenAI, openai_settings: Settings, tmp_path: Path
) -> None:
    fake_openai.respond_with(reply(["n = 1"], thinking="still counting"))
    async with (
        OpenAIClient(openai_settings.model) as llm,
        engine_stack(openai_settings, llm, tmp_path) as stack,
    ):
        events, final = await stack.turn("never finishes", max_iterations=3)
    assert final.status == "max_iterations"
    assert final.iterations == 3
    assert final.answer and "still counting" in final.answer
    budgets = [e.budget for e in events if isinstance(e, IterationStarted)]
    assert budgets == [3, 3, 3]


async def test_request_more_iterations_raises_the_budget(
    fake_openai: FakeOpenAI, openai_settings: Settings, tmp_path: Path
) -> None:
    fake_openai.add_replies(
        reply(["request_more_iterations(2)"]),
        reply(["x = 1"]),
        reply(["y = 2"]),
        reply(["x + y"], "{{x}} and {{y}}"),
    )
    async with (
        OpenAIClient(openai_settings.model) as llm,
        engine_stack(openai_settings, llm, tmp_path) as stack,
    ):
        events, final = await stack.turn("long job", max_iterations=2)
    assert final.status == "done" and final.iterations == 4
    assert [e.budget for e in events if isinstance(e, IterationStarted)] == [2, 4, 4, 4]


async def test_error_budget_restarts_the_strategy_then_gives_up(
    fake_openai: FakeOpenAI, openai_settings: Settings, tmp_path: Path
) -> None:
    settings = openai_settings.replace(
        error_budget=2, max_restarts=1, max_iterations=20, reasoning_effort=True
    )
    fake_openai.respond_with(reply(["1 / 0"]))
    async with OpenAIClient(settings.model) as llm, engine_stack(settings, llm, tmp_path) as stack:
        events, final = await stack.turn("divide")
    assert final.status == "error_budget"
    assert final.iterations == 4
    nudges = [e.text for e in events if isinstance(e, Nudge)]
    assert any("start over" in text for text in nudges)
    # Consecutive errors raise the reasoning effort sent to the endpoint.
    efforts = [r.get("reasoning_effort") for r in fake_openai.requests]
    assert efforts == ["medium", "medium", "high", "high"]


async def test_the_model_can_ask_for_less_reasoning(
    fake_openai: FakeOpenAI, openai_settings: Settings, tmp_path: Path
) -> None:
    settings = openai_settings.replace(reasoning_effort=True)
    fake_openai.add_replies(reply(["a = 1"], next_reasoning="quick"), reply(["a"], "{{a}}"))
    async with OpenAIClient(settings.model) as llm, engine_stack(settings, llm, tmp_path) as stack:
        _, final = await stack.turn("go")
    assert final.answer == "1"
    assert [r.get("reasoning_effort") for r in fake_openai.requests] == ["medium", "low"]


async def test_undefined_placeholder_is_refused_then_accepted(
    fake_openai: FakeOpenAI, openai_settings: Settings, tmp_path: Path
) -> None:
    fake_openai.add_replies(reply(["a = 2"], "The value is {{b}}"), reply(["b = a * 21"], "{{b}}"))
    async with (
        OpenAIClient(openai_settings.model) as llm,
        engine_stack(openai_settings, llm, tmp_path) as stack,
    ):
        _, final = await stack.turn("answer")
        transcript = await stack.store.transcript(stack.conversation.id)
    assert final.status == "done" and final.answer == "42"
    second = transcript.turns[0].iterations[1]
    assert "{{b}}" in second.context_message and "refused" in second.context_message


async def test_answer_is_refused_when_a_block_failed(
    fake_openai: FakeOpenAI, openai_settings: Settings, tmp_path: Path
) -> None:
    fake_openai.add_replies(reply(["z = [1][5]"], "done anyway"), reply(["z = 1"], "fixed"))
    async with (
        OpenAIClient(openai_settings.model) as llm,
        engine_stack(openai_settings, llm, tmp_path) as stack,
    ):
        events, final = await stack.turn("index")
    assert final.answer == "fixed" and final.iterations == 2
    errors = [e.block.error for e in events if isinstance(e, BlockFinished) and not e.block.ok]
    assert errors and "IndexError" in (errors[0] or "")


async def test_cancel_kills_a_long_block_quickly(
    fake_openai: FakeOpenAI, openai_settings: Settings, tmp_path: Path
) -> None:
    fake_openai.add_replies(
        reply(["before = 1"]),
        reply([{"code": "write_file('spinning', 'yes')\nwhile True:\n    pass", "timeout_s": 60}]),
    )
    settings = openai_settings.replace(block_timeout_max_s=120)
    async with OpenAIClient(settings.model) as llm, engine_stack(settings, llm, tmp_path) as stack:
        query = stack.query("spin")
        loop = asyncio.get_running_loop()
        cancelled_at = 0.0
        finished_at = 0.0
        async for event in query.run():
            if isinstance(event, IterationStarted) and event.iteration == 2:

                async def cancel_soon() -> None:
                    nonlocal cancelled_at
                    marker = tmp_path / "workspace" / "spinning"
                    for _ in range(6000):  # wait (at most 60 s) until the block spins
                        if marker.exists():
                            break
                        await asyncio.sleep(0.01)
                    cancelled_at = loop.time()
                    await query.cancel()

                task = asyncio.create_task(cancel_soon())
            if event.type == "turn_finished":
                finished_at = loop.time()
                final = event
        await task
        variables = await stack.store.vars_as_of(stack.conversation.id)
        # The sandbox still works after the kill and kept the earlier variable.
        outcome = await stack.env.run_block(
            "before + 1", position=0, timeout_s=5, seed=0, clock=0.0
        )
    assert final.status == "cancelled"  # type: ignore[attr-defined]
    assert finished_at - cancelled_at < 1.0
    assert "before" in variables
    assert outcome.result.ok and outcome.result.result_preview == "2"


async def test_sub_queries_are_recorded_and_costed(
    fake_openai: FakeOpenAI, openai_settings: Settings, tmp_path: Path
) -> None:
    settings = openai_settings.replace(prices={"fake-model": Price(1.0, 2.0)})
    fake_openai.add_replies(
        reply(['answers = llm_query_batch(["a?", "b?"])\none = llm_query("c?")'], "{{one}}")
    )
    fake_openai.add_subquery_replies("A", "B", "C")
    async with OpenAIClient(settings.model) as llm, engine_stack(settings, llm, tmp_path) as stack:
        _, final = await stack.turn("ask around")
        transcript = await stack.store.transcript(stack.conversation.id)
        answers = await stack.store.vars_as_of(stack.conversation.id)
    subqueries = transcript.turns[0].iterations[0].subqueries
    assert sorted(s.prompt for s in subqueries) == ["a?", "b?", "c?"]
    assert all(s.reply in ("A", "B", "C") for s in subqueries)
    assert all(s.usage.cost_usd > 0 for s in subqueries)
    assert final.answer == "C"
    assert final.cost_known
    assert answers["answers"].preview == "['A', 'B']"
    main_cost = (
        sum(
            it.usage.tokens_in * 1.0 + it.usage.tokens_out * 2.0
            for it in transcript.turns[0].iterations
        )
        / 1e6
    )
    assert final.usage.cost_usd > main_cost


async def test_a_crashing_block_restarts_the_sandbox_and_nudges(
    fake_openai: FakeOpenAI, openai_settings: Settings, tmp_path: Path
) -> None:
    fake_openai.add_replies(
        reply(["keep = [1, 2, 3]"]),
        reply([{"code": "while True:\n    pass", "timeout_s": 1}]),
        reply(["len(keep)"], "{{keep}}"),
    )
    async with (
        OpenAIClient(openai_settings.model) as llm,
        engine_stack(openai_settings, llm, tmp_path) as stack,
    ):
        events, final = await stack.turn("loop")
    assert final.status == "done" and final.answer == "[1, 2, 3]"
    assert any(isinstance(e, SandboxRestarted) for e in events)
    assert any(isinstance(e, VarsChanged) for e in events)


async def test_the_api_key_never_reaches_the_database_or_events(
    fake_openai: FakeOpenAI, openai_settings: Settings, tmp_path: Path
) -> None:
    from tests.conftest import FAKE_API_KEY

    fake_openai.add_faults(Fault.server_error(500))
    fake_openai.add_replies(reply(["k = 1"], "{{k}}"))
    async with (
        OpenAIClient(openai_settings.model) as llm,
        engine_stack(openai_settings, llm, tmp_path) as stack,
    ):
        events, _ = await stack.turn("anything")
    assert FAKE_API_KEY in fake_openai.headers[0]["authorization"]
    assert all(FAKE_API_KEY not in json.dumps(e.to_json()) for e in events)
    assert not files_containing(tmp_path, "cove.db*", FAKE_API_KEY.encode())


def files_containing(directory: Path, pattern: str, needle: bytes) -> list[Path]:
    return [path for path in directory.glob(pattern) if needle in path.read_bytes()]


async def test_ten_unusable_replies_in_a_row_end_the_turn_as_error_budget(
    fake_openai: FakeOpenAI, openai_settings: Settings, tmp_path: Path
) -> None:
    # Defaults: error budget 5, 2 restarts, 10 iterations. A restart does not forgive them.
    settings = openai_settings.replace(error_budget=5, max_restarts=2, max_iterations=10)
    fake_openai.add_replies(*[""] * 5)
    fake_openai.respond_with("I would rather explain this in words.")
    async with OpenAIClient(settings.model) as llm, engine_stack(settings, llm, tmp_path) as stack:
        events, final = await stack.turn("compute")
    assert final.status == "error_budget"
    assert final.iterations == 10
    assert final.error == (
        "10 replies in a row could not be used; the last: no JSON object was found in the reply"
    )
    nudges = [e.text for e in events if isinstance(e, Nudge)]
    assert any("start over" in text for text in nudges)  # one strategy restart came first


async def test_a_readable_reply_resets_the_unusable_streak(
    fake_openai: FakeOpenAI, openai_settings: Settings, tmp_path: Path
) -> None:
    settings = openai_settings.replace(error_budget=2, max_restarts=5, max_iterations=8)
    fake_openai.add_replies("prose", "prose", "prose", reply(["x = 1"]), "prose", "prose")
    fake_openai.respond_with(reply(["x"], "{{x}}"))
    async with OpenAIClient(settings.model) as llm, engine_stack(settings, llm, tmp_path) as stack:
        _, final = await stack.turn("go")
    assert final.status == "done" and final.answer == "1"
