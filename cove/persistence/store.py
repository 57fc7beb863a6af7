"""The store: cove's one database behind one async interface, on SQLite or PostgreSQL.

``Store`` is the interface the engine and the conversation layer use; no SQL is written above
it. Each of its methods is one unit function (``writes``, ``iterations``, ``reads``, ``leases``,
``cancels``, ``notes``, ``values``, ``history``, ``pacing``, ``forks``, ``profiles``, …) bound
here by name, so its signature and docstring are written once, where its statements are. A unit
receives a ``Call`` (the database, the time of the call, the turn's fence, the history budget)
and runs on the backend's read connection or in one write transaction; a write unit runs to its
end even when its caller is cancelled (a write unit is never half-done; its result is dropped)::

    async with Store.open(path_or_url) as store:
        conversation = await store.create_conversation(channel="cli")
        turn = await store.start_turn(conversation.id, "question")
"""

from __future__ import annotations

import asyncio
import functools
import os
import time
from collections.abc import Awaitable, Callable, Coroutine
from types import TracebackType
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar, overload

from cove.errors import CoveError, StoreError
from cove.persistence import (
    cancels,
    deliveries,
    extension_use,
    inbox,
    iterations,
    leases,
    notes,
    pacing,
    profiles,
    reads,
    recent,
    values,
    variables,
    writes,
)
from cove.persistence import forks as forking
from cove.persistence import history as thinning
from cove.persistence import search as full_text
from cove.persistence.database import Call, Commits, Database, Transactions
from cove.persistence.fence import current_fence
from cove.persistence.locations import open_database
from cove.persistence.opener import Opener

#: The history budget of each conversation when none is given (``history.py``).
DEFAULT_HISTORY_BUDGET = 1024 * 1024 * 1024

P = ParamSpec("P")
T = TypeVar("T")
Clock = Callable[[], float]
Method = Callable[Concatenate[Call, P], Coroutine[Any, Any, T]]


class _Method(Generic[P, T]):
    """A unit function as a method of ``Store``: ``store.name(...)`` calls ``fn(call, ...)``."""

    def __init__(self, fn: Method[P, T], *, writes: bool) -> None:
        self.fn = fn
        self.writes = writes
        self.name = fn.__name__
        self.__doc__ = fn.__doc__

    def __set_name__(self, owner: type[Store], name: str) -> None:
        self.name = name

    @overload
    def __get__(self, store: None, owner: type[Store]) -> _Method[P, T]: ...

    @overload
    def __get__(self, store: Store, owner: type[Store]) -> Callable[P, Awaitable[T]]: ...

    def __get__(
        self, store: Store | None, owner: type[Store]
    ) -> _Method[P, T] | Callable[P, Awaitable[T]]:
        if store is None:
            return self
        fn, writes_ = self.fn, self.writes

        @functools.wraps(fn)
        async def method(*args: P.args, **kwargs: P.kwargs) -> T:
            return await store._call(fn, writes_, *args, **kwargs)

        # Kept on the store: later lookups find it there and make no new function.
        store.__dict__[self.name] = method
        return method


def _reads(fn: Method[P, T]) -> _Method[P, T]:
    return _Method(fn, writes=False)


def _writes(fn: Method[P, T]) -> _Method[P, T]:
    return _Method(fn, writes=True)


class Store:
    """cove's database: conversations, turns, iterations, blocks and variable versions.

    Create with ``Store.open(location)``; use as an async context manager or call ``aclose()``.
    Times are seconds since the epoch from ``clock`` (a seam for lease-expiry tests).
    """

    def __init__(self, db: Database, clock: Clock, history_budget: int) -> None:
        self._db = db
        self._clock = clock
        self._closed = False
        self._pending: set[asyncio.Task[Any]] = set()
        self.history_budget = history_budget

    @staticmethod
    def open(
        location: str | os.PathLike[str],
        *,
        clock: Clock = time.time,
        read_only: bool = False,
        history_budget: int = DEFAULT_HISTORY_BUDGET,
    ) -> Opener[Store]:
        """Open (creating and migrating if needed) the database at ``location``.

        Args:
            location: a SQLite file path, ``":memory:"`` for a private in-memory database, or
                a ``postgresql://`` URL.
            clock: the time source for timestamps and leases.
            read_only: open for reading only: nothing is created or written (no migration, no
                crash recovery); a missing or empty SQLite file reads as an empty database. A
                schema older than this cove's is upgraded first when it can be written.
            history_budget: the bytes each conversation's past versions may keep beyond its
                live state (``history.py``); older versions are thinned past it.

        Returns:
            ``await`` it for the store, or ``async with`` it to have the store closed on exit.

        Raises:
            NotADatabase: the path is a directory, not SQLite, or another application's
                SQLite database (it is not modified).
            SchemaTooNew: the database was written by a newer cove (it is not modified).
            StoreError: the database cannot be opened, reached or migrated.
        """
        where = os.fspath(location)

        async def open_() -> Store:
            db = await open_database(where, read_only=read_only)
            store = Store(db, clock, history_budget)
            if not read_only:
                try:
                    await store.interrupt_orphans()
                    await store.collect_values()  # what a collection cut short by a crash left
                except BaseException:
                    await store.aclose()
                    raise
            return store

        return Opener(open_, Store.aclose)

    @property
    def path(self) -> str:
        """Where the database is: its file path, or its URL without the password."""
        return self._db.location

    @property
    def created(self) -> bool:
        """True when this open created the database (a new file, or an empty PostgreSQL one)."""
        return self._db.created

    @property
    def read_only(self) -> bool:
        """True when the store was opened for reading only; writes then fail."""
        return self._db.read_only

    @property
    def schema_version(self) -> int:
        """The schema version of the open database (the latest migration applied)."""
        return self._db.schema_version

    @property
    def shared(self) -> bool:
        """Whether other processes can use this database (not a private in-memory one)."""
        return self._db.shared

    @property
    def kind(self) -> str:
        """``sqlite`` or ``postgres``."""
        return self._db.dialect.name

    @property
    def commits(self) -> Commits:
        """Tells of commits any process makes to the database (for watchers)."""
        return self._db.commits

    async def _call(self, fn: Method[P, T], writes_: bool, *args: P.args, **kwargs: P.kwargs) -> T:
        """Run one unit with a ``Call`` made now (the caller's fence included)."""
        if self._closed:
            raise StoreError(f"the store for {self.path} is closed")
        now, fence, budget = self._clock(), current_fence(), self.history_budget

        def unit(db: Transactions) -> Coroutine[Any, Any, T]:
            return fn(Call(db, now, fence, budget), *args, **kwargs)

        try:
            if not writes_:
                return await self._db.run(unit)
            # Shielded: a cancelled caller does not stop a write unit begun for it.
            task = asyncio.ensure_future(self._db.run(unit))
            self._pending.add(task)
            task.add_done_callback(self._settled)
            return await asyncio.shield(task)
        except CoveError:
            raise
        except self._db.errors as exc:
            raise StoreError(f"database error in {self.path}: {exc}") from exc

    def _settled(self, task: asyncio.Task[Any]) -> None:
        self._pending.discard(task)
        if not task.cancelled():
            task.exception()  # retrieved: a unit whose caller went away fails quietly

    async def aclose(self) -> None:
        """Close the database (after the write units still running); later calls raise
        ``StoreError``. Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._pending:
            await asyncio.wait(set(self._pending))
        await self._db.aclose()

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
    create_conversation = _writes(writes.create_conversation)
    find_external = _reads(reads.find_external)
    get_conversation = _reads(reads.get_conversation)
    resolve = _reads(reads.resolve)
    list_conversations = _reads(reads.list_conversations)
    conversation_scan = _reads(reads.conversation_scan)
    conversation_ids = _reads(reads.conversation_ids)
    forks = _reads(forking.forks)
    fork_tree = _reads(forking.tree)
    turn_requests = _reads(forking.requests)
    set_title = _writes(writes.set_title)
    profile = _reads(profiles.profile)
    change_profile = _writes(profiles.change_profile)
    delete_conversation = _writes(writes.delete_conversation)

    # --- leases and cancel requests ------------------------------------------------------
    acquire_lease = _writes(leases.acquire_lease)
    settled_epoch = _reads(leases.settled_epoch)
    renew_lease = _writes(leases.renew_lease)
    release_lease = _writes(leases.release_lease)
    reap_dead_leases = _writes(leases.reap_dead_leases)
    interrupt_orphans = _writes(leases.interrupt_orphans)
    request_cancel = _writes(cancels.request_cancel)
    cancel_requests = _reads(cancels.cancel_requests)
    take_send_slot = _writes(pacing.take_send_slot)
    first_delivery = _writes(deliveries.first_delivery)

    # --- the inbox: deliveries kept until handled ----------------------------------------
    receive_delivery = _writes(inbox.receive_delivery)
    take_deliveries = _writes(inbox.take_deliveries)
    inbox_claims = _reads(inbox.inbox_claims)
    renew_deliveries = _writes(inbox.renew_deliveries)
    release_deliveries = _writes(inbox.release_deliveries)
    start_delivery = _writes(inbox.start_delivery)
    start_delivered_turn = _writes(inbox.start_delivered_turn)
    finish_delivery = _writes(inbox.finish_delivery)
    deliveries_ahead = _reads(inbox.deliveries_ahead)

    # --- a conversation's extensions and the approvals of their calls --------------------
    set_extension_use = _writes(extension_use.set_extension_use)
    conversation_extensions = _reads(extension_use.extension_use)
    remember_rule = _writes(extension_use.remember_rule)
    record_approval = _writes(extension_use.record_approval)
    approvals = _reads(extension_use.approvals)

    # --- turns and iterations ------------------------------------------------------------
    start_turn = _writes(writes.start_turn)
    start_iteration = _writes(iterations.start_iteration)
    add_steering = _writes(writes.add_steering)
    add_note = _writes(notes.add_note)
    record_reply = _writes(iterations.record_reply)
    record_block = _writes(iterations.record_block)
    finish_iteration = _writes(iterations.finish_iteration)
    finish_turn = _writes(writes.finish_turn)
    get_turn = _reads(reads.get_turn)
    turns = _reads(reads.turns)
    transcript = _reads(reads.transcript)
    transcript_since = _reads(reads.transcript_since)
    change_markers = _reads(reads.change_markers)
    recent_blocks = _reads(reads.recent_blocks)
    subqueries = _reads(reads.subqueries)
    system_prompt = _reads(reads.system_prompt)
    figure = _reads(reads.figure)

    # --- variables, values and search ----------------------------------------------------
    var_history = _reads(variables.var_history)
    vars_as_of = _reads(variables.vars_as_of)
    var_version = _reads(variables.var_version)
    value_chunks = _reads(values.value_chunks)
    chunks = _reads(values.chunks)
    history = _reads(thinning.history)
    value_stats = _reads(values.value_stats)
    largest_values = _reads(thinning.largest_values)
    keep_history = _writes(thinning.keep_history)
    collect_values = _writes(values.collect_values)
    search = _reads(full_text.search)

    # --- bounded reads for a turn's start ------------------------------------------------
    last_turn = _reads(recent.last_turn)
    last_thinking = _reads(recent.last_thinking)
    last_blocks = _reads(recent.last_blocks)
