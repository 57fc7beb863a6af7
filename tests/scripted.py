"""Helpers shared by the tests: settings on a temporary data directory, scripted model replies."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cove.config import Settings
from cove.conversation import LLMFactory
from cove.engine.llm import Completion
from cove.engine.llm.scripted import ScriptedClient, ScriptedReply
from tests.backends import database_for


def settings_for(tmp_path: Path, **changes: Any) -> Settings:
    """Settings whose data lives under ``tmp_path``, with one pre-started worker.

    ``changes`` are flat keys, routed to their section: ``settings_for(tmp, max_iterations=3)``.
    The sandbox's data libraries are off unless asked for (``sandbox_libraries=True``): loading
    them costs every zygote a second or more, which tests of other layers do not need.
    """
    defaults: dict[str, Any] = {"worker_pool_size": 1, "sandbox_libraries": False}
    database = database_for(tmp_path)
    if database is not None:  # the test runs on PostgreSQL (tests/backends.py)
        defaults["db_path"] = database
    return Settings.load(env={}, data_dir=tmp_path, **{**defaults, **changes})


def reply(
    code: list[str] | None = None, answer: str | None = None, *, thinking: str = "t", **extra: Any
) -> str:
    """One model reply in cove's JSON protocol (``extra`` adds fields such as ``title``)."""
    body: dict[str, Any] = {"thinking": thinking, **extra}
    if code is not None:
        body["code"] = code
    if answer is not None:
        body["answer"] = answer
    return json.dumps(body)


class GatedModel:
    """A scripted model whose ``gated_call``-th call waits until the test opens ``gate``;
    ``calls`` counts the calls made, the waiting one included."""

    def __init__(self, replies: Sequence[ScriptedReply], gated_call: int = 2) -> None:
        self.inner = ScriptedClient(replies)
        self.gated_call = gated_call
        self.model = self.inner.model
        self.gate = asyncio.Event()
        self.calls = 0

    async def complete(self, messages: Any, **kwargs: Any) -> Completion:
        self.calls += 1
        if self.calls == self.gated_call:
            await self.gate.wait()
        return await self.inner.complete(messages, **kwargs)

    async def aclose(self) -> None:
        await self.inner.aclose()

    def factory(self) -> LLMFactory:
        """An LLM factory whose one client is this model."""
        return lambda settings, model: self
