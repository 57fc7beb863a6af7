"""Fixtures for the Telegram channel: the fake Bot API and the real bot pointed at it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from cove.channels.telegram import TelegramChannel
from cove.config import Settings, TelegramSettings
from cove.conversation import Conversations, LLMFactory, scripted_factory
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
