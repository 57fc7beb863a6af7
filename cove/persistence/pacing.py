"""Send slots: a pace that every process sharing the database keeps together (migration 0020).

A channel that calls an outside API under rate limits (Telegram's Bot API: about one message a
second per chat, 30 a second overall) takes a slot before each call. A slot is one or more
*keys* (a chat, the whole bot), each with the interval its calls must keep. ``take_send_slot``
moves every key's ``next_at`` on in one transaction, each with one conditional
``UPDATE … RETURNING``: a key whose next slot lies more than ``horizon_s`` ahead is not taken
(the caller waits and asks again), so nobody reserves far ahead. The row is the only state: two
processes never get the same slot (SQLite's one writer; PostgreSQL's row lock, under which the
``UPDATE`` reads the row a concurrent taker left), and a process that dies holds nothing but the
slots it took, none more than ``horizon_s`` plus an interval ahead of its last call.

Times are the store's clock (seconds since the epoch), so the processes' clocks must agree:
a clock ``d`` seconds off shifts that process's calls by ``d``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from cove.errors import CoveError
from cove.persistence.database import Call
from cove.persistence.sql import Sql


@dataclass(frozen=True)
class SendSlot:
    """The answer of ``take_send_slot``.

    Attributes:
        taken: True when the slot is the caller's: it may call once ``wait_s`` has passed.
            False when a key is booked beyond the horizon: nothing was taken; ask again after
            ``wait_s``.
        wait_s: Seconds from the call of ``take_send_slot`` (never negative).
        at: When that is, by the store's clock.
    """

    taken: bool
    wait_s: float
    at: float


class _Later(Exception):
    """A key is booked too far ahead: roll the slot's transaction back."""

    def __init__(self, free_at: float) -> None:
        self.free_at = free_at


async def take_send_slot(
    call: Call, keys: Sequence[tuple[str, float]], horizon_s: float
) -> SendSlot:
    """Take the next slot that every key allows, or learn when to ask again.

    Args:
        keys: ``(key, interval_s)`` pairs: after this slot, the key's next call comes at least
            ``interval_s`` later. An empty sequence is a slot now.
        horizon_s: How far ahead of now a slot may be taken.

    Returns:
        The slot (``taken``) and how long to wait before calling; or, untaken, how long to wait
        before asking again.

    Raises:
        CoveError: a negative interval or horizon.
    """
    if horizon_s < 0 or any(interval < 0 for _, interval in keys):
        raise CoveError("a send slot's intervals and horizon must not be negative")
    try:
        async with call.writing() as db:
            at = await _book(db, keys, call.now, call.now + horizon_s)
    except _Later as later:
        retry_at = max(call.now, later.free_at - horizon_s)
        return SendSlot(False, retry_at - call.now, retry_at)
    return SendSlot(True, max(0.0, at - call.now), max(at, call.now))


async def _book(db: Sql, keys: Sequence[tuple[str, float]], now: float, limit: float) -> float:
    """Book every key from the earliest time all allow; the slot's time (inside a write)."""
    later = db.dialect.greatest("next_at", "?1")
    at = now
    for key, interval in keys:
        await db.run(
            "INSERT INTO send_slot (key, next_at) VALUES (?, 0) ON CONFLICT DO NOTHING", (key,)
        )
        booked = await db.value(
            f"UPDATE send_slot SET next_at = {later} + ?2 WHERE key = ?3 AND next_at <= ?4"
            " RETURNING next_at",
            (at, interval, key, limit),
        )
        if booked is None:
            raise _Later(
                float(await db.value("SELECT next_at FROM send_slot WHERE key = ?", (key,)))
            )
        at = float(booked) - interval
    # A later key may have moved the slot past an earlier key's booking: keep its interval after.
    for key, interval in keys[:-1]:
        await db.run(
            f"UPDATE send_slot SET next_at = {db.dialect.greatest('next_at', '?1')} WHERE key = ?2",
            (at + interval, key),
        )
    return at
