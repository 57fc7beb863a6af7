"""Turns: admission in order, one turn at a time per conversation, cancel and steer.

A turn runs as a background task feeding its handle's queue, so a channel that stops listening
(a closed browser tab) never loses the turn; ``cancel`` is the only way to stop one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import replace

from cove.config import Settings
from cove.conversation.handle import TurnHandle, withdrawn_event
from cove.conversation.lease import held_lease
from cove.conversation.live import LiveCache, LiveConversation
from cove.conversation.remote_cancel import CancelRequests
from cove.conversation.turn_queue import TurnQueue
from cove.conversation.watch.hub import ConversationHub
from cove.conversation.watch.rebuild import keep_note
from cove.conversation.watch.watching import Watching
from cove.conversation.workspaces import Workspaces
from cove.engine.given import NoModel
from cove.engine.llm import LLMClient
from cove.engine.query import Query, TurnRequest
from cove.errors import Busy, DeliveryTaken, StoreError
from cove.events import TurnFinished, TurnQueued, TurnStarted
from cove.persistence.store import Store

log = logging.getLogger("cove.conversation")

#: What the sender of a turn that never started hears when the process stops.
NOT_RUN_STOPPING = "cove is stopping and did not run this message: send it again once it is back"


class Turns:
    """The turns this process runs: waiting in their queues, running, and the tasks behind them."""

    def __init__(
        self,
        settings: Settings,
        store: Store,
        live: LiveCache,
        watching: Watching,
        workspaces: Workspaces,
        llm: Callable[[str], LLMClient],
        owner: str,
    ) -> None:
        self.settings = settings
        self.store = store
        self.live = live
        self.watching = watching
        self.workspaces = workspaces
        self.llm = llm
        self.owner = owner
        self.closed = False
        self.accepting = True  # False while the process stops: no turn is sent or started
        self._tasks: set[asyncio.Task[None]] = set()
        self._handles: set[TurnHandle] = set()  # turns sent and not yet ended
        self._admission = asyncio.Lock()
        self._queues: dict[str, TurnQueue] = {}
        self._running: dict[str, Query] = {}
        self._cancel_requests = CancelRequests(store, watching.poller)

    def busy(self, conversation_id: str) -> bool:
        """True while a turn of the conversation runs or waits here."""
        return conversation_id in self._queues

    async def settled(self, conversation_id: str, timeout_s: float = 10.0) -> None:
        """Wait for a turn that has published its end to let go of the conversation (its lease
        and live state), so a caller who saw ``TurnFinished`` is not told it is busy; returns at
        once when a turn still runs or waits."""
        queue = self._queues.get(conversation_id)
        if queue is not None and queue.ending:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(queue.emptied.wait(), timeout_s)

    def send(self, request: TurnRequest) -> TurnHandle:
        """Start one turn in the background; its handle streams the events."""
        handle = TurnHandle(request.conversation_id)
        task = asyncio.create_task(self._run_turn(request, handle))
        handle.task = task
        self._tasks.add(task)
        self._handles.add(handle)
        task.add_done_callback(self._tasks.discard)
        task.add_done_callback(lambda _: self._handles.discard(handle))
        return handle

    def stop_accepting(self) -> None:
        """Take no more turns: sends are refused, and turns still waiting are refused now.

        A waiting turn's sender gets ``Busy`` (saying to send it again) instead of a turn
        that would start only to be cancelled by the stop. Running turns go on.
        """
        self.accepting = False
        for handle in list(self._handles):
            if not handle.started and handle.task is not None and not handle.task.done():
                handle.refused = Busy(handle.conversation_id, message=NOT_RUN_STOPPING)
                handle.task.cancel()

    def steer(self, conversation_id: str, text: str) -> bool:
        """Fold ``text`` into the turn running here; False when none is running."""
        query = self._running.get(conversation_id)
        if query is None:
            return False
        query.steer(text)
        return True

    async def cancel(self, conversation_id: str) -> bool:
        """Cancel the running turn of a conversation, here or in the process that runs it.

        A turn this process runs is cancelled at once; one another process runs gets a cancel
        request in the store, which that process obeys (``remote_cancel.py``): the caller sees
        the ``cancelled`` end through its watch stream. False when no turn runs anywhere.
        """
        query = self._running.get(conversation_id)
        if query is not None:
            await query.cancel()
            return True
        return await self.store.request_cancel(conversation_id, self.owner) is not None

    async def aclose(self) -> None:
        """Withdraw the waiting turns, cancel the running ones and wait for every task."""
        self.closed = True
        for handle in list(self._handles):
            if not handle.started:
                await handle.cancel()
        for query in list(self._running.values()):
            await query.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    def _client(self, request: TurnRequest) -> LLMClient:
        """The client of the turn's model; a turn with no model gets one that refuses calls."""
        if request.no_model:
            return NoModel()
        return self.llm(request.model or self.settings.model.name)

    async def _with_profile(self, conversation_id: str, request: TurnRequest) -> TurnRequest:
        """The request with the conversation's instructions, and its model unless the turn
        names one (read under the lease, so the turn runs with the profile of its position)."""
        if request.no_model:
            return request
        profile = await self.store.profile(conversation_id)
        return replace(
            request, instructions=profile.instructions, model=request.model or profile.model
        )

    async def _run_turn(self, request: TurnRequest, handle: TurnHandle) -> None:
        stream = handle.watcher
        try:
            async with self._admission:  # FIFO: sends join their queues in the order they came
                record = await self.store.resolve(request.conversation_id, owner=request.owner)
                handle.conversation_id = record.id
                turns = self._queues.setdefault(record.id, TurnQueue())
                ticket = turns.join()
            try:
                if not ticket.is_set():
                    queued = TurnQueued(conversation_id=record.id, request=request.text)
                    stream.push(queued)
                    self.watching.notify(queued)
                    await ticket.wait()
                if not self.accepting:
                    raise Busy(record.id, message=NOT_RUN_STOPPING)
                handle.started = True
                hub = self.watching.hub(record.id)
                hub.turn_started()  # before the turn's first commit: the follower stands by
                hub.attach(stream)
                try:
                    async with self.live.use(record.id) as entry:
                        await self._turn_locked(entry, record.id, request, hub, handle)
                finally:
                    hub.turn_ended()
                    hub.detach(stream)
            finally:
                turns.leave(ticket)
                if not turns.busy:
                    self._queues.pop(record.id, None)
        except asyncio.CancelledError as exc:
            if handle.refused is not None and not handle.started:
                self.watching.notify(withdrawn_event(handle.conversation_id))
                stream.close(handle.refused)
                return
            if handle.withdrawn and not handle.started:
                withdrawn = withdrawn_event(handle.conversation_id)
                stream.push(withdrawn)
                self.watching.notify(withdrawn)
                stream.close()
                return
            stream.close(exc)
            raise
        except BaseException as exc:
            stream.close(exc)
            if not isinstance(exc, Exception):
                raise
        finally:
            stream.close()

    async def _start_delivered(self, key: str, conversation_id: str) -> None:
        """Start the turn of delivery ``key`` under the lease just taken, or refuse it.

        Raises:
            DeliveryTaken: The delivery started its turn before, or another process holds it.
        """
        outcome = await self.store.start_delivered_turn(key, self.owner, conversation_id)
        if outcome != "start":
            raise DeliveryTaken(key, ran=outcome == "ran")

    async def _finish_delivered(self, key: str) -> None:
        """The delivery's turn is recorded: the delivery is handled. A failure is left to the
        channel, which finishes the delivery again once its message is handled."""
        try:
            await self.store.finish_delivery(key, self.owner)
        except StoreError as exc:
            log.warning("could not finish delivery %s: %s", key, exc)

    async def _turn_locked(
        self,
        entry: LiveConversation,
        conversation_id: str,
        request: TurnRequest,
        hub: ConversationHub,
        handle: TurnHandle,
    ) -> None:
        record = await self.store.get_conversation(conversation_id)
        saved = await self.workspaces.save_attachments(record.id, request.attachments)
        lease_lost = asyncio.Event()

        def lost() -> None:
            lease_lost.set()  # before the query exists, its fenced writes are refused instead
            if handle.query is None:
                return
            task = asyncio.get_running_loop().create_task(handle.query.cancel())
            self._tasks.add(task)  # held until done: no task without a reference
            task.add_done_callback(self._tasks.discard)

        async with held_lease(
            self.store, record.id, self.owner, self.settings.store.lease_ttl_s, lost
        ) as epoch:
            if request.delivery is not None:
                await self._start_delivered(request.delivery, record.id)
            if not entry.env.current_at(epoch):  # another process ran turns since it opened
                await self.live.reopen(entry)
            request = await self._with_profile(record.id, request)
            query = Query(
                settings=self.settings,
                store=self.store,
                env=entry.env,
                llm=self._client(request),
                conversation=record,
                request=request,
                attachments=saved,
            )
            self._running[record.id] = query
            handle.query = query
            try:
                async with self._cancel_requests.obeying(record.id, query.cancel):
                    async for event in query.run():
                        if isinstance(event, TurnFinished):
                            self._queues[record.id].finished = True
                        elif isinstance(event, TurnStarted) and request.delivery is not None:
                            await self._finish_delivered(request.delivery)
                        stamped = hub.publish(event)
                        if stamped is not None:
                            entry.env.observers.deliver(stamped)
                            await keep_note(self.store, stamped)
            finally:
                del self._running[record.id]
                handle.query = None
                # Nobody else wrote while the lease was ours: the state is current at its epoch.
                entry.env.state_epoch = None if lease_lost.is_set() else epoch
        late = query.take_unshown_steering()
        if late and not self.closed:  # came after the last iteration began: the next turn
            self.send(TurnRequest(record.id, "\n\n".join(late)))
