"""Fixtures of the MCP tests: the fake model endpoint and a ``Conversations`` on ``tmp_path``
aimed at it. (The SDK's client holds a task group, which must be left in the task that entered
it: tests enter it themselves, ``async with Client(build_server(convs))``.)"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from cove.conversation import Conversations
from tests.fakes.openai_server import FakeOpenAI
from tests.scripted import settings_for

FAKE_KEY = "sk-mcp-test-NEVER-SHOWN-5150"


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


@pytest.fixture
async def convs(tmp_path: Path, fake: FakeOpenAI) -> AsyncIterator[Conversations]:
    """Conversations on ``tmp_path`` whose model is the fake endpoint (real ``openai`` client)."""
    settings = settings_for(
        tmp_path,
        base_url=fake.base_url,
        api_key=FAKE_KEY,
        model="fake-model",
        max_iterations=4,
        block_timeout_max_s=600,
    )
    async with Conversations.open(settings) as opened:
        yield opened
