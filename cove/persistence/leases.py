"""Conversation leases and crash recovery.

A lease (``lease_owner``, ``lease_until`` on the conversation row) says which process is
running turns in a conversation. Two cove processes on one database use it so they never run
the same conversation at once. A turn left ``running`` with no live lease behind it belongs to
a process that died: it is marked ``interrupted``, and its committed iterations stay.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from cove.errors import Busy, NotFound
from cove.persistence import cancels
from cove.persistence.connection import immediate
from cove.persistence.search_index import index_blocks
from cove.persistence.totals import RECORDED_TOTALS

INTERRUPTED = "the process running this turn stopped before it finished"


def _interrupt(
    conn: sqlite3.Connection, now: float, conversations: str, params: list[object]
) -> int:
    """Mark running turns (and their running iterations) of the selected conversations.

    ``conversations`` is a subquery selecting conversation ids. Returns the number of turns.
    """
    running = (
        "SELECT id FROM iteration WHERE status = 'running' AND turn_id IN"
        f" (SELECT id FROM turn WHERE status = 'running' AND conversation_id IN ({conversations}))"
    )
    index_blocks(conn, running, params)  # their blocks were never indexed for search
    turns = f"SELECT id FROM turn WHERE status = 'running' AND conversation_id IN ({conversations})"
    cancels.clear(conn, turns, params)  # nobody is left to obey a stop asked of them
    conn.execute(f"UPDATE iteration SET status = 'interrupted' WHERE id IN ({running})", params)
    cursor = conn.execute(
        "UPDATE turn SET status = 'interrupted', finished_at = ?, error = coalesce(error, ?),"
        f" {RECORDED_TOTALS}"
        f" WHERE status = 'running' AND conversation_id IN ({conversations})",
        [now, INTERRUPTED, *params],
    )
    return cursor.rowcount


def recover(conn: sqlite3.Connection, now: float) -> int:
    """Interrupt running turns whose conversation has no live lease; return how many."""
    with immediate(conn):
        return _interrupt(
            conn,
            now,
            "SELECT id FROM conversation WHERE lease_until IS NULL OR lease_until <= ?",
            [now],
        )


def acquire(
    conn: sqlite3.Connection, now: float, conversation_id: str, owner: str, ttl_s: float
) -> int:
    """Take or renew the lease and return its epoch (see ``fence.py``).

    Taking it from another holder (a dead or expired one, or nobody) interrupts that holder's
    turns and raises the epoch, so the writes it still has in flight are refused.
    """
    with immediate(conn):
        row = conn.execute(
            "SELECT lease_owner, lease_until, lease_epoch FROM conversation WHERE id = ?",
            (conversation_id,),
        ).fetchone()
        if row is None:
            raise NotFound("conversation", conversation_id)
        holder, until, epoch = row
        if holder is not None and holder != owner and until is not None and until > now:
            raise Busy(conversation_id, holder)
        if holder != owner:
            # Whoever ran turns here before is gone (its lease expired or it never held one),
            # so nothing will ever finish those turns.
            _interrupt(conn, now, "?", [conversation_id])
            epoch += 1
        conn.execute(
            "UPDATE conversation SET lease_owner = ?, lease_until = ?, lease_epoch = ?"
            " WHERE id = ?",
            (owner, now + ttl_s, epoch, conversation_id),
        )
        return int(epoch)


def renew(
    conn: sqlite3.Connection, now: float, conversation_id: str, owner: str, ttl_s: float
) -> None:
    """Extend a lease this owner still holds; ``Busy`` if it was lost."""
    with immediate(conn):
        row = conn.execute(
            "SELECT lease_owner FROM conversation WHERE id = ?", (conversation_id,)
        ).fetchone()
        if row is None:
            raise NotFound("conversation", conversation_id)
        if row[0] != owner:
            raise Busy(
                conversation_id,
                row[0],
                message=f"the lease on conversation {conversation_id} was lost "
                f"(now held by {row[0] or 'nobody'})",
            )
        conn.execute(
            "UPDATE conversation SET lease_until = ? WHERE id = ?",
            (now + ttl_s, conversation_id),
        )


def settled_epoch(conn: sqlite3.Connection, conversation_id: str) -> int | None:
    """The lease's epoch while nobody holds the lease, else None.

    Every holder raises the epoch when it takes the lease, so a process that read its state of
    the conversation at epoch E, while nobody held the lease, knows that nobody else wrote since
    if its own next lease has epoch E + 1.
    """
    row = conn.execute(
        "SELECT lease_owner, lease_epoch FROM conversation WHERE id = ?", (conversation_id,)
    ).fetchone()
    if row is None:
        raise NotFound("conversation", conversation_id)
    return None if row[0] is not None else int(row[1])


def release(conn: sqlite3.Connection, conversation_id: str, owner: str) -> None:
    """Give the lease up if this owner holds it; otherwise do nothing."""
    with immediate(conn):
        conn.execute(
            "UPDATE conversation SET lease_owner = NULL, lease_until = NULL"
            " WHERE id = ? AND lease_owner = ?",
            (conversation_id, owner),
        )


def reap(conn: sqlite3.Connection, now: float, is_dead: Callable[[str], bool]) -> int:
    """Free leases whose owner ``is_dead`` says is gone, interrupting their running turns.

    Lets a restarted process clean up after a crashed one on the same host at once, instead
    of waiting for the leases to expire. Returns how many leases were freed.
    """
    with immediate(conn):
        held = conn.execute(
            "SELECT id, lease_owner FROM conversation WHERE lease_owner IS NOT NULL"
        ).fetchall()
        dead = [conversation_id for conversation_id, owner in held if is_dead(owner)]
        for conversation_id in dead:
            _interrupt(conn, now, "?", [conversation_id])
            conn.execute(
                "UPDATE conversation SET lease_owner = NULL, lease_until = NULL WHERE id = ?",
                (conversation_id,),
            )
        return len(dead)
