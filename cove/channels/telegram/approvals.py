"""Approval in Telegram: an extension call the policy asks about, answered on an inline keyboard.

A turn the bot runs asks through ``ChatApprovals.approver(chat, sender)``: a plain-text
message naming the call (its arguments come from sandbox code: never parsed as markup) with
the buttons Approve, Deny and Always (approve, and remember for the conversation). A press
(a ``callback_query``) answers it when it comes from the person who sent the turn's message,
or from a user the allow-list names by id or @username; anyone else is told no and changes
nothing. The first answer wins; the message is then edited to say how it was decided, its
keyboard gone. When the turn stops waiting (``approval_timeout_s`` without an answer, or the
turn was cancelled) the message says so; a question Telegram refuses to deliver is a denial
(nobody could be asked). The turn records each verdict as it records every verdict.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from telegram import InlineKeyboardButton, InlineKeyboardMarkup, Update
from telegram.error import TelegramError
from telegram.ext import ContextTypes

from cove.channels.telegram.outbox import ChatRef, Outbox
from cove.conversation import ApprovalAnswer, ApprovalRequest, Approver

log = logging.getLogger("cove.telegram")

#: The callback data of the buttons: ``ap:<id>:<choice>`` (Telegram allows 64 bytes).
PREFIX = "ap:"
CHOICES = {"y": ApprovalAnswer(True), "n": ApprovalAnswer(False), "a": ApprovalAnswer(True, True)}
SAID = {
    "y": "✅ Approved.",
    "n": "🚫 Denied.",
    "a": "✅ Approved, and always in this conversation.",
    "timeout": "⌛ Nobody answered in time: denied.",
    "withdrawn": "🚫 The turn stopped waiting: denied.",
}
NOT_YOURS = "Only the person who sent the message can answer this."
GONE = "This request is no longer waiting for an answer."


@dataclass
class _Waiting:
    """A call waiting for a press."""

    chat: ChatRef
    sender: int | None
    text: str
    answered: asyncio.Future[ApprovalAnswer]
    #: The question's message, once Telegram has said it was sent (a press may come first).
    message: asyncio.Future[int]


def question(request: ApprovalRequest) -> str:
    """The message asking about ``request`` (plain text)."""
    return (
        f"Approval needed: {request.function} (from {request.extension}) wants to "
        f"{request.effect}:\n\n{request.function}({request.arguments})"
    )


def keyboard(approval_id: str) -> InlineKeyboardMarkup:
    """The buttons of one request."""
    return InlineKeyboardMarkup(
        [
            [
                InlineKeyboardButton("Approve", callback_data=f"{PREFIX}{approval_id}:y"),
                InlineKeyboardButton("Deny", callback_data=f"{PREFIX}{approval_id}:n"),
                InlineKeyboardButton("Always", callback_data=f"{PREFIX}{approval_id}:a"),
            ]
        ]
    )


class ChatApprovals:
    """The approval requests of the bot's turns, and the presses answering them."""

    def __init__(
        self,
        outbox: Outbox,
        timeout_s: float,
        may_answer: Callable[[Update], bool],
        spawn: Callable[[Coroutine[Any, Any, None]], None],
    ) -> None:
        """Ask through ``outbox``; ``timeout_s`` is the turns' approval timeout;
        ``may_answer`` says whether a press's user is on the allow-list as a user; ``spawn``
        runs background work (editing a message once the turn stopped waiting)."""
        self._outbox = outbox
        self._timeout_s = timeout_s
        self._may_answer = may_answer
        self._spawn = spawn
        self._waiting: dict[str, _Waiting] = {}

    def approver(self, chat: ChatRef, sender: int | None) -> Approver:
        """The approver of a turn started in ``chat`` by the user ``sender``."""

        async def ask(request: ApprovalRequest) -> ApprovalAnswer:
            return await self._ask(chat, sender, request)

        return ask

    async def _ask(
        self, chat: ChatRef, sender: int | None, request: ApprovalRequest
    ) -> ApprovalAnswer:
        approval_id = secrets.token_urlsafe(9)
        text = question(request)
        asked_at = time.monotonic()
        loop = asyncio.get_running_loop()
        answered: asyncio.Future[ApprovalAnswer] = loop.create_future()
        waiting = _Waiting(chat, sender, text, answered, loop.create_future())
        # Waiting before the question goes out: a press can come before Telegram's answer.
        self._waiting[approval_id] = waiting
        try:
            try:
                sent = await self._outbox.plain(chat, text, keyboard(approval_id))
            except TelegramError as exc:  # blocked, chat gone, …: nobody can be asked
                log.warning("could not ask for approval in chat %s: %s", chat.key, exc)
                return ApprovalAnswer(False, reason="nobody")
            waiting.message.set_result(sent.message_id)
            return await asyncio.shield(answered)
        except asyncio.CancelledError:
            if not answered.done() and waiting.message.done():
                late = time.monotonic() - asked_at >= self._timeout_s * 0.95
                self._spawn(self._settle(waiting, "timeout" if late else "withdrawn"))
            raise
        finally:
            self._waiting.pop(approval_id, None)
            if not waiting.message.done():
                waiting.message.cancel()  # never sent: nothing to edit

    async def on_press(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        """A ``callback_query`` from a button: the answer, when its user may give it."""
        query = update.callback_query
        if query is None or not (query.data or "").startswith(PREFIX):
            return
        approval_id, _, choice = query.data[len(PREFIX) :].rpartition(":")  # type: ignore[index]
        waiting = self._waiting.get(approval_id)
        chat = update.effective_chat
        if waiting is None or choice not in CHOICES or chat is None:
            await self._tell(lambda: query.answer(GONE))
            return
        user = query.from_user.id
        mine = chat.id == waiting.chat.chat_id and (
            user == waiting.sender or self._may_answer(update)
        )
        if not mine:
            log.warning("refused an approval press by user %s (not the sender)", user)
            await self._tell(lambda: query.answer(NOT_YOURS, show_alert=True))
            return
        if waiting.answered.done():
            await self._tell(lambda: query.answer(GONE))
            return
        waiting.answered.set_result(CHOICES[choice])
        await self._tell(lambda: query.answer(SAID[choice]))
        await self._settle(waiting, choice)

    async def _settle(self, waiting: _Waiting, outcome: str) -> None:
        """Edit the question to say how it was decided (its keyboard goes)."""
        await asyncio.wait((waiting.message,))  # its own cancellation still goes through
        if waiting.message.cancelled():
            return  # the question was never sent
        message_id = waiting.message.result()
        try:
            await self._outbox.edit(waiting.chat, message_id, f"{waiting.text}\n\n{SAID[outcome]}")
        except TelegramError as exc:
            log.warning("could not mark an approval request decided: %s", type(exc).__name__)

    async def _tell(self, answering: Callable[[], Coroutine[Any, Any, bool]]) -> None:
        """Answer a press (Telegram shows it to the presser); a failure only costs the toast."""
        try:
            await self._outbox.call(answering, method="answerCallbackQuery")
        except TelegramError as exc:
            log.warning("could not answer a button press: %s", type(exc).__name__)
