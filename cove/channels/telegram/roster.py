"""Which conversation each chat talks to, and who may talk at all."""

from __future__ import annotations

import asyncio
import logging

from telegram import Message, Update

from cove.channels.telegram.outbox import ChatRef
from cove.conversation import ConversationRecord, Conversations, TurnHandle
from cove.errors import NotFound

log = logging.getLogger("cove.telegram")
CHANNEL = "telegram"
GROUP_TYPES = ("group", "supergroup")


def chat_of(message: Message) -> ChatRef:
    """The chat (and forum topic) a message belongs to."""
    thread = message.message_thread_id if message.is_topic_message else None
    return ChatRef(message.chat.id, thread, message.chat.type in GROUP_TYPES)


def is_allowed(
    update: Update, allow: frozenset[int], usernames: frozenset[str] = frozenset()
) -> bool:
    """Whether the bot may answer this update.

    In a private chat: the sender's user id or @username is on the allow-list (or the chat's
    id, the same number). In any other chat (group, supergroup, channel) only the chat's own id
    counts: every member of a group sees the answers and the files, so an allowed user does
    not open a group to the bot by writing there.
    """
    chat = update.effective_chat
    if chat is None:
        return False
    if chat.type != "private":
        return chat.id in allow
    if chat.id in allow:
        return True
    user = update.effective_user
    if user is None:
        return False
    return user.id in allow or (user.username or "").lower() in usernames


def is_allowed_user(
    update: Update, allow: frozenset[int], usernames: frozenset[str] = frozenset()
) -> bool:
    """Whether the update's user is on the allow-list as a person (by user id or @username),
    whatever the chat: a group on the list does not make each of its members one."""
    user = update.effective_user
    if user is None:
        return False
    return user.id in allow or (user.username or "").lower() in usernames


def allow_warnings(allow: frozenset[int], usernames: frozenset[str]) -> list[str]:
    """What to warn about at start in an allow-list: empty, or naming users by @username."""
    if not allow and not usernames:
        return [
            "the Telegram allow-list is empty: every user is refused "
            "(set COVE_TELEGRAM_ALLOW to user or chat ids)"
        ]
    if not usernames:
        return []
    names = ", ".join(f"@{name}" for name in sorted(usernames))
    return [
        f"the Telegram allow-list names {names}: a username follows whoever holds it (it can "
        "be changed, given up and taken by someone else); list the numeric user id instead "
        "(refused updates are logged with the sender's id)"
    ]


class Roster:
    """The current conversation of every chat, and the turns each chat has in flight.

    A chat's first message creates its conversation (bound to the chat's id); ``/new`` and
    ``/fork`` make another one current. The current one is the chat's newest, so the choice
    survives a restart with nothing stored besides the conversations themselves.
    """

    def __init__(self, convs: Conversations) -> None:
        self.convs = convs
        self._current: dict[str, str] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self.turns: dict[str, set[TurnHandle]] = {}
        self._said: dict[str, asyncio.Event] = {}  # per chat, set once its last turn said all

    def next_to_speak(self, chat: ChatRef) -> tuple[asyncio.Event | None, asyncio.Event]:
        """Line a turn up to speak in ``chat`` after the turns sent before it (call in the
        chat's order): the event the turn before sets once it said everything (None: every
        turn before said everything), and this turn's own, to set once it did
        (``done_speaking``, which forgets the chat's last event once set)."""
        before = self._said.get(chat.key)
        mine = self._said[chat.key] = asyncio.Event()
        return before, mine

    def done_speaking(self, chat: ChatRef, mine: asyncio.Event) -> None:
        """The turn that holds ``mine`` said everything: the next one may speak."""
        mine.set()
        if self._said.get(chat.key) is mine:
            del self._said[chat.key]

    def lock(self, chat: ChatRef) -> asyncio.Lock:
        """The lock that keeps a chat's messages in the order they came."""
        return self._locks.setdefault(chat.key, asyncio.Lock())

    async def current(self, chat: ChatRef) -> str:
        """The id of the conversation the chat talks to now (created on first use)."""
        known = self._current.get(chat.key)
        if known is not None:
            try:
                return (await self.convs.get(known)).id
            except NotFound:  # deleted meanwhile (``cove delete``): fall back to the newest
                del self._current[chat.key]
        mine = await self.convs.list(channel=CHANNEL, owner=chat.owner, limit=10_000)
        if mine:
            record = max(mine, key=lambda r: r.created_at)
        else:
            record = await self.convs.for_external(CHANNEL, chat.key, owner=chat.owner)
        self._current[chat.key] = record.id
        return record.id

    async def start_new(self, chat: ChatRef) -> ConversationRecord:
        """A fresh conversation for the chat; the previous one stays as it is."""
        record = await self.convs.create(channel=CHANNEL, owner=chat.owner)
        self._current[chat.key] = record.id
        return record

    def switch(self, chat: ChatRef, conversation_id: str) -> None:
        """Make ``conversation_id`` the chat's current conversation."""
        self._current[chat.key] = conversation_id

    def track(self, chat: ChatRef, handle: TurnHandle) -> None:
        """Remember a sent turn until it ends (``/cancel`` withdraws queued ones)."""
        self.turns.setdefault(chat.key, set()).add(handle)

    def untrack(self, chat: ChatRef, handle: TurnHandle) -> None:
        """Forget an ended turn."""
        handles = self.turns.get(chat.key)
        if handles is not None:
            handles.discard(handle)
            if not handles:
                del self.turns[chat.key]
