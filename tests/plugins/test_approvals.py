"""Approval decisions: by policy, by the person, remembered, timed out — each one recorded.

Real worker processes, the real ``openai`` client against the fake endpoint, both backends.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from cove.conversation import ApprovalAnswer, ApprovalRequest, Conversations
from cove.events import ReplayFinished
from tests.fakes.openai_server import FakeOpenAI
from tests.plugins.test_example_plugin import Person, notes, settings_for, turn
from tests.scripted import reply

pytestmark = pytest.mark.slow  # sandbox workers started per test

ADD_TWICE = 'notes_add("one")\nnotes_add("two")'


@pytest.mark.parametrize(
    ("policy", "approved", "written"),
    [(("notes_add=deny",), False, []), (("write=allow",), True, ["one", "two"])],
)
async def test_a_policy_decides_without_asking_and_each_decision_is_recorded(
    database: str,
    tmp_path: Path,
    fake_openai: FakeOpenAI,
    notes_file: Path,
    policy: tuple[str, ...],
    approved: bool,
    written: list[str],
) -> None:
    fake_openai.add_replies(reply([ADD_TWICE]), reply(answer="done"))
    person = Person()
    settings = settings_for(database, tmp_path, fake_openai, extension_policy=policy)
    async with await Conversations.open(settings) as convs:
        conversation = await convs.create()
        await turn(convs, conversation.id, "add two notes", person)
        decided = await convs.approvals(conversation.id)
    assert person.asked == []
    assert notes(notes_file) == written
    calls = [(a.seq, a.function, a.arguments, a.approved, a.reason) for a in decided]
    assert calls == [(0, "notes_add", "'one'", approved, "policy")] + (
        [(1, "notes_add", "'two'", True, "policy")] if approved else []
    )  # a denied call raises in the block: the second is never made


async def test_an_answer_to_remember_holds_for_the_conversation_even_after_reopening(
    database: str, tmp_path: Path, fake_openai: FakeOpenAI, notes_file: Path
) -> None:
    fake_openai.add_replies(
        reply(['notes_add("one")'], "ok"),
        reply(['notes_add("two")'], "ok"),
        reply(['notes_add("elsewhere")'], "ok"),
    )
    person = Person(ApprovalAnswer(True, remember=True), ApprovalAnswer(True))
    settings = settings_for(database, tmp_path, fake_openai)
    async with await Conversations.open(settings) as convs:
        conversation = await convs.create()
        await turn(convs, conversation.id, "first", person)
    async with await Conversations.open(settings) as convs:  # another process, later
        await turn(convs, conversation.id, "second", person)
        other = await convs.create()
        await turn(convs, other.id, "in another conversation", person)  # asked again there
        decided = await convs.approvals(conversation.id)
        elsewhere = await convs.approvals(other.id)
    assert [r.arguments for r in person.asked] == ["'one'", "'elsewhere'"]
    assert notes(notes_file) == ["one", "two", "elsewhere"]
    assert [(a.turn_position, a.approved, a.reason, a.remember) for a in decided] == [
        (1, True, "person", True),
        (2, True, "policy", False),  # the remembered answer, now the conversation's policy
    ]
    assert [(a.reason, a.remember) for a in elsewhere] == [("person", False)]


async def test_waiting_for_the_person_costs_the_block_nothing_and_silence_is_a_denial(
    database: str, tmp_path: Path, fake_openai: FakeOpenAI, notes_file: Path
) -> None:
    fake_openai.add_replies(reply([ADD_TWICE]), reply(answer="done"))
    never = asyncio.Event()

    async def slow_then_silent(request: ApprovalRequest) -> ApprovalAnswer:
        if request.arguments == "'one'":
            await asyncio.sleep(1.5)  # longer than the block may run
            return ApprovalAnswer(True)
        await never.wait()  # nobody answers
        raise AssertionError("unreachable")

    settings = settings_for(
        database,
        tmp_path,
        fake_openai,
        block_timeout_s=1.0,
        block_timeout_min_s=1.0,
        extension_time_budget_s=1.0,
        approval_timeout_s=2.0,
    )
    async with await Conversations.open(settings) as convs:
        conversation = await convs.create()
        finished = await turn(convs, conversation.id, "add two notes", slow_then_silent)
        decided = await convs.approvals(conversation.id)
        transcript = await convs.inspect(conversation.id)
    assert finished.status == "done"
    [block] = transcript.turns[0].iterations[0].blocks
    assert block.error is not None and "nobody answered the approval request in time" in block.error
    assert "TimeoutError" not in block.error  # neither the block's limit nor its budget ran out
    assert notes(notes_file) == ["one"]
    assert [(a.approved, a.reason) for a in decided] == [(True, "person"), (False, "timeout")]


async def test_replay_gives_back_what_was_decided_whatever_the_policy_says_now(
    database: str,
    tmp_path: Path,
    fake_openai: FakeOpenAI,
    notes_file: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    code = 'found = notes_search("")\nwrite_file("a.txt", "x")\nn = notes_add("one")'
    fake_openai.add_replies(reply([code], "{{n}}"))
    settings = settings_for(database, tmp_path, fake_openai, extension_policy=("notes_add=allow",))
    async with await Conversations.open(settings) as convs:
        conversation = await convs.create()
        assert (await turn(convs, conversation.id, "add one")).answer == "1"
        decided = await convs.approvals(conversation.id)
    # Only notes_add was decided (the others were allowed by default); its place counts every
    # extension call of the block, so it does not move when the policy rules more calls.
    assert [(a.function, a.block_position, a.seq, a.reason) for a in decided] == [
        ("notes_add", 0, 2, "policy")
    ]
    stricter = settings.replace(extension_policy=("notes_search=deny", "write=deny"))
    monkeypatch.setenv("NOTEBOOK_FILE", str(tmp_path / "replayed.json"))
    async with await Conversations.open(stricter) as convs:
        events = [event async for event in convs.replay(conversation.id)]
    finished = events[-1]
    assert isinstance(finished, ReplayFinished)
    assert (finished.ok, finished.mismatches) == (True, 0)
    assert notes(tmp_path / "replayed.json") == ["one"]
