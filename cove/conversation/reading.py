"""``Reading``: the reading half of the conversation API, alone on a store.

``Conversations`` is a ``Reading`` that also drives turns; the inspection commands (``cove
list``, ``show``, ``vars``, ``search``, ``export``) open a ``Reading`` by itself
(``open_reading``): the store read-only and nothing else, so they never import the engine, the
sandbox or a model client (``tests/channels/cli/test_startup.py``).
"""

from __future__ import annotations

import builtins
from types import TracebackType
from typing import TYPE_CHECKING, Self

from cove.conversation.recovered import as_listed, as_recovered
from cove.errors import CoveError, NotFound
from cove.persistence.extension_use import ApprovalRecord
from cove.persistence.history import HistoryFigures
from cove.persistence.opener import Opener
from cove.persistence.records import ConversationRecord, SearchHit, Transcript, VarVersionRecord
from cove.persistence.store import Store

if TYPE_CHECKING:
    from cove.config import Settings

#: The schema version (migration) that records approvals.
APPROVALS_SCHEMA = 21


def open_reading(settings: Settings) -> Opener[Reading]:
    """Open the database for reading only: nothing is created, migrated or written, and a
    missing database reads as empty.

    ``await`` the result, or use it directly: ``async with open_reading(s) as convs``.
    """

    async def open_() -> Reading:
        store = await Store.open(
            settings.store.database,
            read_only=True,
            history_budget=settings.store.history_budget_mb * 1024 * 1024,
        )
        return Reading(settings, store)

    return Opener(open_, Reading.aclose)


class Reading:
    """Find, list and inspect conversations; read their variables, figures and prompts.

    Open one by itself with ``open_reading`` (read-only), or use a ``Conversations``.
    """

    def __init__(self, settings: Settings, store: Store) -> None:
        self.settings = settings
        self._store = store
        self._closed = False

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the database. Idempotent."""
        if self._closed:
            return
        self._closed = True
        await self._store.aclose()

    def _check_open(self) -> None:
        if self._closed:
            raise CoveError(f"{type(self).__name__} is closed")

    async def get(self, id_or_prefix: str, *, owner: str | None = None) -> ConversationRecord:
        """A conversation by id or unique id prefix (raises NotFound / AmbiguousId).

        With ``owner``, only that owner's conversations are found.
        """
        self._check_open()
        return as_listed(await self._store.resolve(id_or_prefix, owner=owner))

    async def list(
        self,
        channel: str | None = None,
        limit: int = 50,
        before: float | None = None,
        *,
        owner: str | None = None,
    ) -> builtins.list[ConversationRecord]:
        """Conversations, newest first (only ``owner``'s when given).

        A last turn that a dead process left ``running`` reads ``interrupted`` (``last_status``).
        """
        self._check_open()
        records = await self._store.list_conversations(
            channel=channel, limit=limit, before=before, owner=owner
        )
        return [as_listed(record) for record in records]

    async def forks(
        self, conversation_id: str, *, owner: str | None = None
    ) -> builtins.list[ConversationRecord]:
        """The conversations forked from this one, by the turn each forked at (``fork_turn``).

        Only direct forks (a fork's own forks are listed by it); only ``owner``'s when given.
        The conversation a fork was made from is its record's ``parent_id``.

        Raises:
            NotFound: Unknown conversation (or not ``owner``'s).
        """
        record = await self.get(conversation_id, owner=owner)
        return [as_listed(fork) for fork in await self._store.forks(record.id, owner=owner)]

    async def fork_tree(
        self, conversation_id: str, *, owner: str | None = None
    ) -> builtins.list[ConversationRecord]:
        """Every conversation linked to this one by forking, at any depth, oldest first.

        The tree's root (the conversation no fork was made from) comes first; each record's
        ``parent_id`` and ``fork_turn`` say where it hangs. Only ``owner``'s when given.

        Raises:
            NotFound: Unknown conversation (or not ``owner``'s).
        """
        record = await self.get(conversation_id, owner=owner)
        return [as_listed(member) for member in await self._store.fork_tree(record.id, owner=owner)]

    async def turn_requests(
        self, turns: builtins.list[tuple[str, int]]
    ) -> dict[tuple[str, int], str]:
        """The requests of (conversation id, position) turns each conversation asked itself.

        One read for all, e.g. to name the versions of turns across a fork tree
        (``fork_tree``); a pair that names no such turn is left out.
        """
        self._check_open()
        return await self._store.turn_requests(turns)

    async def inspect(
        self, conversation_id: str, turn: int | None = None, *, owner: str | None = None
    ) -> Transcript:
        """The transcript: turns → iterations → blocks, variable versions, usage."""
        record = await self.get(conversation_id, owner=owner)
        transcript = await self._store.transcript(record.id, turn=turn)
        if turn is not None and not transcript.turns:
            positions = [t.position for t in await self._store.turns(record.id)]
            shown = f"{positions[0]}..{positions[-1]}" if positions else "none yet"
            raise NotFound(
                "turn", str(turn), f"conversation {record.id} has no turn {turn} (turns: {shown})"
            )
        if self._store.read_only:
            return as_recovered(transcript)
        return transcript

    async def figure(self, conversation_id: str, digest: str, *, owner: str | None = None) -> bytes:
        """The PNG of a figure a block of the conversation made (``BlockFigure.digest``).

        Raises:
            NotFound: Unknown conversation (or not ``owner``'s), or no such figure in it.
        """
        record = await self.get(conversation_id, owner=owner)
        return await self._store.figure(record.id, digest)

    async def system_prompt(self, digest: str) -> str:
        """The system prompt stored under ``digest`` (an iteration's ``system_prompt_hash``)."""
        self._check_open()
        return await self._store.system_prompt(digest)

    async def history(self, conversation_id: str, *, owner: str | None = None) -> HistoryFigures:
        """What the conversation's values take: its live state and its history, in bytes, with
        its history budget and how many versions the budget thinned."""
        record = await self.get(conversation_id, owner=owner)
        return await self._store.history(record.id)

    async def search(
        self, text: str, conversation_id: str | None = None, *, owner: str | None = None
    ) -> builtins.list[SearchHit]:
        """Full-text search over requests, answers and code (in ``owner``'s conversations)."""
        self._check_open()
        if conversation_id is not None:
            conversation_id = (await self.get(conversation_id, owner=owner)).id
        return await self._store.search(text, conversation_id=conversation_id, owner=owner)

    async def approvals(
        self, conversation_id: str, turn: int | None = None, *, owner: str | None = None
    ) -> builtins.list[ApprovalRecord]:
        """The decisions on the conversation's extension calls, in order (of one turn)."""
        record = await self.get(conversation_id, owner=owner)
        if self._store.schema_version < APPROVALS_SCHEMA:
            return []  # a database opened read-only before it was migrated: none recorded
        return await self._store.approvals(record.id, turn)

    async def variables(
        self, conversation_id: str, *, owner: str | None = None
    ) -> dict[str, VarVersionRecord]:
        """The current version of every variable."""
        record = await self.get(conversation_id, owner=owner)
        return await self._store.vars_as_of(record.id)

    async def var_history(
        self, conversation_id: str, name: str, *, owner: str | None = None
    ) -> builtins.list[VarVersionRecord]:
        """Every version of one variable, oldest first."""
        record = await self.get(conversation_id, owner=owner)
        return await self._store.var_history(record.id, name)
