"""Host time spent in extension calls is bounded per block, and each call's own cost is bounded.

The block's clock stops while the host serves an extension call, so without a budget of its own
a loop of calls could keep a block (and the host) busy for ever.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from cove.config import Settings
from cove.environment.sandbox.host.client import SandboxClient
from cove.environment.sandbox.host.pool import WorkerPool
from tests.environment.conftest import Extensions, ok
from tests.environment.test_environment import Harness, harness

__all__ = ["harness"]


@pytest.fixture
async def budgeted(tmp_path: Path, extensions: Extensions) -> AsyncIterator[SandboxClient]:
    settings = Settings.load(
        env={},
        sandbox_libraries=False,
        data_dir=tmp_path,
        extension_time_budget_s=0.5,
        block_timeout_s=5.0,
    ).sandbox
    pool = WorkerPool(settings, size=1)
    await pool.start()
    try:
        client = await pool.acquire(workspace=tmp_path / "workspace", on_call=extensions)
        await client.configure(functions=Extensions.names, constants={})
        yield client
    finally:
        await pool.aclose()


async def test_a_loop_of_calls_runs_out_of_budget_with_a_clear_error(
    budgeted: SandboxClient, extensions: Extensions
) -> None:
    code = (
        "calls = 0\nfailure = None\nfor i in range(40):\n    try:\n        wait(0.1)\n"
        "        calls += 1\n    except ExtensionError as e:\n        failure = str(e)\n"
        "print(failure)\ncalls"
    )
    outcome = await ok(budgeted, code)
    assert "used up their 0.5 s of host time (extension_time_budget_s)" in outcome.result.stdout
    assert outcome.result.result_preview is not None and int(outcome.result.result_preview) < 10
    # Once spent, later calls fail at once: the host serves no more than the budget.
    assert sum(1 for name, *_ in extensions.calls if name == "wait") <= 10
    # The next block has a budget of its own.
    assert (await ok(budgeted, "wait(0.1)")).result.result_preview == "0.1"


async def test_var_diff_of_large_values_is_bounded(harness: Harness) -> None:
    env = await harness.open()
    await harness.turn(env, "xs = list(range(20000))", "xs.reverse()")
    ran = await harness.turn(env, "d = var_diff('xs', 1, 2)\n(len(d.splitlines()), d[-60:])")
    outcome = ran[0][0]
    assert outcome.result.ok, outcome.result.error
    assert (
        outcome.result.result_preview is not None
        and "diff limited" in outcome.result.result_preview
    )
    await env.aclose()
