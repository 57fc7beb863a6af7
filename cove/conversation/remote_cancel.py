"""Stop requests from other processes, obeyed by the process that runs the turn.

``Conversations.cancel`` of a turn that another process runs records a cancel request in the
store (``Store.request_cancel``). The process holding the lease watches for one while its turns
run: after every commit the store's ``commits`` tell of (a request is a commit from another
connection), and at least every ``CHECK_EVERY_S`` in case a poll was missed, it reads the
pending requests and cancels each of its turns that was asked to stop, exactly as a local cancel
does. One watch serves every turn of the process (one read per commit, however many turns
run). The request is deleted with the turn's end (``finish_turn``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any

from cove.errors import CoveError
from cove.persistence.database import Commits
from cove.persistence.store import Store

#: The longest a request waits when no commit wakes the check (commits normally do at once).
CHECK_EVERY_S = 2.0

log = logging.getLogger(__name__)

Cancel = Callable[[], Coroutine[Any, Any, None]]


class CancelRequests:
    """The watch for cancel requests of the turns this process runs."""

    def __init__(self, store: Store, poller: Commits) -> None:
        self.store = store
        self.poller = poller
        self._turns: dict[str, Cancel] = {}  # the running turns, by conversation
        self._watch_task: asyncio.Task[None] | None = None
        self._cancels: set[asyncio.Task[None]] = set()  # held until done

    @contextlib.asynccontextmanager
    async def obeying(self, conversation_id: str, cancel: Cancel) -> AsyncIterator[None]:
        """While the body runs a turn of the conversation, cancel it (``cancel``: the call a
        local cancel makes) if another process asks."""
        if not self.store.shared:  # a private database: no other process can ask
            yield
            return
        self._turns[conversation_id] = cancel
        if self._watch_task is None:
            self._watch_task = asyncio.create_task(self._watch())
        try:
            yield
        finally:
            if self._turns.get(conversation_id) is cancel:
                del self._turns[conversation_id]
            if not self._turns and self._watch_task is not None:
                task, self._watch_task = self._watch_task, None
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    async def _watch(self) -> None:
        async with self.poller.use():
            seen = self.poller.version
            while self._turns:
                try:
                    asked = await self.store.cancel_requests()
                except CoveError as exc:  # the turns report database trouble themselves
                    log.warning("cannot read cancel requests: %s", exc)
                    asked = {}
                for conversation_id, asker in asked.items():
                    cancel = self._turns.pop(conversation_id, None)
                    if cancel is not None:
                        log.info("cancelling the turn of %s as %s asked", conversation_id, asker)
                        task = asyncio.create_task(cancel())
                        self._cancels.add(task)
                        task.add_done_callback(self._cancels.discard)
                seen = await self.poller.wait(seen, CHECK_EVERY_S)
