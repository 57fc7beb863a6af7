"""``ListWatch``: conversations created, changed or deleted, by any process.

After each commit (noticed by the shared ``Commits``) it asks the store only for what was
updated since the last look, the set of conversations running a turn, and the count; the full
id list is read only when the count says something was deleted. A web list or a TUI sidebar
applies the ``ConversationChanged`` events instead of re-reading everything.
"""

from __future__ import annotations

import contextlib
from collections import deque
from collections.abc import AsyncIterator, Callable
from types import TracebackType

from cove.conversation.recovered import as_listed
from cove.errors import NotFound
from cove.events import ChangeKind, ConversationChanged
from cove.persistence.database import Commits
from cove.persistence.records import ConversationRecord
from cove.persistence.store import Store

#: Without commits, look again this often anyway (cheap, and covers a missed notification).
IDLE_RECHECK_S = 5.0


class ListWatch:
    """An async iterator of ``ConversationChanged``; ``async with`` or ``aclose`` when done."""

    def __init__(
        self,
        store: Store,
        poller: Commits,
        visible: Callable[[ConversationRecord], bool] | None = None,
    ) -> None:
        self._store = store
        self._poller = poller
        self._visible = visible or (lambda record: True)
        self._known: dict[str, tuple[float, str, bool, str | None]] = {}
        self._hidden: set[str] = set()  # known, but not this watcher's to see
        self._running: frozenset[str] = frozenset()
        self._cursor = 0.0
        self._seen = 0
        self._pending: deque[ConversationChanged] = deque()
        self._stack: contextlib.AsyncExitStack | None = None

    async def start(self) -> ListWatch:
        """Take the current list as the baseline; later changes become events."""
        if self._stack is None:
            self._stack = contextlib.AsyncExitStack()
            await self._stack.enter_async_context(self._poller.use())
            self._seen = self._poller.version
            await self._scan(emit=False)
        return self

    def __aiter__(self) -> AsyncIterator[ConversationChanged]:
        return self

    async def __anext__(self) -> ConversationChanged:
        await self.start()
        while not self._pending:
            self._seen = await self._poller.wait(self._seen, IDLE_RECHECK_S)
            await self._scan(emit=True)
        return self._pending.popleft()

    async def _scan(self, *, emit: bool) -> None:
        scan = await self._store.conversation_scan(self._cursor)
        changed_running = scan.running ^ self._running
        self._running = scan.running
        for record in scan.changed:
            self._cursor = max(self._cursor, record.updated_at)
            self._note(record, emit)
            changed_running -= {record.id}
        for cid in changed_running:
            if cid in self._known:
                with contextlib.suppress(NotFound):
                    self._note(await self._store.get_conversation(cid), emit)
        if scan.count != len(self._known):
            ids = await self._store.conversation_ids()
            for cid in set(self._known) - ids:
                del self._known[cid]
                if cid in self._hidden:
                    self._hidden.discard(cid)
                elif emit:
                    self._pending.append(ConversationChanged(conversation_id=cid, kind="deleted"))
            for cid in ids - set(self._known):  # written with a clock behind ours
                with contextlib.suppress(NotFound):
                    self._note(await self._store.get_conversation(cid), emit)

    def _note(self, record: ConversationRecord, emit: bool) -> None:
        record = as_listed(record)
        state = (record.updated_at, record.label, record.id in self._running, record.last_status)
        if not self._visible(record):
            self._known.setdefault(record.id, state)
            self._hidden.add(record.id)
            return
        previous = self._known.get(record.id)
        self._known[record.id] = state
        if not emit or previous == state:
            return
        kind: ChangeKind = "created" if previous is None else "updated"
        self._pending.append(
            ConversationChanged(
                conversation_id=record.id,
                kind=kind,
                title=record.title,
                updated_at=record.updated_at,
                running=state[2],
                label=record.label,
                status=record.last_status,
            )
        )

    async def aclose(self) -> None:
        """Stop watching the list."""
        if self._stack is not None:
            await self._stack.aclose()

    async def __aenter__(self) -> ListWatch:
        return await self.start()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
