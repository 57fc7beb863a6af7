"""Fencing tokens: the lease epoch every write of a turn carries.

A process that takes a conversation's lease gets its epoch (``leases.acquire_lease``), which grows
with every new holder. The conversation layer runs the turn inside ``fenced(Fence(...))``; each
turn write captures the current fence when it is issued (on the caller's task, before the
first statement) and checks it inside its own transaction. A write issued
under an epoch that a takeover has since replaced is refused with ``Busy`` and writes nothing,
however long it waited in a queue. Writes made outside a fence (inspection, replay's scratch
database, tests of the store alone) are not checked.

The check is either a statement of its own (``check_fence``) or, for the writes of an
iteration, a condition of the write itself (``fence_condition``): the write matches no row when
the fence is stale, and only then does the unit read why (``refuse_stale``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass

from cove.errors import Busy, NotFound
from cove.persistence.sql import Sql


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


async def check_fence(db: Sql, fence: Fence | None, conversation_id: str) -> None:
    """Refuse a write to ``conversation_id`` made under a lease that is no longer current.

    Runs inside the write's transaction, so no takeover can come between the check and the
    write (on PostgreSQL the row stays locked until it commits). A fence naming another
    conversation does not apply.

    Raises:
        Busy: The lease now has another epoch or holder (the write must not land).
        NotFound: The conversation is gone.
    """
    if fence is None or fence.conversation_id != conversation_id:
        return
    row = await db.row(
        "SELECT lease_owner, lease_epoch FROM conversation WHERE id = ?" + db.dialect.lock(),
        (conversation_id,),
    )
    if row is None:
        raise NotFound("conversation", conversation_id)
    refuse_stale(fence, conversation_id, row[0], row[1])


def fence_condition(fence: Fence | None, alias: str = "c") -> tuple[str, list[object]]:
    """The condition (`` AND ...``, with its parameters) that the conversation row ``alias`` of a
    write's statement still carries the lease ``fence`` was taken under; empty without a fence.

    A fence naming another conversation does not apply. On PostgreSQL the statement must lock
    that row (``Dialect.lock``), so a takeover waits for the write's commit or refuses it.
    """
    if fence is None:
        return "", []
    return (
        f" AND ({alias}.id <> ? OR ({alias}.lease_owner = ? AND {alias}.lease_epoch = ?))",
        [fence.conversation_id, fence.owner, fence.epoch],
    )


def refuse_stale(fence: Fence | None, conversation_id: str, holder: str | None, epoch: int) -> None:
    """Raise ``Busy`` when ``fence`` applies to the conversation and its lease, now held by
    ``holder`` at ``epoch``, is no longer the fence's."""
    if fence is None or fence.conversation_id != conversation_id:
        return
    if holder != fence.owner or epoch != fence.epoch:
        raise Busy(
            conversation_id,
            holder,
            message=f"a write to conversation {conversation_id} under lease epoch {fence.epoch} "
            f"was refused: the lease is now at epoch {epoch}, held by {holder or 'nobody'} "
            "(another process took the conversation over)",
        )
