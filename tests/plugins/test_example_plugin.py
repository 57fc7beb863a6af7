"""The example plugin (examples/cove-notes) installed like a third party's, used by conversations.

Real worker processes, the real ``openai`` client against the fake endpoint, both backends.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from cove.config import Settings
from cove.conversation import ApprovalAnswer, ApprovalRequest, Conversations
from cove.events import ReplayFinished, TurnFinished
from tests.fakes.openai_server import FakeOpenAI
from tests.scripted import reply

pytestmark = pytest.mark.slow  # sandbox workers started per test

ADD = 'count = notes_add("buy milk", tags=["home"])\nfound = notes_search("milk")'


def settings_for(database: str, tmp_path: Path, server: FakeOpenAI, **changes: Any) -> Settings:
    return Settings.load(
        env={},
        data_dir=tmp_path,
        db_path=database,
        base_url=server.base_url,
        api_key="sk-plugin-test",
        model="fake-model",
        request_timeout_s=5.0,
        max_retries=1,
        retry_base_delay_s=0.01,
        worker_pool_size=1,
        sandbox_libraries=False,
        **changes,
    )


class Person:
    """Answers approval requests from a script of answers, keeping what it was asked."""

    def __init__(self, *answers: ApprovalAnswer) -> None:
        self.answers = list(answers)
        self.asked: list[ApprovalRequest] = []

    async def __call__(self, request: ApprovalRequest) -> ApprovalAnswer:
        self.asked.append(request)
        return self.answers.pop(0)


async def turn(
    convs: Conversations,
    conversation_id: str,
    text: str,
    approver: Callable[[ApprovalRequest], Awaitable[ApprovalAnswer]] | None = None,
) -> TurnFinished:
    finished = None
    async for event in convs.send(conversation_id, text, approver=approver):
        if isinstance(event, TurnFinished):
            finished = event
    assert finished is not None
    return finished


def notes(path: Path) -> list[str]:
    return [n["text"] for n in json.loads(path.read_text())] if path.exists() else []


async def test_a_conversation_calls_the_plugin_asks_before_a_write_and_replays_the_answers(
    database: str,
    tmp_path: Path,
    fake_openai: FakeOpenAI,
    notes_file: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake_openai.add_replies(
        reply([ADD], "{{count}} note(s); found {{found}}"),
        reply(['count = notes_add("sell car")'], "added"),
        reply(answer="I could not add it: the person said no"),
    )
    person = Person(ApprovalAnswer(True), ApprovalAnswer(False))
    settings = settings_for(database, tmp_path, fake_openai)
    async with await Conversations.open(settings) as convs:
        conversation = await convs.create()
        first = await turn(convs, conversation.id, "note: buy milk", person)
        assert (first.status, first.answer) == ("done", "1 note(s); found ['buy milk']")
        second = await turn(convs, conversation.id, "note: sell car", person)
        assert second.answer == "I could not add it: the person said no"
        assert notes(notes_file) == ["buy milk"]
        # What the person was asked, and what the model was told of the refusal.
        assert [(r.function, r.effect, r.arguments) for r in person.asked] == [
            ("notes_add", "write", "'buy milk', tags=['home']"),
            ("notes_add", "write", "'sell car'"),
        ]
        told = fake_openai.requests[-1]["messages"][-1]["content"]
        assert "PermissionError: notes_add() was not run: its effect is 'write' and the " in told
        assert "person denied it" in told
        # The plugin's documentation is in the system prompt.
        prompt = fake_openai.requests[0]["messages"][0]["content"]
        assert "- notes_add(text: str, tags: list[str] | None = None) -> int" in prompt
        assert "    text: The note, at most 2,000 characters." in prompt
        assert "- notes_search(text: str = '') -> list[str]" in prompt
        decided = await convs.approvals(conversation.id)
        places = [(a.turn_position, a.iteration_position, a.block_position, a.seq) for a in decided]
        assert places == [(1, 0, 0, 0), (2, 0, 0, 0)]
        assert [(a.approved, a.reason) for a in decided] == [(True, "person"), (False, "person")]

        # Replay: the recorded answers, nobody asked; a fresh notebook as the world it runs in.
        monkeypatch.setenv("NOTEBOOK_FILE", str(tmp_path / "replayed.json"))
        events = [event async for event in convs.replay(conversation.id)]
        assert len(person.asked) == 2
        finished = events[-1]
        assert isinstance(finished, ReplayFinished)
        assert (finished.ok, finished.mismatches, finished.blocks) == (True, 0, 2)
        assert notes(tmp_path / "replayed.json") == ["buy milk"]  # only the approved call ran


async def test_a_conversation_keeps_its_extensions_when_reopened_forked_or_reconfigured(
    database: str, tmp_path: Path, fake_openai: FakeOpenAI, notes_file: Path
) -> None:
    search = reply(['found = notes_search("")'], "{{found}}")
    fake_openai.add_replies(search, search, search)
    await asyncio.to_thread(notes_file.write_text, json.dumps([{"text": "old note"}]))
    every = settings_for(database, tmp_path, fake_openai)
    async with await Conversations.open(every) as convs:
        with_notes = await convs.create()
        assert (await turn(convs, with_notes.id, "my notes?")).answer == "['old note']"
    fewer = every.replace(extensions=("core", "files", "llm"))
    async with await Conversations.open(fewer) as convs:
        # Created before the setting changed: it keeps its extensions, and so does its fork.
        assert (await turn(convs, with_notes.id, "again?")).answer == "['old note']"
        fork = await convs.fork(with_notes.id, 1)
        assert (await turn(convs, fork.id, "in the fork?")).answer == "['old note']"
        without = await convs.create()
    async with await Conversations.open(fewer) as convs:
        fake_openai.add_replies(search, reply(answer="no notes extension here"))
        finished = await turn(convs, without.id, "my notes?")
        assert finished.answer == "no notes extension here"
        told = fake_openai.requests[-1]["messages"][-1]["content"]
        assert "NameError: name 'notes_search' is not defined" in told
        assert "notes_search" not in fake_openai.requests[-1]["messages"][0]["content"]
