"""Everything the bot says goes through ``Outbox``: paced, retried, formatted with a fallback.

- Flood control: a ``RetryAfter`` (HTTP 429) waits the time Telegram asks for, then sends
  again; nothing is dropped.
- Network errors and time-outs are retried with back-off a few times.
- Formatting: an answer is rendered to Telegram HTML; when Telegram refuses it ("can't parse
  entities") the same piece is sent again as plain text.
- Pace: calls are spaced to stay under Telegram's overall limit (about 30 messages a second).
"""

from __future__ import annotations

import asyncio
import collections
import datetime as dt
import logging
import warnings
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from telegram import Bot, InputFile, LinkPreviewOptions, Message
from telegram.constants import ChatAction, ParseMode
from telegram.error import BadRequest, NetworkError, RetryAfter, TimedOut

from cove.channels.telegram.markup import split_text, to_html

log = logging.getLogger("cove.telegram")
T = TypeVar("T")

NETWORK_ATTEMPTS = 5
FLOOD_ATTEMPTS = 10
MAX_TEXT = 4096
NO_PREVIEW = LinkPreviewOptions(is_disabled=True)


@dataclass(frozen=True)
class ChatRef:
    """Where a message goes: a chat, and the forum topic within it (None: the chat itself)."""

    chat_id: int
    thread_id: int | None = None
    group: bool = False

    @property
    def key(self) -> str:
        """The chat's external id in cove: ``"<chat>"`` or ``"<chat>:<topic>"``."""
        return str(self.chat_id) if self.thread_id is None else f"{self.chat_id}:{self.thread_id}"

    @property
    def owner(self) -> str:
        """The principal the chat's conversations belong to."""
        return f"telegram:{self.key}"


class Pace:
    """A token bucket: at most ``rate`` calls a second on average, ``burst`` at once.

    Callers take turns under a lock and the clock is read after every wait, so a busy event
    loop that wakes late never releases a pile of calls together.
    """

    def __init__(self, rate: float, burst: int = 3) -> None:
        self.rate = rate
        self.burst = float(burst)
        self._tokens = float(burst)
        self._at = 0.0
        self._lock = asyncio.Lock()

    async def wait(self) -> None:
        """Return when the next call may go."""
        loop = asyncio.get_running_loop()
        async with self._lock:
            while True:
                now = loop.time()
                self._tokens = min(self.burst, self._tokens + (now - self._at) * self.rate)
                self._at = now
                if self._tokens >= 1.0:
                    self._tokens -= 1.0
                    return
                await asyncio.sleep((1.0 - self._tokens) / self.rate)


def retry_seconds(exc: RetryAfter) -> float:
    """The wait Telegram asked for, in seconds (an int or a timedelta, by library version)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        value = exc.retry_after
    return value.total_seconds() if isinstance(value, dt.timedelta) else float(value)


def _unparsable(exc: BadRequest) -> bool:
    return "can't parse entities" in exc.message.lower() or "parse" in exc.message.lower()


class Outbox:
    """Sends, edits, chat actions, photos and documents for one bot."""

    def __init__(self, bot: Bot, rate: float) -> None:
        self.bot = bot
        self.pace = Pace(rate)
        self.calls = 0  # Bot API calls made (attempts included)
        self.flood_waits = 0
        self.on_error: Callable[[str], object] | None = None  # told each failed call's method
        #: When recent paced calls went out (loop time), for measurements.
        self.sent_at: collections.deque[float] = collections.deque(maxlen=10_000)

    async def call(
        self, make: Callable[[], Awaitable[T]], *, method: str = "other", paced: bool = True
    ) -> T:
        """Run one Bot API call, honouring ``RetryAfter`` and retrying network errors.

        Raises:
            BadRequest / Forbidden: Telegram refused the call for good.
            NetworkError: Still failing after the retries.
        """
        tries = {"network": 0, "flood": 0}
        while True:
            if paced:
                await self.pace.wait()
                self.sent_at.append(asyncio.get_running_loop().time())
            self.calls += 1
            try:
                return await make()
            except Exception as exc:
                if self.on_error is not None:
                    self.on_error(method)
                delay = self._retry_delay(exc, tries)
                if delay is None:
                    raise
            await asyncio.sleep(delay)

    def _retry_delay(self, exc: Exception, tries: dict[str, int]) -> float | None:
        """How long to wait before trying again; None: give up (re-raise)."""
        if isinstance(exc, RetryAfter):
            tries["flood"] += 1
            self.flood_waits += 1
            return retry_seconds(exc) if tries["flood"] < FLOOD_ATTEMPTS else None
        if isinstance(exc, BadRequest) or not isinstance(exc, (TimedOut, NetworkError)):
            return None
        tries["network"] += 1
        if tries["network"] >= NETWORK_ATTEMPTS:
            return None
        log.warning("Bot API call failed (%s); retrying", type(exc).__name__)
        return float(0.5 * 2 ** (tries["network"] - 1))

    async def say(self, chat: ChatRef, html: str, plain: str | None = None) -> Message:
        """Send one message of ready HTML; ``plain`` (or the HTML as text) if it is refused."""
        try:
            return await self._send(chat, html[:MAX_TEXT], ParseMode.HTML)
        except BadRequest as exc:
            if not _unparsable(exc):
                raise
            return await self._send(chat, (plain or html)[:MAX_TEXT], None)

    async def answer(self, chat: ChatRef, markdown: str) -> list[Message]:
        """Send a Markdown answer: split under the limit, formatted, plain when refused."""
        pieces = split_text(markdown)
        sent = []
        for index, piece in enumerate(pieces):
            marker = f"\n\n({index + 1}/{len(pieces)})" if len(pieces) > 1 else ""
            sent.append(await self.say(chat, to_html(piece) + marker, piece + marker))
        return sent

    async def plain(self, chat: ChatRef, text: str) -> Message:
        """Send plain text (no formatting at all)."""
        return await self._send(chat, text[:MAX_TEXT], None)

    async def edit(self, chat: ChatRef, message_id: int, text: str) -> None:
        """Replace a message's text (plain); an unchanged or vanished message is no error."""
        try:
            await self.call(
                lambda: self.bot.edit_message_text(
                    text[:MAX_TEXT], chat_id=chat.chat_id, message_id=message_id
                ),
                method="editMessageText",
            )
        except BadRequest as exc:
            if "not modified" not in exc.message and "not found" not in exc.message:
                raise

    async def typing(self, chat: ChatRef) -> None:
        """Show "typing…" in the chat (for about five seconds)."""
        await self.call(
            lambda: self.bot.send_chat_action(
                chat.chat_id, ChatAction.TYPING, message_thread_id=chat.thread_id
            ),
            method="sendChatAction",
            paced=False,
        )

    async def document(
        self, chat: ChatRef, name: str, data: bytes, caption: str | None = None
    ) -> Message:
        """Send a file as a document."""
        return await self.call(
            lambda: self.bot.send_document(
                chat.chat_id,
                InputFile(data, filename=name),
                caption=caption,
                message_thread_id=chat.thread_id,
            ),
            method="sendDocument",
        )

    async def photo(
        self, chat: ChatRef, name: str, data: bytes, caption: str | None = None
    ) -> Message:
        """Send an image as a photo (Telegram shows it in the chat)."""
        return await self.call(
            lambda: self.bot.send_photo(
                chat.chat_id,
                InputFile(data, filename=name),
                caption=caption,
                message_thread_id=chat.thread_id,
            ),
            method="sendPhoto",
        )

    async def _send(self, chat: ChatRef, text: str, mode: str | None) -> Message:
        return await self.call(
            lambda: self.bot.send_message(
                chat.chat_id,
                text,
                parse_mode=mode,
                message_thread_id=chat.thread_id,
                link_preview_options=NO_PREVIEW,
            ),
            method="sendMessage",
        )
