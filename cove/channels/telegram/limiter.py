"""The bot's pace, kept in the database so that every node sharing it keeps it together.

Before each Bot API call (each attempt, repeats included; ``getUpdates`` never passes here) the
``Limiter`` takes a send slot (``Conversations.take_send_slot``): the bot's own key at
``rate_per_s`` for every call, and the chat's key for a call into a chat — one call per
``1 / chat_rate_per_s`` seconds in a private chat, per ``60 / group_rate_per_min`` in a group
(Telegram gives groups negative ids); a chat action ("typing…") takes no chat slot. A slot is
never taken more than ``HORIZON_S`` ahead, so a node that dies holds others back for that long
at most. Flood control stays python-telegram-bot's ``AIORateLimiter``: an HTTP 429
(``RetryAfter``) pauses every call of this process for the time Telegram asks, then the call is
sent again, up to ``FLOOD_RETRIES`` times. ``Limiter`` counts the calls and the flood waits,
remembers when calls went out (for measurements) and reports each flood-control answer as a
failed call.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any

from telegram.error import RetryAfter
from telegram.ext import AIORateLimiter

from cove.config import TelegramSettings
from cove.conversation import SendSlot

log = logging.getLogger("cove.telegram")

#: How often one call is sent again after flood-control answers before it fails.
FLOOD_RETRIES = 9
#: How far ahead of now a slot may be taken (and so how long a dead node's slots hold others).
HORIZON_S = 2.0
#: The calls that take no chat slot (they send nothing a reader sees).
UNPACED_IN_CHAT = frozenset({"sendChatAction"})
Result = bool | dict[str, Any] | list[dict[str, Any]]
TakeSlot = Callable[[Sequence[tuple[str, float]], float], Awaitable[SendSlot]]


class Limiter(AIORateLimiter):
    """Paces the bot's calls through ``take_slot`` and waits out flood control, counting both.

    Slots are times by the store's clock, the wall clock (``time.time``) of every node.

    ``bot_id`` names the bot's keys (``telegram:<bot>`` and ``telegram:<bot>:<chat>``), so bots
    sharing a database keep their own paces.
    """

    def __init__(self, settings: TelegramSettings, bot_id: str, take_slot: TakeSlot) -> None:
        # No pace of the library's own (rates 0): the shared slots pace; it waits out 429s.
        super().__init__(overall_max_rate=0, group_max_rate=0, max_retries=FLOOD_RETRIES)
        self.settings = settings
        self.bot_key = f"telegram:{bot_id}"
        self.take_slot = take_slot
        self.calls = 0  # Bot API calls sent through the limiter, repeats included
        self.flood_waits = 0
        #: Told the method of each call Telegram answered with flood control.
        self.on_flood: Callable[[str], object] | None = None
        #: When recent calls went out (loop time), for measurements.
        self.sent_at: collections.deque[float] = collections.deque(maxlen=10_000)

    def keys(self, endpoint: str, chat_id: object) -> list[tuple[str, float]]:
        """The slot keys of one call: ``(key, interval_s)``; a rate of 0 is no key."""
        keys = []
        if isinstance(chat_id, int | str) and endpoint not in UNPACED_IN_CHAT:
            group = str(chat_id).startswith("-")
            per_s = (
                self.settings.group_rate_per_min / 60 if group else self.settings.chat_rate_per_s
            )
            if per_s > 0:
                keys.append((f"{self.bot_key}:{chat_id}", 1 / per_s))
        if self.settings.rate_per_s > 0:
            keys.append((self.bot_key, 1 / self.settings.rate_per_s))
        return keys

    async def pace(self, endpoint: str, chat_id: object) -> float | None:
        """Wait for this call's slot: taken, then waited for; asked again when booked up. The
        slot's time (None: the call takes no slot)."""
        keys = self.keys(endpoint, chat_id)
        if not keys:
            return None
        while True:
            slot = await self.take_slot(keys, HORIZON_S)
            # Until the slot's time, not for ``wait_s`` from now: the answer took time to come.
            delay = slot.at - time.time()
            if delay > 0:
                await asyncio.sleep(delay)
            if slot.taken:
                return slot.at

    async def process_request(
        self,
        callback: Callable[..., Coroutine[Any, Any, Result]],
        args: Any,
        kwargs: dict[str, Any],
        endpoint: str,
        data: dict[str, Any],
        rate_limit_args: int | None,
    ) -> Result:
        """Send one call in its slot, counting each attempt and each flood wait."""

        async def counted(*call_args: Any, **call_kwargs: Any) -> Result:
            chat_id = data.get("chat_id")
            slot_at = await self.pace(endpoint, chat_id)
            if slot_at is not None:
                log.debug(
                    "Bot API call in its slot",
                    extra={"fields": {"method": endpoint, "chat": chat_id, "slot_at": slot_at}},
                )
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
