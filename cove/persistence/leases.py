"""Conversation leases and crash recovery.

A lease (``lease_owner``, ``lease_until`` on the conversation row) says which process is
running turns in a conversation. Two cove processes on one database use it so they never run
the same conversation at once. A turn left ``running`` with no live lease behind it belongs to
a process that died: it is marked ``interrupted``, and its committed iterations stay.

A lease is a row, never a lock held by a connection: taking it is one conditional update
(expired, or already ours), so a holder that dies simply lets it expire, and every new holder
raises the lease's epoch (``fence.py``).
"""

from __future__ import annotations

from collections.abc import Callable

from cove.errors import Busy, NotFound
from cove.persistence import cancels
from cove.persistence.database import Call
from cove.persistence.search_index import index_blocks
from cove.persistence.sql import Sql
from cove.persistence.totals import recorded_totals

INTERRUPTED = "the process running this turn stopped before it finished"


async def _interrupt(db: Sql, now: float, conversations: str, params: list[object]) -> int:
    """Mark running turns (and their running iterations) of the selected conversations.

    ``conversations`` is a subquery selecting conversation ids. Returns the number of turns.
    """
    running = (
        "SELECT id FROM iteration WHERE status = 'running' AND turn_id IN"
        f" (SELECT id FROM turn WHERE status = 'running' AND conversation_id IN ({conversations}))"
    )
    await index_blocks(db, running, params)  # their blocks were never indexed for search
    turns = f"SELECT id FROM turn WHERE status = 'running' AND conversation_id IN ({conversations})"
    await cancels.clear(db, turns, params)  # nobody is left to obey a stop asked of them
    await db.run(f"UPDATE iteration SET status = 'interrupted' WHERE id IN ({running})", params)
    return await db.run(
        "UPDATE turn SET status = 'interrupted', finished_at = ?, error = coalesce(error, ?),"
        f" {recorded_totals(db.dialect)}"
        f" WHERE status = 'running' AND conversation_id IN ({conversations})",
        [now, INTERRUPTED, *params],
    )


async def interrupt_orphans(call: Call) -> int:
    """Mark ``interrupted`` the running turns whose conversation has no live lease.

    Returns:
        How many turns were interrupted.
    """
    async with call.writing() as db:
        return await _interrupt(
            db,
            call.now,
            "SELECT id FROM conversation WHERE lease_until IS NULL OR lease_until <= ?",
            [call.now],
        )


async def acquire_lease(call: Call, conversation_id: str, owner: str, ttl_s: float) -> int:
    """Take the conversation's lease for ``ttl_s`` seconds, or renew it if already ours.

    Taking over an expired (or absent) lease from another owner marks that conversation's
    running turns and iterations ``interrupted``, in the same transaction, and raises the
    lease's epoch. Returns the epoch, which the turn's writes then carry (``fence.py``).

    Raises:
        Busy: another owner holds a live lease.
        NotFound: unknown conversation.
    """
    now = call.now
    async with call.writing() as db:
        renewed = await db.value(
            "UPDATE conversation SET lease_until = ? WHERE id = ? AND lease_owner = ?"
            " RETURNING lease_epoch",
            (now + ttl_s, conversation_id, owner),
        )
        if renewed is not None:
            return int(renewed)
        taken = await db.value(
            "UPDATE conversation SET lease_owner = ?, lease_until = ?,"
            " lease_epoch = lease_epoch + 1 WHERE id = ? AND (lease_owner IS NULL"
            " OR lease_until IS NULL OR lease_until <= ?) RETURNING lease_epoch",
            (owner, now + ttl_s, conversation_id, now),
        )
        if taken is None:
            holder = await db.row(
                "SELECT lease_owner FROM conversation WHERE id = ?", (conversation_id,)
            )
            if holder is None:
                raise NotFound("conversation", conversation_id)
            raise Busy(conversation_id, holder[0])
        # Whoever ran turns here before is gone (its lease expired or it never held one), so
        # nothing will ever finish those turns.
        await _interrupt(db, now, "?", [conversation_id])
        return int(taken)


async def renew_lease(call: Call, conversation_id: str, owner: str, ttl_s: float) -> None:
    """Extend a lease ``owner`` holds. Raises ``Busy`` if it was lost, ``NotFound``."""
    async with call.writing() as db:
        changed = await db.run(
            "UPDATE conversation SET lease_until = ? WHERE id = ? AND lease_owner = ?",
            (call.now + ttl_s, conversation_id, owner),
        )
        if changed:
            return
        row = await db.row("SELECT lease_owner FROM conversation WHERE id = ?", (conversation_id,))
        if row is None:
            raise NotFound("conversation", conversation_id)
        raise Busy(
            conversation_id,
            row[0],
            message=f"the lease on conversation {conversation_id} was lost "
            f"(now held by {row[0] or 'nobody'})",
        )


async def settled_epoch(call: Call, conversation_id: str) -> int | None:
    """The lease's epoch while nobody holds the lease, else None.

    Every holder raises the epoch when it takes the lease, so a process that read its state of
    the conversation at epoch E, while nobody held the lease, knows that nobody else wrote since
    if its own next lease has epoch E + 1.

    Raises:
        NotFound: unknown conversation.
    """
    async with call.reading() as db:
        row = await db.row(
            "SELECT lease_owner, lease_epoch FROM conversation WHERE id = ?", (conversation_id,)
        )
    if row is None:
        raise NotFound("conversation", conversation_id)
    return None if row[0] is not None else int(row[1])


async def release_lease(call: Call, conversation_id: str, owner: str) -> None:
    """Give up the lease if ``owner`` holds it; a no-op otherwise (also when unknown)."""
    async with call.writing() as db:
        await db.run(
            "UPDATE conversation SET lease_owner = NULL, lease_until = NULL"
            " WHERE id = ? AND lease_owner = ?",
            (conversation_id, owner),
        )


async def reap_dead_leases(call: Call, is_dead: Callable[[str], bool]) -> int:
    """Free every lease whose owner ``is_dead`` reports gone, interrupting its turns.

    Lets a restarted process clean up after a crashed one on the same host at once, instead of
    waiting for the leases to expire. ``is_dead`` runs inside the transaction, so it must be
    quick (e.g. a signal-0 ``os.kill`` probe of a pid on this host).

    Returns:
        How many leases were freed.
    """
    async with call.writing() as db:
        held = await db.rows(
            "SELECT id, lease_owner FROM conversation WHERE lease_owner IS NOT NULL"
            + db.dialect.lock()
        )
        dead = [str(row[0]) for row in held if is_dead(str(row[1]))]
        for conversation_id in dead:
            await _interrupt(db, call.now, "?", [conversation_id])
            await db.run(
                "UPDATE conversation SET lease_owner = NULL, lease_until = NULL WHERE id = ?",
                (conversation_id,),
            )
        return len(dead)
