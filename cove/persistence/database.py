"""A backend of the store: where its units run (SQLite by default, or PostgreSQL).

A ``Database`` runs units (``run``), says what it is (location, schema version, whether this
open created it) and tells of commits other processes make (``Commits``). A unit is an async
function of ``Transactions``: a connection for reads and one transaction per write. Every unit
of the store receives a ``Call``: those transactions plus what the call carries (its time, the
turn's fence, the history budget).
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from cove.persistence.fence import Fence
from cove.persistence.sql import Dialect, Sql


class Commits(Protocol):
    """Tells waiters that some process committed to the database (a hint: read to see what)."""

    @property
    def version(self) -> int:
        """Counts the commits noticed; compare with ``wait``'s result."""
        ...

    def use(self) -> AbstractAsyncContextManager[None]:
        """Keep noticing commits while the body runs (shared by every user in this process)."""
        ...

    async def wait(self, seen: int, timeout_s: float) -> int:
        """Wait for a commit newer than version ``seen`` (or ``timeout_s``); the version now."""
        ...

    async def aclose(self) -> None:
        """Stop noticing commits and let go of what it holds."""
        ...


T = TypeVar("T")


class Transactions(Protocol):
    """What a unit runs its statements in."""

    @property
    def dialect(self) -> Dialect:
        """Where its SQL differs from the other kind's."""
        ...

    def reading(self) -> AbstractAsyncContextManager[Sql]:
        """A connection for reads (no transaction)."""
        ...

    def writing(self) -> AbstractAsyncContextManager[Sql]:
        """One write transaction: committed when the body ends, rolled back if it raises."""
        ...


#: A unit: an async function of the transactions it runs in.
Unit = Callable[[Transactions], Coroutine[Any, Any, T]]


class Database(Protocol):
    """One open database of either kind."""

    @property
    def dialect(self) -> Dialect:
        """Where its SQL differs from the other kind's."""
        ...

    @property
    def location(self) -> str:
        """What messages call the database: its path, or its URL without a password."""
        ...

    @property
    def schema_version(self) -> int:
        """The latest migration applied."""
        ...

    @property
    def created(self) -> bool:
        """Whether this open created it (a new SQLite file, an empty PostgreSQL database)."""
        ...

    @property
    def read_only(self) -> bool:
        """Whether it was opened for reading only."""
        ...

    @property
    def shared(self) -> bool:
        """Whether other processes can reach it (False for a private in-memory database)."""
        ...

    @property
    def commits(self) -> Commits:
        """Tells of commits any process makes."""
        ...

    @property
    def errors(self) -> tuple[type[BaseException], ...]:
        """The driver's exceptions, which the store turns into ``StoreError``."""
        ...

    async def run(self, unit: Unit[T]) -> T:
        """Run ``unit`` (its reads and write transactions) and return what it returns.

        On SQLite the whole unit runs on the connection's thread at once, so a unit costs one
        hop however many statements it has; it must then wait on nothing but its statements.
        """
        ...

    async def aclose(self) -> None:
        """Close every connection; idempotent."""
        ...


@dataclass(frozen=True)
class Call:
    """One call of a store method, as its unit sees it.

    Attributes:
        db: The transactions the unit runs in.
        now: The time the call was made (seconds since the epoch, from the store's clock).
        fence: The lease the calling turn's writes are made under (``fence.py``), or None.
        history_budget: The bytes each conversation's past versions may keep (``history.py``).
    """

    db: Transactions
    now: float
    fence: Fence | None
    history_budget: int

    def reading(self) -> AbstractAsyncContextManager[Sql]:
        """A connection for reads."""
        return self.db.reading()

    def writing(self) -> AbstractAsyncContextManager[Sql]:
        """One write transaction."""
        return self.db.writing()
