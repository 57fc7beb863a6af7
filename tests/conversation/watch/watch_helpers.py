"""Shared pieces for the watch tests: settings, replies and a model that waits at a gate."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from cove.config import ModelSettings
from cove.conversation import LLMFactory
from cove.engine.llm import Completion, LLMClient
from cove.engine.llm.scripted import ScriptedClient
from cove.events import (
    BlockFinished,
    BlockStarted,
    Event,
    IterationStarted,
    ModelReply,
    Nudge,
    SandboxRestarted,
    TurnFinished,
    TurnStarted,
    VarsChanged,
)
from tests.scripted import reply

DURABLE = (
    TurnStarted,
    IterationStarted,
    ModelReply,
    BlockStarted,
    BlockFinished,
    VarsChanged,
    TurnFinished,
    Nudge,  # kept as turn notes
    SandboxRestarted,
)


def three_iterations() -> list[str]:
    return [
        reply(["a = 1", "a + 1"]),
        reply(["b = a * 10"], title="Counting things"),
        reply([], "a={{a}} b={{b}}"),
    ]


class GatedClient:
    """A scripted model whose call number ``n`` waits until ``release(n)``."""

    def __init__(self, replies: Sequence[str], gates: Sequence[int] = ()) -> None:
        self.inner = ScriptedClient(replies)
        self.model = self.inner.model
        self.calls = 0
        self.reached = {n: asyncio.Event() for n in gates}
        self._open = {n: asyncio.Event() for n in gates}

    def release(self, n: int) -> None:
        self._open[n].set()

    async def complete(self, messages: Any, **kwargs: Any) -> Completion:
        n = self.calls
        self.calls += 1
        if n in self._open:
            self.reached[n].set()
            await self._open[n].wait()
        return await self.inner.complete(messages, **kwargs)

    async def aclose(self) -> None:
        await self.inner.aclose()

    def factory(self) -> LLMFactory:
        def make(settings: ModelSettings, model: str) -> LLMClient:
            return self

        return make


def kinds(events: Sequence[Event]) -> list[tuple[str, int]]:
    return [(e.type, e.seq) for e in events]


def durable(events: Sequence[Event]) -> list[Event]:
    return [e for e in events if isinstance(e, DURABLE)]
