"""The bot's pace: python-telegram-bot's ``AIORateLimiter``, told what it does.

Every Bot API call but ``getUpdates`` passes the limiter: calls into chats are held under the
overall rate and, for groups, the per-group rate; a flood-control answer (HTTP 429,
``RetryAfter``) pauses every call for the time Telegram asks, then the call is sent again, up to
``FLOOD_RETRIES`` times. ``Limiter`` counts the calls and the flood waits, remembers when calls
went out (for measurements) and reports each flood-control answer as a failed call.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Callable, Coroutine
from typing import Any

from telegram.error import RetryAfter
from telegram.ext import AIORateLimiter

from cove.config import TelegramSettings

#: How often one call is sent again after flood-control answers before it fails.
FLOOD_RETRIES = 9
Result = bool | dict[str, Any] | list[dict[str, Any]]


class Limiter(AIORateLimiter):
    """``AIORateLimiter`` at the settings' rates, counting what it does."""

    def __init__(self, settings: TelegramSettings) -> None:
        super().__init__(
            overall_max_rate=settings.rate_per_s,
            overall_time_period=1,
            group_max_rate=settings.group_rate_per_min,
            group_time_period=60,
            max_retries=FLOOD_RETRIES,
        )
        self.calls = 0  # Bot API calls sent through the limiter, repeats included
        self.flood_waits = 0
        #: Told the method of each call Telegram answered with flood control.
        self.on_flood: Callable[[str], object] | None = None
        #: When recent calls went out (loop time), for measurements.
        self.sent_at: collections.deque[float] = collections.deque(maxlen=10_000)

    async def process_request(
        self,
        callback: Callable[..., Coroutine[Any, Any, Result]],
        args: Any,
        kwargs: dict[str, Any],
        endpoint: str,
        data: dict[str, Any],
        rate_limit_args: int | None,
    ) -> Result:
        """Send one call under the limits, counting each attempt and each flood wait."""

        async def counted(*call_args: Any, **call_kwargs: Any) -> Result:
            self.calls += 1
            self.sent_at.append(asyncio.get_running_loop().time())
            try:
                return await callback(*call_args, **call_kwargs)
            except RetryAfter:
                self.flood_waits += 1
                if self.on_flood is not None:
                    self.on_flood(endpoint)
                raise

        return await super().process_request(counted, args, kwargs, endpoint, data, rate_limit_args)
