"""Fixtures for the Telegram channel: the fake Bot API and the real bot pointed at it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from cove.channels.telegram import TelegramChannel
from cove.config import Settings, TelegramSettings
from cove.conversation import Conversations, LLMFactory, scripted_factory
from cove.engine.llm import Completion
from cove.engine.llm.scripted import ScriptedClient
from tests.fakes.telegram_server import FakeTelegram
from tests.scripted import settings_for

ALLOWED = 1001  # a user id (and private chat id) on the allow-list
OTHER = 1002  # a second allowed user
GROUP = -100500  # an allowed group chat
ALLOW = (str(ALLOWED), str(OTHER), str(GROUP))  # the allow-list the bot starts with


@dataclass
class Bot:
    """A running bot: its channel, its conversations and the fake it talks to."""

    channel: TelegramChannel
    convs: Conversations
    tg: FakeTelegram


def telegram_for(tg: FakeTelegram, **changes: Any) -> TelegramSettings:
    """Telegram settings aimed at the fake server, with fast polling and no pacing to speak of."""
    values: dict[str, Any] = {
        "token": tg.token,
        "api_url": tg.api_url,
        "allow": ALLOW,
        "poll_timeout_s": 1.0,
        "edit_interval_s": 0.05,
        "group_edit_interval_s": 0.05,
        "rate_per_s": 1000.0,
        "chat_rate_per_s": 1000.0,
        "group_rate_per_min": 60_000.0,
        **changes,
    }
    return TelegramSettings(**values)


@pytest.fixture
def tg() -> Iterator[FakeTelegram]:
    """The fake Bot API server."""
    with FakeTelegram() as server:
        yield server


class GatedModel:
    """A scripted model whose ``gated_call``-th reply waits until the test opens the gate."""

    def __init__(self, replies: list[str], gated_call: int = 2) -> None:
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
        return lambda settings, model: self


BotFactory = Callable[..., AbstractAsyncContextManager[Bot]]


@pytest.fixture
def bot(tmp_path: Path, tg: FakeTelegram) -> BotFactory:
    """``async with bot(replies or factory, delay_s=.., settings=.., **changes) as b``.

    ``replies=None`` uses the real OpenAI client against the endpoint ``settings`` names. The
    bot runs with ``telegram`` when given, else ``telegram_for(tg, **changes)``.
    """

    @asynccontextmanager
    async def start(
        replies: Sequence[Any] | LLMFactory | None = (),
        *,
        delay_s: float = 0.0,
        settings: Settings | None = None,
        telegram: TelegramSettings | None = None,
        **changes: Any,
    ) -> AsyncIterator[Bot]:
        factory: LLMFactory | None = None  # None: the real OpenAI client (``settings``' endpoint)
        if callable(replies):
            factory = replies
        elif replies is not None:
            factory = scripted_factory(list(replies), delay_s=delay_s)
        async with await Conversations.open(
            settings or settings_for(tmp_path), llm_factory=factory
        ) as convs:
            channel = TelegramChannel(convs, telegram or telegram_for(tg, **changes))
            await channel.start()
            try:
                yield Bot(channel, convs, tg)
            finally:
                await channel.stop()

    return start
