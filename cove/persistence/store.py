"""The store: cove's one SQLite database behind an async API.

``Store`` owns a single sqlite3 connection on its own thread (the process's one writer). Every
public method is one synchronous function from ``writes``, ``reads`` or ``leases`` run on that
thread, and every write method is exactly one ``BEGIN IMMEDIATE`` transaction::

    async with Store.open(path) as store:
        conversation = await store.create_conversation(channel="cli")
        turn = await store.start_turn(conversation.id, "question")
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import time
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import Any, Concatenate, ParamSpec, TypeVar

from cove.errors import CoveError, StoreError
from cove.persistence import cancels, history, leases, notes, reads, values, writes
from cove.persistence.checkpoint import Checkpointer
from cove.persistence.connection import WriteLockBusy, without_waiting
from cove.persistence.fence import current_fence
from cove.persistence.history import HistoryFigures
from cove.persistence.opener import Opener
from cove.persistence.records import (
    BlockRecord,
    ConversationRecord,
    ConversationScan,
    IterationWrite,
    ModelOption,
    NoteKind,
    ReplyWrite,
    SearchHit,
    SubqueryRecord,
    SubqueryWrite,
    Transcript,
    TurnRecord,
    VarVersionRecord,
)
from cove.persistence.store_open import DatabaseOpening, Opened
from cove.results import BlockResult, TurnOutcome, VarVersion

#: Write units up to this many bytes may run on the event loop's thread (see ``Store._write``).
INLINE_WRITE_BYTES = 64 * 1024
#: Write units between two requests for a WAL checkpoint (run off the store's connection).
CHECKPOINT_EVERY = 200
#: The history budget of each conversation when none is given (``history.py``).
DEFAULT_HISTORY_BUDGET = 1024 * 1024 * 1024

P = ParamSpec("P")
T = TypeVar("T")
Clock = Callable[[], float]


class Store:
    """cove's database: conversations, turns, iterations, blocks and variable versions.

    Create with ``Store.open(path)``; use as an async context manager or call ``aclose()``.
    Times are seconds since the epoch from ``clock`` (a seam for lease-expiry tests).
    """

    def __init__(self, opened: Opened, clock: Clock, history_budget: int) -> None:
        self._thread = opened.thread
        self._path = opened.path
        self._clock = clock
        self._closed = False
        self._schema_version = opened.schema_version
        self._created = opened.created
        self._read_only = opened.read_only
        self._writes = 0
        self._checkpointer: Checkpointer | None = None
        self._file = opened.file
        self.history_budget = history_budget

    @staticmethod
    def open(
        path: str | os.PathLike[str],
        *,
        clock: Clock = time.time,
        read_only: bool = False,
        history_budget: int = DEFAULT_HISTORY_BUDGET,
    ) -> Opener[Store]:
        """Open (creating and migrating if needed) the database at ``path``.

        Args:
            path: a file path, or ``":memory:"`` for a private in-memory database.
            clock: the time source for timestamps and leases.
            read_only: open for reading only: nothing is created or written (no migration, no
                crash recovery); a missing or empty file reads as an empty database. A schema
                older than this cove's is upgraded first when the file is writable.
            history_budget: the bytes each conversation's past versions may keep beyond its
                live state (``history.py``); older versions are thinned past it.

        Returns:
            ``await`` it for the store, or ``async with`` it to have the store closed on exit.

        Raises:
            NotADatabase: the path is a directory, not SQLite, or another application's
                SQLite database (it is not modified).
            SchemaTooNew: the database was written by a newer cove (it is not modified).
            StoreError: the database cannot be opened or migrated.
        """
        opening = DatabaseOpening(os.fspath(path), clock, read_only)

        async def open_() -> Store:
            return Store(await opening.open(), clock, history_budget)

        return Opener(open_, Store.aclose)

    @property
    def path(self) -> str:
        """The database path this store was opened with."""
        return self._path

    @property
    def created(self) -> bool:
        """True when this open created the database file (it did not exist or was empty)."""
        return self._created

    @property
    def read_only(self) -> bool:
        """True when the store was opened for reading only; writes then fail."""
        return self._read_only

    @property
    def schema_version(self) -> int:
        """The schema version of the open database (the latest migration applied)."""
        return self._schema_version

    async def _run(
        self, fn: Callable[Concatenate[sqlite3.Connection, P], T], *args: P.args, **kwargs: P.kwargs
    ) -> T:
        """Run ``fn(connection, ...)`` on the database thread in ONE hop.

        A write unit of a dozen statements is one function, so it costs one hand-off to the
        thread and one commit.
        """
        if self._closed:
            raise StoreError(f"the store for {self._path} is closed")
        try:
            return await self._thread.call(fn, *args, **kwargs)
        except CoveError:
            raise
        except sqlite3.Error as exc:
            raise StoreError(f"database error in {self._path}: {exc}") from exc

    async def _write(
        self,
        size: int,
        fn: Callable[Concatenate[sqlite3.Connection, P], T],
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T:
        """Run a one-transaction write unit of about ``size`` bytes, as cheaply as is safe.

        While the database thread is idle, a small unit runs right here on the event loop's
        thread: it commits in tens of microseconds, less than the two thread wake-ups of a
        hand-off cost on a busy machine, and it is just as durable (committed before this
        returns). It never waits there: if another process holds the write lock, the unit (not
        begun, so nothing written) goes to the thread, which waits up to the busy timeout.
        ``fn`` must be exactly one ``immediate`` transaction with nothing written before it.
        """
        if self._closed:
            raise StoreError(f"the store for {self._path} is closed")
        result: T
        if size <= INLINE_WRITE_BYTES and self._thread.idle and not self._read_only:
            try:
                result = self._thread.run_here(without_waiting, lambda c: fn(c, *args, **kwargs))
            except WriteLockBusy:
                result = await self._run(fn, *args, **kwargs)
            except CoveError:
                raise
            except sqlite3.Error as exc:
                raise StoreError(f"database error in {self._path}: {exc}") from exc
        else:
            result = await self._run(fn, *args, **kwargs)
        self._writes += 1
        if self._writes % CHECKPOINT_EVERY == 0:
            self._checkpoint()
        return result

    def _checkpoint(self) -> None:
        """Have the WAL folded back into the file, off this connection (see ``checkpoint``)."""
        if self._checkpointer is None and self._file is not None:
            self._checkpointer = Checkpointer(self._file)
        if self._checkpointer is not None:
            self._checkpointer.request()

    async def aclose(self) -> None:
        """Close the database connection; later calls raise ``StoreError``. Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._checkpointer is not None:
            await asyncio.to_thread(self._checkpointer.close)
        await self._thread.close()

    async def __aenter__(self) -> Store:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    # --- conversations -------------------------------------------------------------------

    async def create_conversation(
        self,
        *,
        channel: str,
        title: str | None = None,
        external_id: str | None = None,
        parent_id: str | None = None,
        fork_turn: int | None = None,
        workspace: str | None = None,
        owner: str | None = None,
    ) -> ConversationRecord:
        """Create a conversation; with ``parent_id`` and ``fork_turn``, a fork.

        ``owner`` is the principal a channel acts for (None: no owner, the local user).

        Raises:
            NotFound: the parent does not exist.
            StoreError: the fork point is outside the parent's turns, or the channel already
                has a conversation with this ``external_id``.
        """
        return await self._run(
            writes.create_conversation,
            self._clock(),
            channel,
            title,
            external_id,
            parent_id,
            fork_turn,
            workspace,
            owner,
        )

    async def find_external(self, channel: str, external_id: str) -> ConversationRecord | None:
        """Return the conversation a channel knows by ``external_id``, or None."""
        return await self._run(reads.find_external, channel, external_id)

    async def get_conversation(self, conversation_id: str) -> ConversationRecord:
        """Return a conversation by exact id. Raises ``NotFound``."""
        return await self._run(reads.get_conversation, conversation_id)

    async def resolve(self, id_or_prefix: str, *, owner: str | None = None) -> ConversationRecord:
        """Return the conversation with this exact id or unique id prefix.

        With ``owner``, only that owner's conversations match (others are not found).

        Raises:
            AmbiguousId: the prefix matches several conversations (listed in the error).
            NotFound: nothing matches.
        """
        return await self._run(reads.resolve, id_or_prefix, owner)

    async def list_conversations(
        self,
        *,
        channel: str | None = None,
        limit: int = 50,
        before: float | None = None,
        owner: str | None = None,
    ) -> list[ConversationRecord]:
        """Conversations newest first by ``updated_at``, with ``turn_count`` filled.

        Args:
            channel: only this channel's conversations.
            limit: at most this many.
            before: only conversations updated before this time (the next page).
            owner: only this owner's conversations.
        """
        return await self._run(reads.list_conversations, channel, limit, before, owner)

    async def conversation_scan(self, since: float) -> ConversationScan:
        """Conversations updated at or after ``since``, the running ones, and the count."""
        return await self._run(reads.conversation_scan, since)

    async def conversation_ids(self) -> set[str]:
        """Every conversation id (to notice deletions)."""
        return await self._run(reads.conversation_ids)

    async def set_title(self, conversation_id: str, title: str) -> None:
        """Set a conversation's title. Raises ``NotFound``."""
        await self._run(writes.set_title, self._clock(), conversation_id, title, current_fence())

    async def delete_conversation(
        self, conversation_id: str, *, lease_owner: str | None = None
    ) -> None:
        """Delete a conversation with all it wrote; blobs nothing else uses are collected.

        Args:
            conversation_id: the conversation.
            lease_owner: the caller's lease owner id; a live lease held by anyone else refuses.

        Raises:
            NotFound: unknown conversation.
            Busy: another owner holds a live lease (a turn is running there).
            CoveError: the conversation has forks (named in the message); delete them first.
        """
        await self._run(writes.delete_conversation, self._clock(), conversation_id, lease_owner)
        await self._run(values.collect)

    # --- leases --------------------------------------------------------------------------

    async def acquire_lease(self, conversation_id: str, owner: str, ttl_s: float) -> int:
        """Take the conversation's lease for ``ttl_s`` seconds, or renew it if already ours.

        Taking over an expired (or absent) lease from another owner marks that conversation's
        running turns and iterations ``interrupted``, in the same transaction, and raises the
        lease's epoch. Returns the epoch, which the turn's writes then carry (``fence.py``).

        Raises:
            Busy: another owner holds a live lease.
            NotFound: unknown conversation.
        """
        return await self._run(leases.acquire, self._clock(), conversation_id, owner, ttl_s)

    async def settled_epoch(self, conversation_id: str) -> int | None:
        """The lease's epoch while nobody holds it, else None (``leases.settled_epoch``).

        Raises:
            NotFound: unknown conversation.
        """
        return await self._run(leases.settled_epoch, conversation_id)

    async def renew_lease(self, conversation_id: str, owner: str, ttl_s: float) -> None:
        """Extend a lease ``owner`` holds. Raises ``Busy`` if it was lost, ``NotFound``."""
        await self._run(leases.renew, self._clock(), conversation_id, owner, ttl_s)

    async def release_lease(self, conversation_id: str, owner: str) -> None:
        """Give up the lease if ``owner`` holds it; a no-op otherwise (also when unknown)."""
        await self._run(leases.release, conversation_id, owner)

    async def reap_dead_leases(self, is_dead: Callable[[str], bool]) -> int:
        """Free every lease whose owner ``is_dead`` reports gone, interrupting its turns.

        ``is_dead`` runs on the database thread inside the transaction, so it must be quick
        (e.g. a signal-0 ``os.kill`` probe of a pid on this host).

        Returns:
            How many leases were freed.
        """
        return await self._run(leases.reap, self._clock(), is_dead)

    async def interrupt_orphans(self) -> int:
        """Mark ``interrupted`` the running turns whose conversation has no live lease.

        Returns:
            How many turns were interrupted.
        """
        return await self._run(leases.recover, self._clock())

    # --- cancel requests (stopping a turn another process runs) ---------------------------

    async def request_cancel(self, conversation_id: str, requested_by: str) -> int | None:
        """Ask the process running the conversation's turn to stop it (see ``cancels.py``).

        Idempotent: a turn keeps the first request. Returns the running turn's id, or None
        when no turn runs (nothing is recorded then).

        Raises:
            NotFound: unknown conversation.
        """
        return await self._run(cancels.request, self._clock(), conversation_id, requested_by)

    async def cancel_requested(self, conversation_id: str) -> str | None:
        """Who asked the conversation's running turn to stop, or None when nobody did."""
        return await self._run(cancels.pending, conversation_id)

    # --- turns and iterations ------------------------------------------------------------

    async def start_turn(
        self,
        conversation_id: str,
        request: str,
        *,
        model: str | None = None,
        attachments: Sequence[tuple[str, int]] = (),
        model_options: Mapping[str, ModelOption] | None = None,
        cost_known: bool = True,
    ) -> TurnRecord:
        """Record a ``running`` turn after the last turn the conversation sees.

        A fork's first own turn is ``fork_turn + 1``. ``attachments`` are the ``(name, size)``
        of the files attached to the request; ``model_options`` the options its model calls
        are sent with; ``cost_known`` False when the model has no price (its cost is unknown).
        Raises ``NotFound``.
        """
        return await self._run(
            writes.start_turn,
            self._clock(),
            conversation_id,
            request,
            model,
            tuple(attachments),
            model_options,
            current_fence(),
            cost_known,
        )

    async def start_iteration(
        self,
        turn_id: int,
        position: int,
        *,
        system_prompt: str,
        request_message: str,
        context_message: str,
        seed: int | None = None,
    ) -> int:
        """Record a ``running`` iteration with its exact prompt and return its id.

        The system prompt is stored once, as a blob addressed by its hash.

        Raises:
            NotFound: unknown turn.
            Busy: the turn is no longer running (another process took the conversation over).
        """
        return await self._write(
            len(system_prompt) + len(request_message) + len(context_message),
            writes.start_iteration,
            self._clock(),
            turn_id,
            position,
            system_prompt,
            request_message,
            context_message,
            seed,
            current_fence(),
        )

    async def add_steering(self, iteration_id: int, texts: list[str]) -> None:
        """Record the person's messages (steering) an iteration showed the model.

        Raises:
            NotFound: unknown iteration.
        """
        await self._run(writes.add_steering, self._clock(), iteration_id, texts, current_fence())

    async def add_note(
        self,
        turn_id: int,
        seq: int,
        kind: NoteKind,
        text: str,
        restored: Sequence[str] = (),
        lost: Sequence[str] = (),
        nudge_kind: str | None = None,
        retry: tuple[int, int] | None = None,
    ) -> None:
        """Keep a nudge, sandbox restart or endpoint retry turn ``turn_id`` showed, under its
        published seq (``nudge_kind`` for nudges, ``retry`` = (attempt, of) for retries).

        Raises:
            NotFound: unknown turn.
        """
        await self._run(
            notes.add_note,
            self._clock(),
            turn_id,
            seq,
            kind,
            text,
            restored,
            lost,
            nudge_kind,
            retry,
        )

    async def record_reply(self, iteration_id: int, reply: ReplyWrite) -> None:
        """Record the model's reply (with its usage and planned blocks) as soon as it arrives.

        Raises:
            NotFound: unknown iteration.
            Busy: the iteration or its turn is no longer running.
        """
        size = len(reply.raw_reply or "") + sum(len(code) for code in reply.planned_blocks)
        await self._write(size, writes.record_reply, iteration_id, reply, current_fence())

    async def record_block(
        self,
        iteration_id: int,
        block: BlockResult,
        versions: Sequence[VarVersion] = (),
        subqueries: Sequence[SubqueryWrite] = (),
    ) -> None:
        """Record one finished block with its variable versions and sub-queries, atomically.

        Raises:
            NotFound: unknown iteration.
            Busy: the iteration or its turn is no longer running.
            StoreError: a version names another block, or a number is reused; nothing is written.
        """
        size = _block_size(block) + sum(_version_size(v) for v in versions)
        due = await self._write(
            size,
            writes.record_block,
            self._clock(),
            iteration_id,
            block,
            tuple(versions),
            tuple(subqueries),
            current_fence(),
            self.history_budget,
        )
        if due is not None:
            await self.keep_history(due)

    async def finish_iteration(self, iteration_id: int, result: IterationWrite) -> None:
        """Close an iteration with what it has not recorded yet (blocks, versions, sub-queries).

        Blocks already recorded with ``record_block`` are not repeated; ``result.var_versions``
        may name them.

        Encoded values larger than 4 KB are stored as blobs; reads return them as text.

        Raises:
            NotFound: unknown iteration.
            Busy: the iteration or its turn is no longer running.
            StoreError: the write is inconsistent (e.g. a variable version names a block the
                iteration does not have, or a version number is reused); nothing is written.
        """
        reply = result.reply.raw_reply if result.reply is not None else None
        size = sum(_block_size(b) for b in result.blocks) + len(reply or "")
        size += sum(_version_size(v) for v in result.var_versions)
        due = await self._write(
            size,
            writes.finish_iteration,
            self._clock(),
            iteration_id,
            result,
            current_fence(),
            self.history_budget,
        )
        if due is not None:
            await self.keep_history(due)

    async def finish_turn(self, turn_id: int, outcome: TurnOutcome) -> TurnRecord:
        """Close a running turn with its outcome and return it; iterations it left running end
        with it.

        Raises:
            NotFound: unknown turn.
            Busy: the turn is no longer running.
            StoreError: ``status`` is not a finished turn status.
        """
        return await self._run(
            writes.finish_turn,
            self._clock(),
            turn_id,
            outcome,
            current_fence(),
        )

    async def get_turn(self, turn_id: int) -> TurnRecord:
        """Return one turn (without iterations). Raises ``NotFound``."""
        return await self._run(reads.get_turn, turn_id)

    async def turns(self, conversation_id: str) -> list[TurnRecord]:
        """The turns a conversation sees in order (for a fork, the parent's come first)."""
        return await self._run(reads.turns, conversation_id)

    async def transcript(self, conversation_id: str, *, turn: int | None = None) -> Transcript:
        """The whole conversation, or the turn at position ``turn``, with all it wrote.

        Raises:
            NotFound: unknown conversation.
        """
        return await self._run(reads.transcript, conversation_id, turn)

    async def transcript_since(self, conversation_id: str, position: int) -> Transcript:
        """The turns at ``position`` and after, with all they wrote. Raises ``NotFound``."""
        return await self._run(reads.transcript_since, conversation_id, position)

    async def change_marker(self, conversation_id: str) -> tuple[Any, ...]:
        """A value that differs after any change a watcher of the conversation would see.

        Raises:
            NotFound: unknown conversation.
        """
        return await self._run(reads.change_marker, conversation_id)

    async def recent_blocks(
        self, conversation_id: str, limit: int
    ) -> list[tuple[int, int, BlockRecord]]:
        """The last ``limit`` blocks across turns, oldest first (fork-aware).

        Returns:
            ``(turn position, iteration position, block)`` tuples.
        """
        return await self._run(reads.recent_blocks, conversation_id, limit)

    async def subqueries(self, turn_id: int) -> list[SubqueryRecord]:
        """A turn's sub-queries in order. Raises ``NotFound``."""
        return await self._run(reads.subqueries, turn_id)

    async def system_prompt(self, digest: str) -> str:
        """The system prompt stored under ``digest``. Raises ``NotFound``."""
        return await self._run(reads.system_prompt, digest)

    async def figure(self, conversation_id: str, digest: str) -> bytes:
        """The PNG of a figure (by its digest) of a block the conversation sees.

        Raises:
            NotFound: The conversation is unknown, or none of its blocks made that figure.
        """
        return await self._run(reads.figure, conversation_id, digest)

    # --- variables and search ------------------------------------------------------------

    async def var_history(self, conversation_id: str, name: str) -> list[VarVersionRecord]:
        """Every version of a variable the conversation sees, oldest first.

        Raises:
            NotFound: the conversation is unknown or the name never existed in it.
        """
        return await self._run(reads.var_history, conversation_id, name)

    async def vars_as_of(
        self, conversation_id: str, turn: int | None = None, *, include_deleted: bool = False
    ) -> dict[str, VarVersionRecord]:
        """The latest version of each variable at or before turn position ``turn``.

        Args:
            conversation_id: the conversation (a fork sees its parent up to the fork point).
            turn: the last turn position to consider; None means now.
            include_deleted: keep names whose latest version is a deletion.

        Returns:
            Name -> version, in the order the versions were written.
        """
        return await self._run(reads.vars_as_of, conversation_id, turn, include_deleted)

    async def var_version(self, conversation_id: str, name: str, version: int) -> VarVersionRecord:
        """One version of a variable the conversation sees. Raises ``NotFound``."""
        return await self._run(reads.var_version, conversation_id, name, version)

    # --- the value store ------------------------------------------------------------------

    async def value_chunks(self, roots: Sequence[str]) -> dict[str, bytes]:
        """Every stored chunk the given roots (``VarVersionRecord.encoded``) reach, by name:
        what ``codec.decode(root, chunks=found.__getitem__)`` needs."""
        return await self._run(values.read_chunks, tuple(roots))

    async def chunks(self, names: Sequence[str]) -> dict[str, bytes]:
        """The stored chunks among ``names``, by name (not what they reach)."""
        return await self._run(values.read_named, tuple(names))

    async def history(self, conversation_id: str) -> HistoryFigures:
        """A conversation's live and history bytes, its budget and its thinned versions.

        Raises:
            NotFound: unknown conversation.
        """
        await self.get_conversation(conversation_id)
        return await self._run(history.measure, conversation_id, self.history_budget)

    async def value_stats(self) -> Mapping[str, int]:
        """The value store as a whole: ``chunks``, their ``bytes``, and ``garbage`` (chunks
        nothing holds, waiting to be collected)."""
        return await self._run(values.stats)

    async def largest_values(self, limit: int) -> list[str]:
        """The conversations whose versions added the most value bytes, largest first."""
        return await self._run(history.largest, limit)

    async def keep_history(self, conversation_id: str) -> int:
        """Thin the conversation's oldest versions while its history exceeds the budget, then
        collect what that released (``history.py``); how many versions were thinned."""
        thinned = await self._run(history.keep_budget, conversation_id, self.history_budget)
        await self._run(values.collect)
        return thinned

    async def collect_values(self) -> int:
        """Delete the chunks nothing holds any more; how many went."""
        return await self._run(values.collect)

    async def search(
        self,
        text: str,
        *,
        conversation_id: str | None = None,
        limit: int = 20,
        owner: str | None = None,
    ) -> list[SearchHit]:
        """Full-text search over requests, answers and code; words match literally.

        Args:
            text: the words to find (all must occur); FTS5 syntax in it has no effect.
            conversation_id: search only what this conversation sees (fork-aware).
            limit: at most this many hits, best first.
            owner: only hits in this owner's conversations.
        """
        return await self._run(reads.search, text, conversation_id, limit, owner)

    # -- bounded reads for a turn's start ---------------------------------------------------------

    async def last_turn(self, conversation_id: str) -> TurnRecord | None:
        """The latest turn the conversation sees, or None (one indexed lookup per fork level).

        Raises:
            NotFound: unknown conversation.
        """
        return await self._run(reads.last_turn, conversation_id)

    async def last_thinking(self, turn_id: int) -> str | None:
        """The thinking of the turn's last iteration that recorded any, or None."""
        return await self._run(reads.last_thinking, turn_id)

    async def last_blocks(
        self, conversation_id: str, limit: int
    ) -> list[tuple[int, int, BlockRecord]]:
        """The last ``limit`` blocks of the last ``limit`` turns, oldest first (fork-aware).

        Costs what it returns, not the conversation's length (``recent_blocks`` scans it all).

        Returns:
            ``(turn position, iteration position, block)`` tuples.

        Raises:
            NotFound: unknown conversation.
        """
        return await self._run(reads.last_blocks, conversation_id, limit)


def _version_size(version: VarVersion) -> int:
    return len(version.encoded or "") + sum(len(data) for _, data in version.chunks)


def _block_size(block: BlockResult) -> int:
    return len(block.code) + len(block.result_encoded or "") + len(block.stdout) + len(block.stderr)
