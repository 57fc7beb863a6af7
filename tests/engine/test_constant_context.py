"""The O(1) context: a 200-iteration turn's prompts stay under the ceiling and do not grow."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from cove.config import Settings
from cove.engine.budgets import CONTEXT_CHARS, PROMPT_CHARS
from cove.engine.llm.scripted import ScriptedClient
from tests.engine.harness import engine_stack

pytestmark = pytest.mark.slow  # sandbox workers started per test

ITERATIONS = 200


def heavy_block(i: int) -> str:
    """Creates two variables (one large), prints a flood, and returns a large value."""
    return (
        f"text_{i} = 'word{i} ' * 2000\n"
        f"rows_{i} = [{{'id': k, 'name': 'row' + str(k)}} for k in range({i} * 5)]\n"
        f"print('log line {i} ' * 400)\n"
        f"text_{i} * 3"
    )


async def test_prompt_stays_bounded_over_200_iterations(tmp_path: Path) -> None:
    sizes: list[int] = []
    context_sizes: list[int] = []

    def reply_for(i: int):  # type: ignore[no-untyped-def]
        def reply(messages: Sequence[Mapping[str, str]]) -> str:
            sizes.append(sum(len(m["content"]) for m in messages))
            context_sizes.append(len(messages[-1]["content"]))
            body: dict[str, object] = {
                "thinking": f"step {i}: " + "reasoning " * 300,
                "code": [heavy_block(i)],
            }
            if i == ITERATIONS - 1:
                body["answer"] = "done"
            return json.dumps(body)

        return reply

    llm = ScriptedClient([reply_for(i) for i in range(ITERATIONS)])
    settings = Settings.load(env={}, sandbox_libraries=False, data_dir=tmp_path).replace(
        max_iterations=ITERATIONS, worker_pool_size=1
    )
    async with engine_stack(settings, llm, tmp_path) as stack:
        _, final = await stack.turn("grind through 200 iterations", max_iterations=ITERATIONS)
        variables = await stack.store.vars_as_of(stack.conversation.id)

    assert final.status == "done" and final.iterations == ITERATIONS
    assert len(variables) == 2 * ITERATIONS
    assert len(sizes) == ITERATIONS
    assert max(sizes) <= PROMPT_CHARS
    assert max(context_sizes) <= CONTEXT_CHARS
    assert sizes[199] <= 1.2 * sizes[9], (sizes[9], sizes[199])
