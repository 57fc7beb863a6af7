"""Deliveries taken once by every process sharing the database (migration 0023).

A sender outside cove may deliver one thing twice: Telegram posts an update to the webhook
again when the first post was not acknowledged in time, and behind a proxy the second post may
reach another node. The sender names each delivery (the bot and the update's id); the first
process to record the name handles it, every other is told it was taken. Recording is one
``INSERT … ON CONFLICT DO NOTHING``: two processes never both win (SQLite's one writer; a
PostgreSQL unique index). Names older than ``keep_s`` — the sender's redelivery window — are
deleted as new ones arrive, and with them the send slots (``pacing.py``) nobody has used for as
long, so neither table grows with the life of the bot. A delivery that must also be kept until
it is handled goes into the inbox in the same transaction (``inbox.py``).
"""

from __future__ import annotations

from cove.errors import CoveError
from cove.persistence.database import Call
from cove.persistence.sql import Sql


async def first_delivery(call: Call, key: str, keep_s: float) -> bool:
    """Record delivery ``key``; whether this is its first delivery (the caller handles it).

    Args:
        key: The delivery's name, unique for its sender (e.g. ``telegram:<bot>:<update_id>``).
        keep_s: How long a name is remembered: a second delivery later than that is new again.

    Raises:
        CoveError: An empty key or a negative ``keep_s``.
    """
    async with call.writing() as db:
        return await record_name(db, key, call.now, keep_s)


async def record_name(db: Sql, key: str, now: float, keep_s: float) -> bool:
    """Record the name ``key`` at ``now`` (inside a write), forgetting names and idle send
    slots older than ``keep_s``; whether the name is new.

    Raises:
        CoveError: An empty key or a negative ``keep_s``.
    """
    if not key or keep_s < 0:
        raise CoveError("a delivery needs a name and a non-negative time to be remembered")
    await db.run("DELETE FROM delivery WHERE at < ?", (now - keep_s,))
    await db.run("DELETE FROM send_slot WHERE next_at < ?", (now - keep_s,))
    taken = await db.value(
        "INSERT INTO delivery (key, at) VALUES (?, ?) ON CONFLICT DO NOTHING RETURNING key",
        (key, now),
    )
    return taken is not None
