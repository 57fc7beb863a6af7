"""The history budget: how much a conversation's past versions may keep (``history_budget_mb``).

Every version is kept, but a version costs what changed (``values.py``), so what grows is the
history: the bytes the conversation's own versions reach beyond what its live state (the latest
version of each variable) reaches. When that exceeds the budget, versions are *thinned*, oldest
first, until the history is at most three quarters of the budget: their values are dropped (the
row stays, with its preview, type and digest; ``thinned`` is set; reading its value says so),
and their chunks that nothing else holds are collected. The order is:

1. versions that are neither the first version of their variable nor the last one of their turn;
2. then the last ones of their turns (but the first);
3. then the first ones.

Never thinned: the live versions, a version some fork sees as live at its fork point, functions
and classes (their source is small), values short enough to be kept in their row (at most 4 KB:
the row costs as much) and versions without a value (deleted, opaque). So the
history never holds more than the budget for longer than one check, and a loop that rewrites a
large value each block cannot fill the disk: what it keeps is its live state and the budget.

The check is cheap to trigger: ``conversation.value_bytes`` counts the chunk bytes the
conversation's versions added; once it grew by the budget since the last check
(``history_mark``), the next write runs ``keep_history``, which measures exactly (the chunk trees
walked in SQL) and resets both figures.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from cove.codec import DEFAULT_MAX_DEPTH, decode, encode_tree
from cove.codec.chunks import refs, text_hash
from cove.errors import CodecError
from cove.persistence.blobs import collect_blobs
from cove.persistence.chain import chain_cte
from cove.persistence.database import Call
from cove.persistence.sql import Sql
from cove.persistence.values import collect_values, release_roots

KEEP_FRACTION = 0.75
"""Thinning stops once the history is at most this fraction of the budget."""


@dataclass(frozen=True)
class HistoryFigures:
    """A conversation's values in bytes: what its live state and its history reach.

    Attributes:
        live_bytes: The latest version of each variable (a fork's inherited ones included).
        history_bytes: The conversation's own other versions, beyond what the live ones reach.
        budget_bytes: The history budget.
        versions: The conversation's own versions.
        thinned: Those of them the budget thinned.
    """

    live_bytes: int
    history_bytes: int
    budget_bytes: int
    versions: int
    thinned: int


@dataclass(frozen=True)
class _Row:
    id: int
    name: str
    turn: int
    version: int
    first: bool = False
    turn_last: bool = False


async def largest_values(call: Call, limit: int) -> list[str]:
    """The conversations whose versions added the most value bytes, largest first."""
    async with call.reading() as db:
        rows = await db.rows(
            "SELECT id FROM conversation WHERE value_bytes > 0 ORDER BY value_bytes DESC LIMIT ?",
            (limit,),
        )
    return [str(row[0]) for row in rows]


async def history(call: Call, conversation_id: str) -> HistoryFigures:
    """A conversation's live and history bytes, its budget and its thinned versions (the exact
    figures: its versions' chunk trees are walked).

    Raises:
        NotFound: unknown conversation.
    """
    async with call.reading() as db:
        live = await _live_ids(db, conversation_id)  # NotFound for an unknown conversation
        past = await _history_ids(db, conversation_id, live)
        counts = await db.row(
            "SELECT count(*), coalesce(sum(thinned), 0) FROM var_version WHERE conversation_id = ?",
            (conversation_id,),
        )
        assert counts is not None
        return HistoryFigures(
            live_bytes=await _bytes(db, live, []),
            history_bytes=await _bytes(db, past, live),
            budget_bytes=call.history_budget,
            versions=int(counts[0]),
            thinned=int(counts[1]),
        )


async def keep_history(call: Call, conversation_id: str) -> int:
    """Thin the conversation's oldest versions while its history exceeds the budget (see the
    module docstring), each batch in a transaction of its own, then collect what that
    released; how many versions were thinned."""
    budget = call.history_budget
    async with call.reading() as db:
        live = await _live_ids(db, conversation_id)
        past = await _bytes(db, await _history_ids(db, conversation_id, live), live)
        tiers = await _tiers(db, conversation_id, set(live)) if past > budget else []
    thinned = 0
    target = int(budget * KEEP_FRACTION)
    for tier in tiers:
        while tier and past > target:
            batch, tier = tier[: max(1, len(tier) // 4)], tier[max(1, len(tier) // 4) :]
            async with call.writing() as db:
                await _thin(db, batch)
            thinned += len(batch)
            async with call.reading() as db:
                past = await _bytes(db, await _history_ids(db, conversation_id, live), live)
    async with call.writing() as db:
        live_bytes = await _bytes(db, live, [])
        await db.run(
            "UPDATE conversation SET value_bytes = ?, history_mark = ? WHERE id = ?",
            (live_bytes + past, live_bytes, conversation_id),
        )
    await collect_values(call)
    return thinned


async def _live_ids(db: Sql, conversation_id: str) -> list[int]:
    """The row ids of the latest version of each name the conversation sees."""
    cte, params = await chain_cte(db, conversation_id)
    query = f"""
        {cte}, ranked AS (
            SELECT v.id, row_number() OVER (
                PARTITION BY v.name
                ORDER BY t.position DESC, i.position DESC, b.position DESC, v.version DESC
            ) AS recency
            FROM var_version v JOIN block b ON b.id = v.block_id
            JOIN iteration i ON i.id = b.iteration_id JOIN turn t ON t.id = i.turn_id
            JOIN chain ON t.conversation_id = chain.cid AND t.position <= chain.lim
        )
        SELECT id FROM ranked WHERE recency = 1
    """
    return [int(row[0]) for row in await db.rows(query, params)]


async def _history_ids(db: Sql, conversation_id: str, live: Sequence[int]) -> list[int]:
    """The conversation's own versions that are not live and hold a value stored apart (in
    chunks, or in a blob before chunks): an inline value is part of its row, not history."""
    keep = set(live)
    rows = await db.rows(
        "SELECT id FROM var_version WHERE conversation_id = ? AND thinned = 0"
        " AND (encoded_blob IS NOT NULL OR root_chunk IS NOT NULL)",
        (conversation_id,),
    )
    return [int(row[0]) for row in rows if int(row[0]) not in keep]


async def _bytes(db: Sql, ids: Sequence[int], beyond: Sequence[int]) -> int:
    """What versions ``ids`` reach (chunks, blobs, inline roots) that versions ``beyond`` do not."""
    if not ids:
        return 0
    dialect = db.dialect
    chosen, other = dialect.id_list(ids), dialect.id_list(beyond)
    walk = """
        SELECT root_chunk FROM var_version
        WHERE root_chunk IS NOT NULL AND id IN ({ids})
        UNION SELECT j.value FROM {name} JOIN value_chunk c ON c.id = {name}.id,
        {children} j
    """
    mine = walk.format(ids=dialect.ids("?1"), name="mine", children=dialect.children("c"))
    theirs = walk.format(ids=dialect.ids("?2"), name="theirs", children=dialect.children("c"))
    chunks = await db.value(
        f"""
        WITH RECURSIVE mine(id) AS ({mine}), theirs(id) AS ({theirs})
        SELECT coalesce(sum(length(data)), 0) FROM value_chunk
        WHERE id IN (SELECT id FROM mine EXCEPT SELECT id FROM theirs)
        """,
        (chosen, other),
    )
    blobs = await db.value(
        f"""
        SELECT coalesce(sum(length(data)), 0) FROM blob WHERE hash IN (
            SELECT encoded_blob FROM var_version WHERE id IN ({dialect.ids("?1")})
            EXCEPT SELECT encoded_blob FROM var_version WHERE id IN ({dialect.ids("?2")})
        )
        """,
        (chosen, other),
    )
    inline = await db.value(
        "SELECT coalesce(sum(length(encoded)), 0) FROM var_version"
        f" WHERE id IN ({dialect.ids('?')})",
        (chosen,),
    )
    return int(chunks) + int(blobs) + int(inline)


async def _tiers(db: Sql, conversation_id: str, live: set[int]) -> list[list[int]]:
    """The versions that may be thinned, in the three tiers of the module docstring, oldest
    first in each."""
    rows = await _own_rows(db, conversation_id)
    protected = live | await _fork_points(db, conversation_id, rows)
    tiers: list[list[int]] = [[], [], []]
    for row in rows:
        if row.id in protected:
            continue
        tiers[2 if row.first else 1 if row.turn_last else 0].append(row.id)
    return tiers


async def _own_rows(db: Sql, conversation_id: str) -> list[_Row]:
    """The conversation's own value versions holding a value, oldest first, with their flags
    (first of their variable, last of their variable in their turn)."""
    found = [
        _Row(int(r[0]), str(r[1]), int(r[2]), int(r[3]), bool(r[4]))
        for r in await db.rows(
            """
            SELECT v.id, v.name, t.position, v.version,
                   v.version = (SELECT min(w.version) FROM var_version w
                                WHERE w.conversation_id = v.conversation_id AND w.name = v.name)
            FROM var_version v JOIN block b ON b.id = v.block_id
            JOIN iteration i ON i.id = b.iteration_id JOIN turn t ON t.id = i.turn_id
            WHERE v.conversation_id = ? AND v.kind = 'value' AND v.thinned = 0
              AND (v.encoded_blob IS NOT NULL OR v.root_chunk IS NOT NULL)
            ORDER BY t.position, i.position, b.position, v.version
            """,
            (conversation_id,),
        )
    ]
    last: dict[tuple[str, int], int] = {}
    for index, row in enumerate(found):
        last[(row.name, row.turn)] = index
    ends = set(last.values())
    return [
        _Row(row.id, row.name, row.turn, row.version, row.first, index in ends)
        for index, row in enumerate(found)
    ]


async def _fork_points(db: Sql, conversation_id: str, rows: list[_Row]) -> set[int]:
    """The versions forks of the conversation (at any depth) see as live at their fork point."""
    limits: set[int] = set()
    level = [(conversation_id, 1 << 62)]
    while level:
        following = []
        for parent, limit in level:
            for child, turn in await db.rows(
                "SELECT id, fork_turn FROM conversation WHERE parent_id = ?", (parent,)
            ):
                seen = min(limit, int(turn))
                limits.add(seen)
                following.append((str(child), seen))
        level = following
    protected: set[int] = set()
    for limit in limits:
        latest: dict[str, int] = {}
        for row in rows:
            if row.turn <= limit:
                latest[row.name] = row.id
        protected.update(latest.values())
    return protected


async def _thin(db: Sql, ids: list[int]) -> None:
    """Drop the values of versions ``ids`` (inside a write): their roots are released, their
    blobs collected when nothing else uses them, their digests kept."""
    dialect = db.dialect
    chosen, among = dialect.id_list(ids), dialect.ids("?")
    for row_id, encoded, blob in await db.rows(
        "SELECT v.id, v.encoded, b.data FROM var_version v"
        " LEFT JOIN blob b ON b.hash = v.encoded_blob"
        f" WHERE v.digest IS NULL AND v.id IN ({among})",
        (chosen,),
    ):
        text = encoded if blob is None else bytes(blob).decode("utf-8", "surrogatepass")
        if text is not None:
            await db.run("UPDATE var_version SET digest = ? WHERE id = ?", (_digest(text), row_id))
    blobs = {
        str(row[0])
        for row in await db.rows(
            "SELECT encoded_blob FROM var_version WHERE encoded_blob IS NOT NULL"
            f" AND id IN ({among})",
            (chosen,),
        )
    }
    await release_roots(db, f"v.id IN ({among})", [chosen])
    await db.run(
        "UPDATE var_version SET encoded = NULL, encoded_blob = NULL, root_chunk = NULL,"
        f" thinned = 1 WHERE id IN ({among})",
        (chosen,),
    )
    await collect_blobs(db, blobs)


def _digest(text: str) -> str:
    """The digest a value stored whole (before chunks) has as a tree: what a replay of the
    conversation would record for it."""
    if refs(text):
        return text_hash(text)
    try:
        value = decode(text)
        return encode_tree(value, max_bytes=1 << 40, max_depth=DEFAULT_MAX_DEPTH).digest
    except CodecError:
        return text_hash(text)
