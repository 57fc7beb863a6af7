"""The inbox: deliveries kept until they are handled, each run once by one process (migration
0024).

A sender that is not asked again for what it delivered — Telegram, once the webhook answered
200 — must find it kept before it is acknowledged: ``receive_delivery`` records the delivery's
name (``deliveries.record_name``, so a repeat is still dropped) and keeps its body in the same
transaction. The process that received it holds a *claim*: it renews the claims it holds
(``renew_deliveries``), and a claim it lets expire (it died, or stalled) or gives back
(``release_deliveries``, when it stops) lets any process take the row over
(``take_deliveries``). A row is deleted once it is handled (``finish_delivery``).

Taking over can never run a delivery twice:

- what runs without a turn (a bot command) is started once: ``start_delivery`` marks the row
  started only for its holder and only the first time; a row found started after a takeover
  is not run again (the caller tells its sender it may not have finished);
- a delivery that sends a turn is started under the conversation's lease:
  ``start_delivered_turn``, fenced like every turn write, records the conversation and the
  position the turn is about to take, ``start_turn`` records the delivery's name with the turn,
  and a delivery whose recorded position holds a turn of that name has run. A holder stalled
  past a takeover of the lease
  cannot record the turn any more (its writes are refused by the fence), so whether the turn
  exists is decided once the lease is the caller's.

Order: each row has a *lane* (a chat) and a *seq* (the update's id); ``deliveries_ahead`` lists
what comes before a row in its lane, so a process runs a lane's deliveries in their order
whichever process received them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from cove.errors import CoveError
from cove.persistence.chain import last_position
from cove.persistence.database import Call
from cove.persistence.deliveries import record_name
from cove.persistence.fence import check_fence
from cove.persistence.sql import Row, Sql

#: How a delivery's start went: it starts now (``start``), it started before (``ran``: a
#: takeover found it started), or it is not the caller's (``taken``: another process holds it,
#: or it was handled and is gone).
Start = Literal["start", "ran", "taken"]

_COLUMNS = "key, lane, seq, body, holder, held_until, started_at"


@dataclass(frozen=True)
class InboxEntry:
    """One delivery kept in the inbox.

    Attributes:
        key: Its name (as recorded in ``delivery``).
        lane: What it keeps its order in (a chat); None: it keeps none.
        seq: Its place in the lane (a Telegram update's id).
        body: What was delivered (an update's JSON).
        holder: The process running it (a lease owner id); None: free to take.
        held_until: When the holder's claim ends (seconds since the epoch).
        started: It started running (a command, or a turn about to be recorded).
    """

    key: str
    lane: str | None
    seq: int
    body: str
    holder: str | None
    held_until: float
    started: bool


@dataclass(frozen=True)
class InboxClaims:
    """Who holds a sender's deliveries now.

    Attributes:
        holders: The processes with a live claim on one or more.
        free: How many no live claim holds (their holder's claim ended, or it gave them back).
    """

    holders: tuple[str, ...]
    free: int


def _entry(row: Row) -> InboxEntry:
    return InboxEntry(
        key=str(row[0]),
        lane=None if row[1] is None else str(row[1]),
        seq=int(row[2]),
        body=str(row[3]),
        holder=None if row[4] is None else str(row[4]),
        held_until=float(row[5]),
        started=row[6] is not None,
    )


async def receive_delivery(
    call: Call,
    key: str,
    *,
    sender: str,
    lane: str | None,
    seq: int,
    body: str,
    holder: str | None,
    claim_s: float,
    keep_s: float,
) -> bool:
    """Keep a delivery until it is handled; whether it is new (a repeat keeps nothing).

    Args:
        key: The delivery's name, unique for its sender.
        sender: Whose deliveries it is among (``telegram:<bot id>``).
        lane: What it keeps its order in; None: none.
        seq: Its place in the lane.
        body: What was delivered.
        holder: The process that will run it, holding it for ``claim_s``; None: it is left
            for any process to take (the receiving one is stopping).
        keep_s: How long its name is remembered (``deliveries.record_name``).

    Raises:
        CoveError: An empty key or sender, or a negative time.
    """
    if not sender or claim_s < 0:
        raise CoveError("a kept delivery needs a sender and a non-negative claim")
    async with call.writing() as db:
        if not await record_name(db, key, call.now, keep_s):
            return False
        held_until = call.now + claim_s if holder is not None else 0.0
        await db.run(
            "INSERT INTO inbox (key, sender, lane, seq, body, received_at, holder, held_until)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (key, sender, lane, seq, body, call.now, holder, held_until),
        )
    return True


async def take_deliveries(
    call: Call, sender: str, holder: str, claim_s: float, dead: Sequence[str] = ()
) -> list[InboxEntry]:
    """Take over the sender's deliveries whose claim ended, was given back, or is held by a
    process in ``dead``; the ones taken, by lane and seq.

    One conditional ``UPDATE``: two processes never both take a row (on PostgreSQL the second
    re-reads a row the first took, whose claim no longer ended).
    """
    gone = f" OR holder IN ({', '.join('?' for _ in dead)})" if dead else ""
    async with call.writing() as db:
        taken = await db.rows(
            "UPDATE inbox SET holder = ?, held_until = ?"
            f" WHERE sender = ? AND (held_until <= ?{gone}) RETURNING {_COLUMNS}",
            (holder, call.now + claim_s, sender, call.now, *dead),
        )
    return sorted((_entry(row) for row in taken), key=lambda e: (e.lane or "", e.seq))


async def inbox_claims(call: Call, sender: str) -> InboxClaims:
    """Who holds the sender's deliveries now, read without writing (a process looks every
    second or so; a write would tell every other node of a commit)."""
    async with call.reading() as db:
        rows = await db.rows(
            "SELECT CASE WHEN held_until > ? THEN holder END AS h, count(*) FROM inbox"
            " WHERE sender = ? GROUP BY h",
            (call.now, sender),
        )
    holders = sorted(str(row[0]) for row in rows if row[0] is not None)
    free = sum(int(row[1]) for row in rows if row[0] is None)
    return InboxClaims(tuple(holders), free)


async def renew_deliveries(
    call: Call, sender: str, holder: str, claim_s: float, keys: Sequence[str]
) -> int:
    """Extend ``holder``'s claims on the deliveries ``keys`` (the ones it is running) to
    ``claim_s`` from now; how many it still holds. A delivery it holds but no longer runs (its
    finish failed) is left to expire and be taken over."""
    if not keys:
        return 0
    listed = ", ".join("?" for _ in keys)
    async with call.writing() as db:
        return await db.run(
            "UPDATE inbox SET held_until = ? WHERE sender = ? AND holder = ?"
            f" AND key IN ({listed})",
            (call.now + claim_s, sender, holder, *keys),
            last=True,
        )


async def release_deliveries(call: Call, sender: str, holder: str, key: str | None = None) -> int:
    """Give back ``holder``'s claim on delivery ``key`` (None: on all of the sender's), so any
    process may take it at once; how many were given back."""
    only = " AND key = ?" if key is not None else ""
    async with call.writing() as db:
        return await db.run(
            "UPDATE inbox SET holder = NULL, held_until = 0 WHERE sender = ? AND holder = ?" + only,
            (sender, holder, *(() if key is None else (key,))),
            last=True,
        )


async def start_delivery(call: Call, key: str, holder: str) -> Start:
    """Start delivery ``key`` for ``holder``, once: ``start`` the first time for its holder,
    ``ran`` when it started before (under an earlier holder), ``taken`` when another process
    holds it or it is gone."""
    async with call.writing() as db:
        started = await db.value(
            "UPDATE inbox SET started_at = ? WHERE key = ? AND holder = ?"
            " AND started_at IS NULL RETURNING key",
            (call.now, key, holder),
            last=True,
        )
        if started is not None:
            return "start"
        return await _why_not(db, key, holder)


async def start_delivered_turn(call: Call, key: str, holder: str, conversation_id: str) -> Start:
    """Start the turn that delivery ``key`` sends to the conversation, under the caller's
    lease (its fence is checked): ``start`` records the conversation and the position the turn
    takes next (the caller then starts it, under the same lease, and ``start_turn`` records
    the delivery's name with it); ``ran`` when the position recorded by an earlier start holds
    the turn of this delivery (its holder died after recording it); ``taken`` when the
    delivery is not ``holder``'s.

    Raises:
        Busy: The caller's lease was taken over (nothing is written).
        NotFound: The conversation is gone.
    """
    async with call.writing() as db:
        await check_fence(db, call.fence, conversation_id)
        row = await db.row(
            "SELECT holder, conversation_id, position FROM inbox WHERE key = ?" + db.dialect.lock(),
            (key,),
        )
        if row is None or row[0] != holder:
            return "taken"
        if row[2] is not None and await _turn_of(db, str(row[1]), int(row[2]), key):
            return "ran"
        position = await last_position(db, conversation_id) + 1
        await db.run(
            "UPDATE inbox SET started_at = ?, conversation_id = ?, position = ? WHERE key = ?",
            (call.now, conversation_id, position, key),
        )
    return "start"


async def finish_delivery(call: Call, key: str, holder: str) -> bool:
    """Delete delivery ``key``, handled by ``holder``; False when ``holder`` no longer held it
    (another process took it over, or it was finished already)."""
    async with call.writing() as db:
        deleted = await db.run(
            "DELETE FROM inbox WHERE key = ? AND holder = ?", (key, holder), last=True
        )
    return bool(deleted)


async def deliveries_ahead(call: Call, sender: str, lane: str, seq: int) -> list[InboxEntry]:
    """The sender's deliveries before ``seq`` in ``lane`` that are not finished, in order."""
    async with call.reading() as db:
        rows = await db.rows(
            f"SELECT {_COLUMNS} FROM inbox WHERE sender = ? AND lane = ? AND seq < ? ORDER BY seq",
            (sender, lane, seq),
        )
    return [_entry(row) for row in rows]


async def _turn_of(db: Sql, conversation_id: str, position: int, key: str) -> bool:
    """Whether the conversation's turn at ``position`` exists and answers delivery ``key``."""
    found = await db.value(
        "SELECT 1 FROM turn WHERE conversation_id = ? AND position = ? AND delivery = ?",
        (conversation_id, position, key),
    )
    return found is not None


async def _why_not(db: Sql, key: str, holder: str) -> Start:
    """Why ``holder`` could not start delivery ``key``: started before, or not its own."""
    row = await db.row("SELECT holder, started_at FROM inbox WHERE key = ?", (key,))
    if row is None or row[0] != holder:
        return "taken"
    return "ran"
