"""The fallback list asks a model whose retries ran out last for a while, then first again."""

from __future__ import annotations

import asyncio

import pytest

from cove.engine.llm.client import Retry
from cove.engine.llm.fallback import FallbackClient
from cove.engine.llm.scripted import ScriptedClient
from cove.errors import ModelError
from tests.scripted import reply

DOWN = ModelError("503 after 2 tries", status=503, retryable=True)
MESSAGES = [{"role": "user", "content": "hi"}]


async def answered_by(client: FallbackClient, retries: list[Retry] | None = None) -> str:
    async def note(retry: Retry) -> None:
        if retries is not None:
            retries.append(retry)

    completion = await client.complete(MESSAGES, on_retry=note)  # type: ignore[arg-type]
    return completion.model


async def test_a_model_that_ran_out_of_retries_is_asked_last_until_it_has_cooled_down() -> None:
    primary = ScriptedClient([DOWN, reply([], "back"), reply([], "again")], model="primary")
    backup = ScriptedClient([reply([], "b1"), reply([], "b2"), reply([], "b3")], model="backup")
    client = FallbackClient([primary, backup], cool_down_s=0.3)
    retries: list[Retry] = []
    assert await answered_by(client, retries) == "backup"
    assert len(retries) == 1 and "primary is unavailable" in retries[0].reason
    assert await answered_by(client) == "backup"  # not waiting through primary's retries again
    assert len(primary.calls) == 1
    await asyncio.sleep(0.35)
    assert await answered_by(client) == "primary"  # cooled down: first again, and it recovered
    assert await answered_by(client) == "primary"
    assert len(backup.calls) == 2


async def test_when_every_model_is_down_the_last_asked_failure_is_raised() -> None:
    primary = ScriptedClient([DOWN, DOWN], model="primary")
    backup = ScriptedClient([DOWN, reply([], "b")], model="backup")
    client = FallbackClient([primary, backup], cool_down_s=60)
    with pytest.raises(ModelError, match="503"):
        await answered_by(client)
    # Both cooling down: still asked, in the list's order.
    assert await answered_by(client) == "backup"
    assert (len(primary.calls), len(backup.calls)) == (2, 2)


async def test_a_failure_another_model_would_not_cure_leaves_the_order_alone() -> None:
    refused = ModelError("401 bad key", status=401)
    primary = ScriptedClient([refused, reply([], "ok")], model="primary")
    backup = ScriptedClient([], model="backup")
    client = FallbackClient([primary, backup], cool_down_s=60)
    with pytest.raises(ModelError, match="401"):
        await answered_by(client)
    assert await answered_by(client) == "primary"
    assert backup.calls == []
