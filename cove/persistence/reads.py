"""The read side of the store: synchronous queries run on the store's connection thread.

Every function here is fork-aware where it takes a conversation id: a fork sees its parent's
turns (and everything written in them) up to ``fork_turn``, then its own.
"""

from __future__ import annotations

import sqlite3
from collections import defaultdict
from typing import Any, Literal, cast

from cove.errors import AmbiguousId, NotFound
from cove.persistence import rows
from cove.persistence.chain import chain, chain_cte
from cove.persistence.notes import read_notes
from cove.persistence.records import (
    LABEL_CHARS,
    BlockRecord,
    ConversationRecord,
    ConversationScan,
    SearchHit,
    SubqueryRecord,
    Transcript,
    TurnNote,
    TurnRecord,
    VarVersionRecord,
    conversation_label,
)

_VISIBLE_TURNS = "JOIN chain ON t.conversation_id = chain.cid AND t.position <= chain.lim"


def get_conversation(conn: sqlite3.Connection, conversation_id: str) -> ConversationRecord:
    """Return one conversation; raise ``NotFound`` if unknown."""
    row = conn.execute(rows.CONVERSATION_SELECT + " WHERE c.id = ?", (conversation_id,)).fetchone()
    if row is None:
        raise NotFound("conversation", conversation_id)
    return rows.conversation(row)


def find_external(
    conn: sqlite3.Connection, channel: str, external_id: str
) -> ConversationRecord | None:
    """Return the conversation a channel knows by ``external_id``, if any."""
    row = conn.execute(
        rows.CONVERSATION_SELECT + " WHERE c.channel = ? AND c.external_id = ?",
        (channel, external_id),
    ).fetchone()
    return None if row is None else rows.conversation(row)


def resolve(
    conn: sqlite3.Connection, id_or_prefix: str, owner: str | None = None
) -> ConversationRecord:
    """Return the conversation with this id, or the only one whose id starts with it.

    With ``owner``, other owners' conversations neither match nor make a prefix ambiguous.
    """
    if not id_or_prefix:
        raise NotFound("conversation", id_or_prefix)
    mine, params = ("", []) if owner is None else (" AND owner = ?", [owner])
    exact = conn.execute(
        "SELECT 1 FROM conversation WHERE id = ?" + mine, [id_or_prefix, *params]
    ).fetchone()
    if exact is not None:
        return get_conversation(conn, id_or_prefix)
    # A range over the primary key instead of LIKE: no wildcard characters to escape.
    matches = [
        row[0]
        for row in conn.execute(
            "SELECT id FROM conversation WHERE id >= ? AND id < ?" + mine + " ORDER BY id",
            [id_or_prefix, id_or_prefix + "\U0010ffff", *params],
        )
    ]
    if not matches:
        raise NotFound("conversation", id_or_prefix)
    if len(matches) > 1:
        raise AmbiguousId("conversation", id_or_prefix, matches)
    return get_conversation(conn, matches[0])


def list_conversations(
    conn: sqlite3.Connection,
    channel: str | None,
    limit: int,
    before: float | None,
    owner: str | None = None,
) -> list[ConversationRecord]:
    """Newest first by ``updated_at``; ``before`` continues a page; ``owner`` scopes."""
    where: list[str] = []
    params: list[Any] = []
    if owner is not None:
        where.append("c.owner = ?")
        params.append(owner)
    if channel is not None:
        where.append("c.channel = ?")
        params.append(channel)
    if before is not None:
        where.append("c.updated_at < ?")
        params.append(before)
    clause = f" WHERE {' AND '.join(where)}" if where else ""
    query = rows.CONVERSATION_SELECT + clause + " ORDER BY c.updated_at DESC, c.id LIMIT ?"
    return [rows.conversation(row) for row in conn.execute(query, [*params, limit])]


def get_turn(conn: sqlite3.Connection, turn_id: int) -> TurnRecord:
    """Return one turn without its iterations; raise ``NotFound`` if unknown."""
    row = conn.execute(f"SELECT {rows.TURN_COLUMNS} FROM turn t WHERE t.id = ?", (turn_id,))
    found = row.fetchone()
    if found is None:
        raise NotFound("turn", str(turn_id))
    return rows.turn(found)


def turns(conn: sqlite3.Connection, conversation_id: str) -> list[TurnRecord]:
    """The turns a conversation sees, in position order (a fork's parent turns first)."""
    cte, params = chain_cte(conn, conversation_id)
    query = f"{cte} SELECT {rows.TURN_COLUMNS} FROM turn t {_VISIBLE_TURNS} ORDER BY t.position"
    return [rows.turn(row) for row in conn.execute(query, params)]


def transcript(conn: sqlite3.Connection, conversation_id: str, turn: int | None) -> Transcript:
    """Turns -> iterations -> blocks and sub-queries, plus the variable versions written.

    With ``turn`` set, only the turn at that position (and what it wrote) is included.
    """
    conversation = get_conversation(conn, conversation_id)
    cte, params = chain_cte(conn, conversation_id)
    only = ""
    if turn is not None:
        only = " AND t.position = ?"
        params = [*params, turn]
    visible = f"JOIN turn t ON t.id = i.turn_id {_VISIBLE_TURNS}{only}"

    blocks: defaultdict[int, list[BlockRecord]] = defaultdict(list)
    for row in conn.execute(
        f"{cte} SELECT {rows.BLOCK_COLUMNS} FROM block b JOIN iteration i ON i.id = b.iteration_id"
        f" {visible} {rows.BLOCK_BLOB_JOIN} ORDER BY b.iteration_id, b.position",
        params,
    ):
        blocks[row["iteration_id"]].append(rows.block(row))
    subqueries: defaultdict[int, list[SubqueryRecord]] = defaultdict(list)
    for row in conn.execute(
        f"{cte} SELECT s.* FROM subquery s JOIN iteration i ON i.id = s.iteration_id {visible}"
        " ORDER BY s.iteration_id, s.position",
        params,
    ):
        subqueries[row["iteration_id"]].append(rows.subquery(row))
    steering: defaultdict[int, list[str]] = defaultdict(list)
    for row in conn.execute(
        f"{cte} SELECT s.iteration_id, s.text FROM steering s"
        f" JOIN iteration i ON i.id = s.iteration_id {visible}"
        " ORDER BY s.iteration_id, s.position",
        params,
    ):
        steering[row[0]].append(row[1])
    iterations = defaultdict(list)
    for row in conn.execute(
        f"{cte} SELECT i.* FROM iteration i {visible} ORDER BY i.turn_id, i.position", params
    ):
        iterations[row["turn_id"]].append(
            rows.iteration(
                row,
                tuple(blocks[row["id"]]),
                tuple(subqueries[row["id"]]),
                tuple(steering[row["id"]]),
            )
        )
    turn_records = tuple(
        rows.turn(row, tuple(iterations[row["id"]]))
        for row in conn.execute(
            f"{cte} SELECT {rows.TURN_COLUMNS} FROM turn t {_VISIBLE_TURNS}{only}"
            " ORDER BY t.position",
            params,
        )
    )
    var_versions = tuple(
        rows.var_version(conn, row)
        for row in conn.execute(
            f"{cte} SELECT {rows.VAR_COLUMNS} {rows.VAR_FROM} {_VISIBLE_TURNS}{only}"
            f" ORDER BY {rows.VAR_ORDER}",
            params,
        )
    )
    return Transcript(conversation, turn_records, var_versions, _notes(conn, cte, params, only))


def _notes(
    conn: sqlite3.Connection, cte: str, params: list[Any], only: str
) -> tuple[TurnNote, ...]:
    query = (
        f"{cte} SELECT n.*, t.position FROM turn_note n JOIN turn t ON t.id = n.turn_id"
        f" {_VISIBLE_TURNS}{only} ORDER BY t.position, n.seq"
    )
    return read_notes(conn, query, params)


def recent_blocks(
    conn: sqlite3.Connection, conversation_id: str, limit: int
) -> list[tuple[int, int, BlockRecord]]:
    """The last ``limit`` blocks the conversation sees, oldest first, with their positions."""
    cte, params = chain_cte(conn, conversation_id)
    query = (
        f"{cte} SELECT t.position AS turn_position, i.position AS iteration_position,"
        f" {rows.BLOCK_COLUMNS} FROM block b JOIN iteration i ON i.id = b.iteration_id"
        f" JOIN turn t ON t.id = i.turn_id {_VISIBLE_TURNS} {rows.BLOCK_BLOB_JOIN}"
        " ORDER BY t.position DESC, i.position DESC, b.position DESC LIMIT ?"
    )
    found = [
        (row["turn_position"], row["iteration_position"], rows.block(row))
        for row in conn.execute(query, [*params, limit])
    ]
    found.reverse()
    return found


def var_history(
    conn: sqlite3.Connection, conversation_id: str, name: str
) -> list[VarVersionRecord]:
    """Every visible version of one variable, oldest first; ``NotFound`` if it never existed."""
    cte, params = chain_cte(conn, conversation_id)
    query = (
        f"{cte} SELECT {rows.VAR_COLUMNS} {rows.VAR_FROM} {_VISIBLE_TURNS}"
        f" WHERE v.name = ? ORDER BY {rows.VAR_ORDER}"
    )
    found = [rows.var_version(conn, row) for row in conn.execute(query, [*params, name])]
    if not found:
        raise NotFound("variable", name)
    return found


def vars_as_of(
    conn: sqlite3.Connection, conversation_id: str, turn: int | None, include_deleted: bool
) -> dict[str, VarVersionRecord]:
    """The latest version of each name at or before turn position ``turn``, in write order."""
    cte, params = chain_cte(conn, conversation_id, upto=turn)
    deleted = "" if include_deleted else " WHERE kind != 'deleted'"
    query = f"""
        {cte}, ranked AS (
            SELECT {rows.VAR_COLUMNS}, t.position AS tp, i.position AS ip, b.position AS bp,
                   row_number() OVER (
                       PARTITION BY v.name
                       ORDER BY t.position DESC, i.position DESC, b.position DESC,
                                v.version DESC
                   ) AS recency
            {rows.VAR_FROM} {_VISIBLE_TURNS}
        )
        SELECT * FROM (SELECT * FROM ranked WHERE recency = 1){deleted}
        ORDER BY tp, ip, bp, version
    """
    return {row["name"]: rows.var_version(conn, row) for row in conn.execute(query, params)}


def var_version(
    conn: sqlite3.Connection, conversation_id: str, name: str, version: int
) -> VarVersionRecord:
    """One visible version of a variable; the nearest conversation in the fork chain wins."""
    cte, params = chain_cte(conn, conversation_id)
    query = (
        f"{cte} SELECT {rows.VAR_COLUMNS} {rows.VAR_FROM} {_VISIBLE_TURNS}"
        " WHERE v.name = ? AND v.version = ? ORDER BY chain.depth LIMIT 1"
    )
    row = conn.execute(query, [*params, name, version]).fetchone()
    if row is None:
        raise NotFound("variable version", f"{name} v{version}")
    return rows.var_version(conn, row)


def fts_query(text: str) -> str:
    """Quote every word so user text is matched literally, never parsed as FTS5 syntax."""
    return " ".join('"' + word.replace('"', '""') + '"' for word in text.split())


def search(
    conn: sqlite3.Connection,
    text: str,
    conversation_id: str | None,
    limit: int,
    owner: str | None = None,
) -> list[SearchHit]:
    """Full-text search over requests, answers and code, best match first."""
    match = fts_query(text)
    if not match:
        return []
    cte, params = "", list[Any]()
    scope = ""
    if conversation_id is not None:
        cte, params = chain_cte(conn, conversation_id)
        scope = _VISIBLE_TURNS
    if owner is not None:
        scope += " JOIN conversation owned ON owned.id = t.conversation_id AND owned.owner = ?"
        params = [*params, owner]
    query = f"""
        {cte}
        SELECT t.conversation_id, d.turn_id, t.position, d.kind,
               snippet(search_fts, 0, char(2), char(3), '…', 16) AS snippet,
               named.title,
               (SELECT substr(f.request, 1, {LABEL_CHARS * 4}) FROM turn f
                 WHERE f.conversation_id = t.conversation_id ORDER BY f.position LIMIT 1)
        FROM search_fts
        JOIN search_doc d ON d.id = search_fts.rowid
        JOIN turn t ON t.id = d.turn_id {scope}
        JOIN conversation named ON named.id = t.conversation_id
        WHERE search_fts MATCH ?
        ORDER BY rank LIMIT ?
    """
    hits = []
    for row in conn.execute(query, [*params, match, limit]):
        text, matches = _unmark(row[4])
        hits.append(
            SearchHit(
                conversation_id=row[0],
                turn_id=row[1],
                turn_position=row[2],
                kind=cast(Literal["request", "answer", "code"], row[3]),
                snippet=_bracketed(text, matches),
                text=text,
                matches=matches,
                label=conversation_label(row[5], row[6]),
            )
        )
    return hits


# Match markers: control characters that requests, answers and code practically never hold.
_MATCH_START, _MATCH_END = "\x02", "\x03"


def _unmark(marked: str) -> tuple[str, tuple[tuple[int, int], ...]]:
    """A snippet marked with STX/ETX around each match: the plain text and the match offsets."""
    text: list[str] = []
    matches: list[tuple[int, int]] = []
    length, start = 0, 0
    for char in marked:
        if char == _MATCH_START:
            start = length
        elif char == _MATCH_END:
            matches.append((start, length))
        else:
            text.append(char)
            length += 1
    return "".join(text), tuple(matches)


def _bracketed(text: str, matches: tuple[tuple[int, int], ...]) -> str:
    out, last = [], 0
    for start, end in matches:
        out += [text[last:start], "[", text[start:end], "]"]
        last = end
    out.append(text[last:])
    return "".join(out)


def figure(conn: sqlite3.Connection, conversation_id: str, digest: str) -> bytes:
    """The PNG of a figure a block the conversation sees made (its fork chain included).

    Raises:
        NotFound: No such figure in the conversation.
    """
    get_conversation(conn, conversation_id)
    cte, params = chain_cte(conn, conversation_id)
    row = conn.execute(
        f"{cte} SELECT bl.data FROM block_figure f JOIN blob bl ON bl.hash = f.digest"
        " JOIN block b ON b.id = f.block_id JOIN iteration i ON i.id = b.iteration_id"
        f" JOIN turn t ON t.id = i.turn_id {_VISIBLE_TURNS} WHERE f.digest = ? LIMIT 1",
        [*params, digest],
    ).fetchone()
    if row is None:
        raise NotFound("figure", digest)
    return bytes(row[0])


def system_prompt(conn: sqlite3.Connection, digest: str) -> str:
    """The system prompt stored under ``digest``."""
    row = conn.execute("SELECT data FROM blob WHERE hash = ?", (digest,)).fetchone()
    if row is None:
        raise NotFound("system prompt", digest)
    return bytes(row[0]).decode()


def subqueries(conn: sqlite3.Connection, turn_id: int) -> list[SubqueryRecord]:
    """A turn's sub-queries in iteration and call order."""
    get_turn(conn, turn_id)
    query = (
        "SELECT s.* FROM subquery s JOIN iteration i ON i.id = s.iteration_id"
        " WHERE i.turn_id = ? ORDER BY i.position, s.position"
    )
    return [rows.subquery(row) for row in conn.execute(query, (turn_id,))]


def transcript_since(conn: sqlite3.Connection, conversation_id: str, position: int) -> Transcript:
    """Like ``transcript``, for the turns at ``position`` and after (what a watcher missed)."""
    conversation = get_conversation(conn, conversation_id)
    cte, params = chain_cte(conn, conversation_id)
    positions = [
        row[0]
        for row in conn.execute(
            f"{cte} SELECT t.position FROM turn t {_VISIBLE_TURNS} WHERE t.position >= ?"
            " ORDER BY t.position",
            [*params, position],
        )
    ]
    found = [transcript(conn, conversation_id, p) for p in positions]
    return Transcript(
        conversation,
        tuple(turn for part in found for turn in part.turns),
        tuple(version for part in found for version in part.var_versions),
        tuple(note for part in found for note in part.notes),
    )


def conversation_scan(conn: sqlite3.Connection, since: float) -> ConversationScan:
    """Conversations updated at or after ``since``, those running a turn, and the count.

    Three indexed queries, so a channel can keep its list current after every commit.
    """
    changed = tuple(
        rows.conversation(row)
        for row in conn.execute(
            rows.CONVERSATION_SELECT + " WHERE c.updated_at >= ? ORDER BY c.updated_at", (since,)
        )
    )
    running = frozenset(
        row[0] for row in conn.execute("SELECT conversation_id FROM turn WHERE status = 'running'")
    )
    count = int(conn.execute("SELECT count(*) FROM conversation").fetchone()[0])
    return ConversationScan(changed, running, count)


def conversation_ids(conn: sqlite3.Connection) -> set[str]:
    """Every conversation id."""
    return {row[0] for row in conn.execute("SELECT id FROM conversation")}


def change_marker(conn: sqlite3.Connection, conversation_id: str) -> tuple[Any, ...]:
    """A value that changes whenever anything a watcher shows changes in the conversation.

    The latest own turn's status, its iterations' progress, its block, steering and note
    counts, the title and the lease: one indexed query, so a follower reads the transcript only
    when needed.
    """
    row = conn.execute(
        """
        SELECT c.title, c.lease_owner, t.id, t.status,
               (SELECT group_concat(i.id || i.status || (i.raw_reply IS NULL), ',')
                  FROM iteration i WHERE i.turn_id = t.id),
               (SELECT count(*) FROM block b JOIN iteration i ON i.id = b.iteration_id
                 WHERE i.turn_id = t.id),
               (SELECT count(*) FROM steering s JOIN iteration i ON i.id = s.iteration_id
                 WHERE i.turn_id = t.id),
               (SELECT count(*) FROM turn_note n WHERE n.turn_id = t.id),
               (SELECT count(*) FROM var_version v WHERE v.conversation_id = c.id)
        FROM conversation c
        LEFT JOIN turn t ON t.conversation_id = c.id
        WHERE c.id = ?
        ORDER BY t.position DESC LIMIT 1
        """,
        (conversation_id,),
    ).fetchone()
    if row is None:
        raise NotFound("conversation", conversation_id)
    return tuple(row)


# -- bounded reads for a turn's start: their cost does not grow with the conversation ----------


def last_turn(conn: sqlite3.Connection, conversation_id: str) -> TurnRecord | None:
    """The latest turn the conversation sees (a fork's parent's if it has none of its own)."""
    for cid, limit in chain(conn, conversation_id):
        row = conn.execute(
            f"SELECT {rows.TURN_COLUMNS} FROM turn t WHERE t.conversation_id = ?"
            " AND t.position <= ? ORDER BY t.position DESC LIMIT 1",
            (cid, limit),
        ).fetchone()
        if row is not None:
            return rows.turn(row)
    return None


def last_thinking(conn: sqlite3.Connection, turn_id: int) -> str | None:
    """The thinking of a turn's last iteration that recorded any."""
    row = conn.execute(
        "SELECT thinking FROM iteration WHERE turn_id = ? AND thinking IS NOT NULL"
        " AND thinking <> '' ORDER BY position DESC LIMIT 1",
        (turn_id,),
    ).fetchone()
    return None if row is None else str(row[0])


def last_blocks(
    conn: sqlite3.Connection, conversation_id: str, limit: int
) -> list[tuple[int, int, BlockRecord]]:
    """The last ``limit`` blocks of the last ``limit`` turns the conversation sees, oldest first.

    Like ``recent_blocks``, but read turn by turn from the newest, so the cost follows ``limit``,
    not the conversation's length: blocks older than the ``limit`` latest turns are not looked for.
    """
    found: list[tuple[int, int, BlockRecord]] = []
    turns_left = limit
    for cid, lim in chain(conn, conversation_id):
        if len(found) >= limit or turns_left <= 0:
            break
        newest = conn.execute(
            "SELECT id, position FROM turn WHERE conversation_id = ? AND position <= ?"
            " ORDER BY position DESC LIMIT ?",
            (cid, lim, turns_left),
        ).fetchall()
        for turn_id, position in newest:
            turns_left -= 1
            for row in conn.execute(
                f"SELECT i.position AS iteration_position, {rows.BLOCK_COLUMNS} FROM block b"
                f" JOIN iteration i ON i.id = b.iteration_id {rows.BLOCK_BLOB_JOIN}"
                " WHERE i.turn_id = ? ORDER BY i.position DESC, b.position DESC LIMIT ?",
                (turn_id, limit - len(found)),
            ):
                found.append((position, row["iteration_position"], rows.block(row)))
            if len(found) >= limit:
                break
    found.reverse()
    return found
