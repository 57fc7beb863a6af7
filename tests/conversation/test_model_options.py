"""Model options given with a send: sent with each model call of the turn, recorded with it."""

from __future__ import annotations

import pytest

from cove.config import Settings
from cove.conversation import Conversations
from cove.events import TurnFinished
from tests.fakes.openai_server import FakeOpenAI
from tests.scripted import reply

pytestmark = pytest.mark.slow  # sandbox workers started per test


async def test_model_options_are_sent_with_each_call_and_recorded_with_the_turn(
    fake_openai: FakeOpenAI, openai_settings: Settings
) -> None:
    fake_openai.add_replies(
        reply(["x = 1"]),
        reply(['y = llm_query("name a colour")'], "{{y}}"),
        reply(["z = 3"], "plain"),
    )
    fake_openai.add_subquery_replies("blue")
    options = {"temperature": 0.25, "max_tokens": 300}
    async with Conversations.open(openai_settings.replace(worker_pool_size=1)) as convs:
        conv = await convs.create()
        events = [e async for e in convs.send(conv.id, "two iterations", model_options=options)]
        assert isinstance(events[-1], TurnFinished) and events[-1].answer == "blue"
        plain = [e async for e in convs.send(conv.id, "no options")]
        assert isinstance(plain[-1], TurnFinished) and plain[-1].answer == "plain"
        transcript = await convs.inspect(conv.id)
        replayed = [e async for e in convs.replay(conv.id)]
    first, second = transcript.turns
    assert dict(first.model_options) == options
    assert dict(second.model_options) == {}
    optioned, unoptioned = fake_openai.requests[:3], fake_openai.requests[3:]
    assert len(optioned) == 3  # two iterations and the sub-query between them
    assert all(r["temperature"] == 0.25 and r["max_tokens"] == 300 for r in optioned)
    assert unoptioned and all("temperature" not in r for r in unoptioned)
    assert replayed[-1].to_json()["ok"] is True
