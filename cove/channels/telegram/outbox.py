"""Everything the bot says goes through ``Outbox``: paced, retried, formatted with a fallback.

- Pace and flood control: the bot's ``Limiter`` (python-telegram-bot's ``AIORateLimiter``)
  spaces the calls under Telegram's limits and waits out a ``RetryAfter`` (HTTP 429) before
  sending again; nothing is dropped.
- Network errors and time-outs are retried with back-off a few times.
- Formatting: an answer is rendered to Telegram HTML; when Telegram refuses it ("can't parse
  entities") the same piece is sent again as plain text.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from telegram import Bot, InlineKeyboardMarkup, InputFile, LinkPreviewOptions, Message
from telegram.constants import ChatAction, ParseMode
from telegram.error import BadRequest, NetworkError, RetryAfter, TimedOut

from cove.channels.telegram.limiter import Limiter
from cove.channels.telegram.markup import split_text, to_html

log = logging.getLogger("cove.telegram")
T = TypeVar("T")

NETWORK_ATTEMPTS = 5
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


def _unparsable(exc: BadRequest) -> bool:
    return "can't parse entities" in exc.message.lower() or "parse" in exc.message.lower()


class Outbox:
    """Sends, edits, chat actions, photos and documents for one bot.

    ``limiter`` is the one the bot was built with: the outbox reads its counts and has it report
    flood-control answers through ``on_error`` as well.
    """

    def __init__(self, bot: Bot, limiter: Limiter) -> None:
        self.bot = bot
        self.limiter = limiter
        self.on_error: Callable[[str], object] | None = None  # told each failed call's method
        limiter.on_flood = self._failed

    @property
    def flood_waits(self) -> int:
        """How often Telegram answered with flood control (each waited out, then sent again)."""
        return self.limiter.flood_waits

    def _failed(self, method: str) -> None:
        if self.on_error is not None:
            self.on_error(method)

    async def call(self, make: Callable[[], Awaitable[T]], *, method: str = "other") -> T:
        """Run one Bot API call (paced, flood control waited out), retrying network errors.

        Raises:
            BadRequest / Forbidden: Telegram refused the call for good.
            RetryAfter: Still under flood control after the limiter's retries.
            NetworkError: Still failing after the retries.
        """
        attempt = 0
        while True:
            attempt += 1
            try:
                return await make()
            except Exception as exc:
                if not isinstance(exc, RetryAfter):  # the limiter reported those already
                    self._failed(method)
                if not _retryable(exc) or attempt >= NETWORK_ATTEMPTS:
                    raise
                log.warning("Bot API call failed (%s); retrying", type(exc).__name__)
            await asyncio.sleep(0.5 * 2 ** (attempt - 1))

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

    async def plain(
        self, chat: ChatRef, text: str, keyboard: InlineKeyboardMarkup | None = None
    ) -> Message:
        """Send plain text (no formatting at all), with an inline ``keyboard`` under it."""
        return await self._send(chat, text[:MAX_TEXT], None, keyboard)

    async def edit(self, chat: ChatRef, message_id: int, text: str) -> None:
        """Replace a message's text (plain, its inline keyboard gone); an unchanged or
        vanished message is no error."""
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

    async def _send(
        self,
        chat: ChatRef,
        text: str,
        mode: str | None,
        keyboard: InlineKeyboardMarkup | None = None,
    ) -> Message:
        return await self.call(
            lambda: self.bot.send_message(
                chat.chat_id,
                text,
                parse_mode=mode,
                message_thread_id=chat.thread_id,
                link_preview_options=NO_PREVIEW,
                reply_markup=keyboard,
            ),
            method="sendMessage",
        )


def _retryable(exc: Exception) -> bool:
    """A network error or a time-out (a ``BadRequest`` is a ``NetworkError`` too, but final)."""
    return isinstance(exc, (TimedOut, NetworkError)) and not isinstance(exc, BadRequest)
