"""A conversation's instructions: set at creation or later, versioned by turn, in the system
prompt within its budget, inherited by forks, used again by replay."""

from __future__ import annotations

import pytest

from cove.config import Settings
from cove.conversation import Conversations
from cove.engine import budgets
from cove.errors import CoveError
from cove.events import TurnFinished
from tests.fakes.openai_server import FakeOpenAI
from tests.scripted import reply

pytestmark = pytest.mark.slow  # sandbox workers started per test

PERSONA = "You are Ada, a terse ship's navigator. Answer in nautical terms."
RULES = "House rule: every answer ends with 'Aye.'"


def system_of(request: dict[str, object]) -> str:
    """The system prompt a request to the endpoint carried."""
    messages = request["messages"]
    assert isinstance(messages, list)
    return str(messages[0]["content"])


async def finished(convs: Conversations, conversation_id: str, text: str) -> TurnFinished:
    events = [e async for e in convs.send(conversation_id, text)]
    last = events[-1]
    assert isinstance(last, TurnFinished), events
    return last


async def test_instructions_reach_every_call_and_a_change_applies_from_the_next_turn(
    fake_openai: FakeOpenAI, openai_settings: Settings
) -> None:
    fake_openai.add_replies(
        reply(["x = 1"]), reply([], "one"), reply([], "two"), reply([], "three")
    )
    async with Conversations.open(openai_settings) as convs:
        conv = await convs.create(instructions=f"  {PERSONA}\n")
        assert (await convs.profile(conv.id)).instructions == PERSONA
        await finished(convs, conv.id, "first")
        changed = await convs.set_profile(conv.id, instructions=RULES)
        assert (changed.instructions, changed.from_turn) == (RULES, 2)
        await finished(convs, conv.id, "second")
        cleared = await convs.set_profile(conv.id, instructions="   ")
        assert cleared.instructions is None
        await finished(convs, conv.id, "third")
        transcript = await convs.inspect(conv.id)
        prompts = [
            await convs.system_prompt(it.system_prompt_hash)
            for turn in transcript.turns
            for it in turn.iterations
        ]
        replayed = [e async for e in convs.replay(conv.id)]
    sent = [system_of(r) for r in fake_openai.requests]
    assert sent == prompts  # what was sent is what was recorded, iteration by iteration
    assert PERSONA in sent[0] and PERSONA in sent[1] and RULES not in sent[1]
    assert RULES in sent[2] and PERSONA not in sent[2]
    assert PERSONA not in sent[3] and RULES not in sent[3]
    assert "# Instructions for this conversation" not in sent[3]
    assert all(len(p) <= budgets.SYSTEM_CHARS for p in sent)
    # Replay sends each turn the instructions it ran with: the system prompts match.
    assert replayed[-1].to_json()["ok"] is True, [e.to_json() for e in replayed]


async def test_instructions_over_the_limit_are_refused_and_the_old_ones_stay(
    fake_openai: FakeOpenAI, openai_settings: Settings
) -> None:
    too_long = "x" * (budgets.INSTRUCTIONS_CHARS + 1)
    async with Conversations.open(openai_settings) as convs:
        with pytest.raises(CoveError, match="4,001 characters long; at most 4,000"):
            await convs.create(instructions=too_long)
        assert await convs.list() == []  # nothing was created
        conv = await convs.create(instructions=PERSONA)
        with pytest.raises(CoveError, match="shorten them by 1"):
            await convs.set_profile(conv.id, instructions=too_long)
        assert (await convs.profile(conv.id)).instructions == PERSONA
        fits = "y" * budgets.INSTRUCTIONS_CHARS
        assert (await convs.set_profile(conv.id, instructions=fits)).instructions == fits
        fake_openai.add_replies(reply([], "fine"))
        assert (await finished(convs, conv.id, "go")).answer == "fine"
    prompt = system_of(fake_openai.requests[0])
    assert fits in prompt and len(prompt) <= budgets.SYSTEM_CHARS


async def test_a_fork_inherits_the_instructions_and_changes_them_alone(
    fake_openai: FakeOpenAI, openai_settings: Settings
) -> None:
    fake_openai.respond_with(reply([], "ok"))
    async with Conversations.open(openai_settings) as convs:
        parent = await convs.create(instructions=PERSONA)
        await finished(convs, parent.id, "one")
        await convs.set_profile(parent.id, instructions=RULES)
        await finished(convs, parent.id, "two")
        at_one = await convs.fork(parent.id, 1)  # after turn 1 the change to RULES was made
        at_zero = await convs.fork(parent.id, 0)  # a retry of turn 1: what turn 1 ran with
        assert (await convs.profile(at_one.id)).instructions == RULES
        assert (await convs.profile(at_zero.id)).instructions == PERSONA
        await convs.set_profile(at_one.id, instructions="Fork only.")
        assert (await convs.profile(parent.id)).instructions == RULES
        await finished(convs, at_one.id, "three")
        await finished(convs, at_zero.id, "retry")
        replayed = [e async for e in convs.replay(at_one.id)]
    assert "Fork only." in system_of(fake_openai.requests[2])
    assert PERSONA in system_of(fake_openai.requests[3])
    assert replayed[-1].to_json()["ok"] is True, [e.to_json() for e in replayed]
