"""The blob table: content-addressed bytes (system prompts, figures, values from before chunks).

Every function runs inside the caller's transaction.
"""

from __future__ import annotations

import hashlib

from cove.persistence.sql import Sql

# Encoded values larger than this many bytes go to the blob table instead of inline.
INLINE_LIMIT = 4096


async def put_blob(db: Sql, data: bytes) -> str:
    """Store ``data`` once by content and return its sha256 hex hash."""
    digest = hashlib.sha256(data).hexdigest()
    await db.run(
        "INSERT INTO blob (hash, data) VALUES (?, ?) ON CONFLICT DO NOTHING", (digest, data)
    )
    return digest


async def put_encoded(db: Sql, encoded: str | None) -> tuple[str | None, str | None]:
    """Split an encoded value into (inline text, blob hash); exactly one is set unless None."""
    if encoded is None:
        return None, None
    data = encoded.encode()
    if len(data) <= INLINE_LIMIT:
        return encoded, None
    return None, await put_blob(db, data)


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
