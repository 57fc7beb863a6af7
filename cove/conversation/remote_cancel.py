"""Stop requests from other processes, obeyed by the process that runs the turn.

``Conversations.cancel`` of a turn that another process runs records a cancel request in the
store (``Store.request_cancel``). The process holding the lease watches for one while its turn
runs: after every commit the store's ``commits`` tell of (a request is a commit from another
connection), and at least every ``CHECK_EVERY_S`` in case a poll was missed, it looks for a
request for its running turn — one indexed read — and cancels the turn exactly as a local cancel
does. The request is deleted with the turn's end (``finish_turn``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable

from cove.errors import CoveError
from cove.persistence.database import Commits
from cove.persistence.store import Store

#: The longest a request waits when no commit wakes the check (commits normally do at once).
CHECK_EVERY_S = 2.0

log = logging.getLogger(__name__)


@contextlib.asynccontextmanager
async def obeying_cancel_requests(
    store: Store,
    poller: Commits,
    conversation_id: str,
    cancel: Callable[[], Awaitable[None]],
) -> AsyncIterator[None]:
    """While the body runs a turn of the conversation, cancel it if another process asks.

    Args:
        store: The store the turn writes to.
        poller: The process's commit poller (shared with the watchers).
        conversation_id: The conversation whose running turn the body drives.
        cancel: Cancels the turn (the same call a local cancel makes).
    """
    if not store.shared:  # a private database: no other process can ask
        yield
        return
    task = asyncio.create_task(_watch(store, poller, conversation_id, cancel))
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def _watch(
    store: Store,
    poller: Commits,
    conversation_id: str,
    cancel: Callable[[], Awaitable[None]],
) -> None:
    async with poller.use():
        seen = poller.version
        while True:
            try:
                asker = await store.cancel_requested(conversation_id)
            except CoveError as exc:  # the turn reports database trouble itself
                log.warning("cannot read cancel requests of %s: %s", conversation_id, exc)
                asker = None
            if asker is not None:
                log.info("cancelling the turn of %s as %s asked", conversation_id, asker)
                await cancel()
                return
            seen = await poller.wait(seen, CHECK_EVERY_S)
