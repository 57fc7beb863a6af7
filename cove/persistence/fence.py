"""Fencing tokens: the lease epoch every write of a turn carries.

A process that takes a conversation's lease gets its epoch (``leases.acquire``), which grows
with every new holder. The conversation layer runs the turn inside ``fenced(Fence(...))``; each
turn write captures the current fence when it is issued (on the caller's task, before the
hand-off to the database thread) and checks it inside its own transaction. A write issued
under an epoch that a takeover has since replaced is refused with ``Busy`` and writes nothing,
however long it waited in a queue. Writes made outside a fence (inspection, replay's scratch
database, tests of the store alone) are not checked.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass

from cove.errors import Busy, NotFound


@dataclass(frozen=True)
class Fence:
    """The lease a turn's writes are made under: its conversation, holder and epoch."""

    conversation_id: str
    owner: str
    epoch: int


# Task-local: a turn's task (and the tasks it starts) see its fence; other tasks see none.
_current: ContextVar[Fence | None] = ContextVar("cove_fence", default=None)


def current_fence() -> Fence | None:
    """The fence of the running task, or None outside a turn."""
    return _current.get()


@contextlib.contextmanager
def fenced(fence: Fence) -> Iterator[Fence]:
    """Make every store write issued in the body (and tasks it starts) carry ``fence``."""
    token = _current.set(fence)
    try:
        yield fence
    finally:
        _current.reset(token)


def check_fence(conn: sqlite3.Connection, fence: Fence | None, conversation_id: str) -> None:
    """Refuse a write to ``conversation_id`` made under a lease that is no longer current.

    Runs inside the write's transaction, so no takeover can come between the check and the
    write. A fence naming another conversation does not apply.

    Raises:
        Busy: The lease now has another epoch or holder (the write must not land).
        NotFound: The conversation is gone.
    """
    if fence is None or fence.conversation_id != conversation_id:
        return
    row = conn.execute(
        "SELECT lease_owner, lease_epoch FROM conversation WHERE id = ?", (conversation_id,)
    ).fetchone()
    if row is None:
        raise NotFound("conversation", conversation_id)
    holder, epoch = row
    if holder != fence.owner or epoch != fence.epoch:
        raise Busy(
            conversation_id,
            holder,
            message=f"a write to conversation {conversation_id} under lease epoch {fence.epoch} "
            f"was refused: the lease is now at epoch {epoch}, held by {holder or 'nobody'} "
            "(another process took the conversation over)",
        )
