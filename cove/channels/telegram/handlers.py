"""What the bot does with an update: the gate, messages and files, and running the commands."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from telegram import Message, Update
from telegram.ext import ContextTypes

from cove.channels.telegram.approvals import ChatApprovals
from cove.channels.telegram.inbox import Delivery, Inbox
from cove.channels.telegram.outbox import ChatRef, Outbox
from cove.channels.telegram.roster import Roster, chat_of, is_allowed, is_allowed_user
from cove.channels.telegram.turns import TurnView, safe_name
from cove.config import TelegramSettings
from cove.conversation import Approver, Conversations, TurnHandle
from cove.errors import Busy, CoveError, DeliveryTaken
from cove.events import Event, TurnQueued, TurnStarted

log = logging.getLogger("cove.telegram")

REFUSAL = (
    "Sorry, this bot only talks to the people it was set up for. "
    "Nothing you send here is run or kept."
)
Handler = Callable[[Update, ContextTypes.DEFAULT_TYPE], Coroutine[Any, Any, None]]
Command = Callable[[ChatRef, list[str]], Awaitable[None]]
ELSEWHERE = "⏳ Another cove node is running a turn in this conversation; this message runs next."
NOT_RUN_STOPPING = (
    "The bot is stopping and did not run this message: send it again once it is back."
)
#: Told when a message taken over from a node that died had its turn started there.
CUT_SHORT = (
    "⚠️ The cove node running this message stopped as its turn began, so the turn did not "
    "finish; it is not run twice. Send the message again to run it."
)
#: Told when a command taken over from a node that died had started there.
COMMAND_CUT_SHORT = (
    "⚠️ The cove node running this command stopped before it answered; it is not run "
    "twice. Send it again if it did not take effect."
)
#: How long a message waits for another node's turn in its conversation, and polls at most.
ELSEWHERE_WAIT_S = 3600.0
ELSEWHERE_POLL_S = 1.0


class Core:
    """The state every handler shares: conversations, the outbox, the roster, running tasks."""

    def __init__(self, convs: Conversations, outbox: Outbox, settings: TelegramSettings) -> None:
        self.convs = convs
        self.outbox = outbox
        self.settings = settings
        self.allow, self.allow_usernames = settings.allowed()
        self.roster = Roster(convs)
        self.username = ""  # the bot's @username, known once it started
        self.bot_id = 0
        self.tasks: set[asyncio.Task[None]] = set()
        #: Webhook mode: the updates kept in the store until handled (None: long polling).
        self.inbox: Inbox | None = None
        self._refused: set[int] = set()
        self.stopping = asyncio.Event()  # set when the bot stops: no more waiting to send
        #: Per chat, the messages waiting for another node's turn; each set to withdraw it.
        self.waiting: dict[str, set[asyncio.Event]] = {}
        self.approvals = ChatApprovals(
            outbox,
            convs.settings.extensions.approval_timeout_s,
            lambda update: is_allowed_user(update, self.allow, self.allow_usernames),
            self.spawn,
        )

    def withdraw_waiting(self, chat: ChatRef | None = None) -> int:
        """Withdraw the messages waiting for another node's turn in ``chat`` (None: in every
        chat); how many."""
        keys = [chat.key] if chat is not None else list(self.waiting)
        withdrawn = [event for key in keys for event in self.waiting.pop(key, set())]
        for event in withdrawn:
            event.set()
        return len(withdrawn)

    def spawn(self, work: Coroutine[Any, Any, None], delivery: Delivery | None = None) -> None:
        """Run ``work`` in the background, held until it ends; failures are logged. ``work``
        handles the kept update ``delivery``: it is finished when ``work`` ends, unless
        ``work`` settled it."""
        if delivery is not None:
            delivery.deferred = True

        async def guarded() -> None:
            try:
                await work
            except Exception:
                log.exception("a background task of the Telegram bot failed")
            finally:
                if delivery is not None:
                    await delivery.finish()

        task = asyncio.get_running_loop().create_task(guarded())
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def admitted(self, update: Update) -> bool:
        """True for allowed senders; a stranger gets one polite refusal per chat, and a log line."""
        if is_allowed(update, self.allow, self.allow_usernames):
            return True
        chat = update.effective_chat
        user = update.effective_user
        log.warning(
            "refused an update from user %s in chat %s (not on the allow-list)",
            user.id if user else "?",
            chat.id if chat else "?",
        )
        if chat is not None and chat.id not in self._refused:
            self._refused.add(chat.id)
            message = update.effective_message
            thread = message.message_thread_id if message and message.is_topic_message else None
            self.spawn(self._refuse(ChatRef(chat.id, thread)))
        return False

    async def _refuse(self, chat: ChatRef) -> None:
        await self.outbox.plain(chat, REFUSAL)

    def addressed(self, message: Message) -> bool:
        """In a group, only messages that mention the bot or reply to it are for it."""
        if message.chat.type not in ("group", "supergroup"):
            return True
        reply = message.reply_to_message
        if reply is not None and reply.from_user is not None and reply.from_user.id == self.bot_id:
            return True
        text = message.text or message.caption or ""
        return bool(self.username) and f"@{self.username}".lower() in text.lower()

    def strip_mention(self, text: str) -> str:
        """The text without the bot's @mention."""
        if not self.username:
            return text.strip()
        mention = f"@{self.username}"
        index = text.lower().find(mention.lower())
        if index < 0:
            return text.strip()
        return (text[:index] + text[index + len(mention) :]).strip()

    # -- messages --------------------------------------------------------------------------

    def delivery(self, update: Update) -> Delivery | None:
        """The kept update ``update`` is (webhook mode), while its handlers run."""
        return self.inbox.delivery(update) if self.inbox is not None else None

    def stopped(self) -> bool:
        """Whether this node takes no more turns (it is stopping)."""
        return self.stopping.is_set() or not self.convs.accepting

    async def on_message(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        """A text, document or photo: start (or queue) a turn in the chat's conversation."""
        message = update.effective_message
        if message is None or not await self.admitted(update) or not self.addressed(message):
            return
        delivery = self.delivery(update)
        self.spawn(self._accept(chat_of(message), message, delivery), delivery)

    async def _accept(self, chat: ChatRef, message: Message, delivery: Delivery | None) -> None:
        """Run a message as a turn and follow it; a kept update (``delivery``) starts its turn
        once, and is given back when this node stops before running it."""
        async with self.roster.lock(chat):  # the chat's messages run in the order they came
            try:
                attachments = await self._download(message)
                text = self.strip_mention(message.text or message.caption or "")
                if not text and attachments:
                    text = f"I sent you the file {attachments[0][0]}."
                if not text:
                    return
                cid = await self.roster.current(chat)
                sender = message.from_user.id if message.from_user else None
                approver = self.approvals.approver(chat, sender)
                key = delivery.key if delivery is not None else None
                handle, first = await self._start(chat, cid, text, attachments, approver, key)
                before, mine = self.roster.next_to_speak(chat)  # its answer after the last one
            except _Withdrawn:
                return  # by /cancel, which said so
            except CoveError as exc:
                if not await self._not_run(chat, delivery, exc):
                    await self.outbox.plain(chat, f"⚠️ {exc}")
                return
        self.roster.track(chat, handle)
        view = TurnView(
            self.outbox,
            chat,
            handle,
            self.convs.workspace(cid),
            self.settings.group_edit_interval_s if chat.group else self.settings.edit_interval_s,
            fetch=lambda digest: self.convs.figure(cid, digest),
            first=first,
            not_run=lambda exc: self._not_run(chat, delivery, exc),
            after=before,
        )
        try:
            await view.run()
        finally:
            self.roster.done_speaking(chat, mine)
            self.roster.untrack(chat, handle)
        if delivery is not None and view.started:
            delivery.handled()  # finished in the store when its turn was recorded

    async def _not_run(self, chat: ChatRef, delivery: Delivery | None, exc: CoveError) -> bool:
        """Deal with the error that kept a message's turn from running; False: the chat is to
        be told it. A kept update's turn that began on a node that died is not run again (the
        chat is told so); one another node holds is left to it; one not run because this node
        stops is given back, for another node or this one restarted."""
        if isinstance(exc, DeliveryTaken):
            if exc.ran:
                await self.outbox.plain(chat, CUT_SHORT)
            return True
        if delivery is not None and self.stopped():
            await delivery.release()
            return True
        return False

    async def _start(
        self,
        chat: ChatRef,
        cid: str,
        text: str,
        attachments: list[tuple[str, bytes]],
        approver: Approver,
        delivery: str | None,
    ) -> tuple[TurnHandle, Event | None]:
        """Send the message as a turn; its handle and first event (None: none came). The
        calls it asks about are asked in the chat (``approver``); ``delivery`` names the kept
        update it answers (``Conversations.send``).

        While another process (another node) holds the conversation's lease, its turn runs
        there: the chat is told once, and the message is sent when that lease is free (looked
        at with back-off up to ``ELSEWHERE_POLL_S``), for ``ELSEWHERE_WAIT_S`` at most; a send
        the lease still refuses (taken meanwhile) waits the same way. So a message that reached
        this node runs once, in the chat's order, whichever node got it.

        Raises:
            DeliveryTaken: The kept update started its turn before, or is another node's.
            CoveError: The turn was refused for another reason, the wait ran out or the bot is
                stopping.
        """
        withdrawn = asyncio.Event()
        self.waiting.setdefault(chat.key, set()).add(withdrawn)
        try:
            sending = _Sending(text, attachments, approver, delivery)
            return await self._start_when_free(chat, cid, sending, withdrawn)
        finally:
            waiting = self.waiting.get(chat.key)
            if waiting is not None:
                waiting.discard(withdrawn)
                if not waiting:
                    del self.waiting[chat.key]

    async def _start_when_free(
        self, chat: ChatRef, cid: str, sending: _Sending, withdrawn: asyncio.Event
    ) -> tuple[TurnHandle, Event | None]:
        waited, told = 0.0, False
        while True:
            if not await self.convs.running_elsewhere(cid):
                handle = self.convs.send(
                    cid,
                    sending.text,
                    sending.attachments,
                    approver=sending.approver,
                    delivery=sending.delivery,
                )
                try:
                    return handle, await _first_event(handle)
                except Busy as exc:
                    if exc.owner is None:
                        raise
            if waited >= ELSEWHERE_WAIT_S:
                raise CoveError("another cove node kept running this conversation; send it again")
            if not told:
                await self.outbox.plain(chat, ELSEWHERE)
                told = True
            pause = min(ELSEWHERE_POLL_S, 0.1 + waited / 4)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(withdrawn.wait(), pause)
            if self.stopping.is_set():
                raise CoveError(NOT_RUN_STOPPING)
            if withdrawn.is_set():
                raise _Withdrawn
            waited += pause

    async def _download(self, message: Message) -> list[tuple[str, bytes]]:
        """The document or photo of a message, as (safe name, bytes); [] when there is none.

        Raises:
            CoveError: The file is over the size limit.
        """
        if message.document is not None:
            item: Any = message.document
            name = safe_name(message.document.file_name or "", f"file_{item.file_unique_id}")
        elif message.photo:
            item = message.photo[-1]  # the largest size
            name = f"photo_{safe_name(item.file_unique_id)}.jpg"
        else:
            return []
        limit = self.settings.max_file_bytes
        if item.file_size is not None and item.file_size > limit:
            raise CoveError(f"the file {name} is over the {limit // (1024 * 1024)} MB limit")
        file = await self.outbox.call(item.get_file, method="getFile")
        download = file.download_as_bytearray
        data = bytes(await self.outbox.call(download, method="download"))
        if len(data) > limit:
            raise CoveError(f"the file {name} is over the {limit // (1024 * 1024)} MB limit")
        return [(name, data)]

    # -- commands --------------------------------------------------------------------------

    def command(self, run: Command, *, ordered: bool = True) -> Handler:
        """A PTB callback for a command: the gate, then ``run(chat, args)`` in the background
        (in the chat's order unless not ``ordered``; a slow command or a flood wait holds up no
        other chat); errors are told to the chat."""

        async def callback(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
            message = update.effective_message
            if message is None or not await self.admitted(update):
                return
            delivery = self.delivery(update)
            args = list(context.args or [])
            self.spawn(self._command(chat_of(message), run, args, ordered, delivery), delivery)

        return callback

    def unknown(self, answer: Callable[[ChatRef, str], Awaitable[None]]) -> Handler:
        """A PTB callback for the commands no other handler took: ``answer(chat, name)``, for
        the commands meant for this bot (see ``command_for_me``)."""

        async def callback(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
            message = update.effective_message
            if message is None or not await self.admitted(update):
                return
            name = self.command_for_me(message)
            if name is not None:
                self.spawn(self._command(chat_of(message), lambda c, _: answer(c, name), []))

        return callback

    def command_for_me(self, message: Message) -> str | None:
        """The name of the message's command, or None when it may be another bot's: it names
        another bot, or it names none in a group (where several bots may listen)."""
        words = (message.text or "").split(maxsplit=1)
        if not words or not words[0].startswith("/"):
            return None
        name, _, bot = words[0][1:].partition("@")
        if bot:
            return name if bot.lower() == self.username.lower() else None
        return None if message.chat.type in ("group", "supergroup") else name

    async def _command(
        self,
        chat: ChatRef,
        run: Command,
        args: list[str],
        ordered: bool = True,
        delivery: Delivery | None = None,
    ) -> None:
        async with self.roster.lock(chat) if ordered else contextlib.nullcontext():
            try:
                if delivery is not None and not await self._first_run(chat, delivery):
                    return
                await run(chat, args)
            except CoveError as exc:
                await self.outbox.plain(chat, f"⚠️ {exc}")
            except Exception:
                log.exception("command failed in chat %s", chat.key)
                await self.outbox.plain(chat, "⚠️ That command failed; the bot keeps running.")

    async def _first_run(self, chat: ChatRef, delivery: Delivery) -> bool:
        """Whether a kept command runs here: once, and never again after a node that had
        started it died (the chat is told)."""
        started = await delivery.start()
        if started == "ran":
            await self.outbox.plain(chat, COMMAND_CUT_SHORT)
        return started == "start"


@dataclass(frozen=True)
class _Sending:
    """A message on its way to become a turn: what ``Conversations.send`` is given."""

    text: str
    attachments: list[tuple[str, bytes]]
    approver: Approver
    delivery: str | None


class _Withdrawn(Exception):
    """A message waiting for another node's turn was withdrawn (``/cancel``)."""


async def _first_event(handle: TurnHandle) -> Event | None:
    """The first event of the sent turn itself: queued behind a turn of this process, or
    started (None when the stream ended first). Events of another process's turn that this
    process's follower published before the lease refused the send are not the turn's.

    Raises:
        CoveError: The turn was refused (``Busy`` when another process holds the lease).
    """
    async for event in handle:
        if isinstance(event, TurnQueued | TurnStarted):
            return event
    return None
