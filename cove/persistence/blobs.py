"""The blob table: content-addressed bytes (system prompts, figures, values from before chunks).

Every function runs inside the caller's transaction.
"""

from __future__ import annotations

import hashlib

from cove.persistence.sql import Sql

# Encoded values larger than this many bytes go to the blob table instead of inline.
INLINE_LIMIT = 4096


def blob_hash(data: bytes) -> str:
    """The name a blob of ``data`` is kept under: its sha256, in hex."""
    return hashlib.sha256(data).hexdigest()


async def put_blob(db: Sql, data: bytes) -> str:
    """Store ``data`` once by content and return its sha256 hex hash."""
    digest = blob_hash(data)
    await db.run(
        "INSERT INTO blob (hash, data) VALUES (?, ?) ON CONFLICT DO NOTHING", (digest, data)
    )
    return digest


def split_encoded(encoded: str | None) -> tuple[str | None, bytes | None]:
    """An encoded value as a row keeps it: ``(inline text, None)`` when short, ``(None, the
    bytes of its blob)`` when long, ``(None, None)`` for no value."""
    if encoded is None:
        return None, None
    data = encoded.encode()
    if len(data) <= INLINE_LIMIT:
        return encoded, None
    return None, data


async def put_encoded(db: Sql, encoded: str | None) -> tuple[str | None, str | None]:
    """Split an encoded value into (inline text, blob hash); exactly one is set unless None."""
    inline, data = split_encoded(encoded)
    return inline, None if data is None else await put_blob(db, data)


async def collect_blobs(db: Sql, hashes: set[str]) -> int:
    """Delete the given blobs that nothing references any more; return how many went."""
    if hashes:
        await db.dialect.lock_values(db)
    removed = 0
    for digest in hashes:
        removed += await db.run(
            """
            DELETE FROM blob WHERE hash = ?1
              AND NOT EXISTS (SELECT 1 FROM iteration WHERE system_prompt_hash = ?1)
              AND NOT EXISTS (SELECT 1 FROM block WHERE result_blob = ?1)
              AND NOT EXISTS (SELECT 1 FROM var_version WHERE encoded_blob = ?1)
              AND NOT EXISTS (SELECT 1 FROM block_figure WHERE digest = ?1)
            """,
            (digest,),
        )
    return removed
