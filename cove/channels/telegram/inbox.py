"""Webhook updates kept in the store until handled, each run once by one node.

Telegram does not post an update again once the webhook answered 200, so an update is kept in
the store's inbox (``Conversations.receive_delivery``, with its name, so a re-post is still
dropped) before the answer; a node that dies after answering loses nothing. Every node:

- runs the updates it holds, a chat's in the order they came (the chat is the update's
  *lane*): before running one it waits until every earlier update of the chat is handled or
  running here, taking over those whose holder is gone;
- renews its claims on the updates it runs, every few seconds;
- takes over, about once a second, the updates whose holder's claim ended (a node that died or
  stalled), that a stopping node gave back, or whose holder is a dead process of this host (a
  node restarted after ``kill -9``);
- hands each update to python-telegram-bot, whose handlers settle it (``Delivery``): finished
  once handled (a message once its turn is recorded, a command once done), or given back when
  this node stops before running it. An update arriving while the node stops is kept for
  another node (no claim) and not run here.

Run once even across a takeover: a command starts once (``Delivery.start``), and a message's
turn is started under its conversation's lease, where the store finds a turn the update
started before (``Conversations.send(delivery=...)``, ``persistence/inbox.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import json
import logging
import time
from collections.abc import Coroutine
from typing import Any

from telegram import Update
from telegram.ext import Application

from cove.channels.telegram.roster import chat_of
from cove.conversation import Conversations, InboxEntry
from cove.errors import CoveError

log = logging.getLogger("cove.telegram")

#: How long an update's id is remembered: Telegram gives up redelivering after 24 hours.
REDELIVERY_WINDOW_S = 2 * 24 * 3600.0
#: How often a node looks for updates to take over and for a chat's earlier updates to end.
POLL_S = 1.0


def lane_of(update: Update) -> str | None:
    """The order an update keeps: a chat's messages and commands run in the order they came
    (the lane is the chat, as ``ChatRef.key``); ``/cancel``, which must act at once, button
    presses and anything else keep none."""
    message = update.message
    if message is None:
        return None
    words = (message.text or "").split(maxsplit=1)
    if words and words[0].partition("@")[0] == "/cancel":
        return None
    return chat_of(message).key


class Delivery:
    """A kept update while this node runs it: its handler settles it, once."""

    def __init__(self, inbox: Inbox, key: str) -> None:
        self.inbox = inbox
        self.key = key
        #: A handler's task settles it (otherwise it is finished once its handlers ran).
        self.deferred = False
        self.settled = False

    async def start(self) -> str:
        """Start what the update runs without a turn (a command), once: ``start``; ``ran``
        when it started before (on a node that died); ``taken`` when it is not this node's."""
        return await self.inbox.convs.start_delivery(self.key)

    async def finish(self) -> None:
        """The update was handled: nobody runs it again."""
        await self._settle(self.inbox.convs.finish_delivery(self.key))

    async def release(self) -> None:
        """The update was not run (this node stops): another node, or this one restarted, runs
        it."""
        await self._settle(self.inbox.convs.release_deliveries(self.inbox.sender, self.key))

    def handled(self) -> None:
        """The update was handled and finished in the store already (its turn was recorded:
        ``Conversations.send(delivery=...)`` finishes it)."""
        self.settled = True
        self.inbox.forget(self.key)

    async def _settle(self, step: Coroutine[Any, Any, object]) -> None:
        if self.settled:
            step.close()
            return
        self.settled = True
        self.inbox.forget(self.key)
        try:
            await step
        except CoveError as exc:  # left to expire: its claim is no longer renewed
            log.warning("could not settle update %s: %s", self.key, exc)


class Inbox:
    """The updates of one bot kept in the store, as this node runs and takes them over."""

    def __init__(self, convs: Conversations, app: Application, bot_id: str) -> None:  # type: ignore[type-arg]
        self.convs = convs
        self.app = app
        self.sender = f"telegram:{bot_id}"
        self._open: dict[int, Delivery] = {}  # by update id, while its handlers run
        self._known: set[str] = set()  # keys queued or running here (whose claims it renews)
        self._lanes: dict[str, list[tuple[int, InboxEntry]]] = {}  # waiting here, by seq
        self._workers: dict[str, asyncio.Task[None]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._keeper: asyncio.Task[None] | None = None

    def delivery(self, update: Update) -> Delivery | None:
        """The kept update ``update`` is, while its handlers run here (None: not kept)."""
        return self._open.get(update.update_id)

    def forget(self, key: str) -> None:
        """``key`` is settled: its claim is no longer renewed."""
        self._known.discard(key)

    # -- receiving -------------------------------------------------------------------------

    async def receive(self, update: Update, body: str) -> bool:
        """Keep an update before the webhook acknowledges it; whether it is new. It runs here,
        unless this node is stopping: then it is left for another node.

        Raises:
            CoveError: It could not be kept (the store is unreachable): the webhook must not
                acknowledge it.
        """
        hold = self._keeper is not None and self.convs.accepting
        key = f"{self.sender}:{update.update_id}"
        lane = lane_of(update)
        new = await self.convs.receive_delivery(
            key,
            sender=self.sender,
            lane=lane,
            seq=update.update_id,
            body=body,
            hold=hold,
            keep_s=REDELIVERY_WINDOW_S,
        )
        if new and hold:
            self._queue(InboxEntry(key, lane, update.update_id, body, self.convs.owner, 0, False))
        return new

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> None:
        """Begin renewing claims and taking over updates (the bot is initialized)."""
        self._keeper = asyncio.get_running_loop().create_task(self._keep())

    async def stop(self) -> None:
        """Stop taking and running updates; those queued here stay claimed until ``release``."""
        tasks = [t for t in (self._keeper, *self._workers.values()) if t is not None]
        self._keeper = None
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def release(self) -> None:
        """Give back every update this node still holds (none runs here any more), for the
        other nodes or this one restarted."""
        self._known.clear()
        self._lanes.clear()
        try:
            given = await self.convs.release_deliveries(self.sender)
        except CoveError as exc:  # they expire instead
            log.warning("could not give back the kept updates: %s", exc)
            return
        if given:
            log.info("gave back %d kept updates to the other nodes", given)

    # -- running ---------------------------------------------------------------------------

    async def _keep(self) -> None:
        """Renew this node's claims (three times a claim's length) and take over free updates
        (about once a second, a read unless there is one), until stopped."""
        every = self.convs.claim_s / 3
        renewed = time.monotonic()
        while True:
            try:
                if self._known and time.monotonic() - renewed >= every * 0.9:
                    renewed = time.monotonic()
                    await self.convs.renew_deliveries(self.sender, sorted(self._known))
                if self.convs.accepting:
                    self._take(await self.convs.take_deliveries(self.sender))
            except CoveError as exc:
                log.warning("could not renew or take kept updates: %s", exc)
            await asyncio.sleep(min(POLL_S, every))

    def _take(self, entries: list[InboxEntry]) -> None:
        for entry in entries:
            if entry.key not in self._known:
                log.info("took over update %s", entry.seq)
            self._queue(entry)

    def _queue(self, entry: InboxEntry) -> None:
        """Run ``entry`` here: at once without a lane, else after its lane's earlier updates."""
        if entry.key in self._known:
            return  # queued or running here already
        self._known.add(entry.key)
        if entry.lane is None:
            task = asyncio.get_running_loop().create_task(self._run(entry))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
            return
        heapq.heappush(self._lanes.setdefault(entry.lane, []), (entry.seq, entry))
        if entry.lane not in self._workers:
            self._workers[entry.lane] = asyncio.get_running_loop().create_task(
                self._work(entry.lane)
            )

    async def _work(self, lane: str) -> None:
        """Run a lane's updates queued here in order, each once nothing comes before it."""
        queue = self._lanes[lane]
        try:
            while queue:
                entry = queue[0][1]
                try:
                    first = await self._first_in_lane(entry)
                except CoveError as exc:
                    log.warning("could not read the order of chat %s: %s", lane, exc)
                    first = False
                if not first:
                    if queue[0][1] is entry:  # else an earlier one was taken: it goes first
                        await asyncio.sleep(POLL_S)
                    continue
                heapq.heappop(queue)
                await self._run(entry)
        finally:
            self._workers.pop(lane, None)
            if not queue:
                self._lanes.pop(lane, None)

    async def _first_in_lane(self, entry: InboxEntry) -> bool:
        """Whether every earlier update of ``entry``'s lane is handled or running here; the
        ones another node no longer holds are taken over (and come first)."""
        assert entry.lane is not None
        ahead = await self.convs.deliveries_ahead(self.sender, entry.lane, entry.seq)
        if any(other.holder != self.convs.owner for other in ahead):
            self._take(await self.convs.take_deliveries(self.sender))
            return False
        return all(other.key in self._known and not self._queued(other) for other in ahead)

    def _queued(self, entry: InboxEntry) -> bool:
        return any(waiting.key == entry.key for _, waiting in self._lanes.get(entry.lane or "", []))

    async def _run(self, entry: InboxEntry) -> None:
        """Hand the update to the bot's handlers; finish it unless one of them took it on."""
        try:
            update = Update.de_json(json.loads(entry.body), self.app.bot)
        except (ValueError, TypeError, KeyError):
            log.warning("dropped kept update %s: it cannot be read", entry.key)
            await Delivery(self, entry.key).finish()
            return
        delivery = Delivery(self, entry.key)
        self._open[update.update_id] = delivery
        try:
            await self.app.process_update(update)
        finally:  # stopped midway: left held, and given back when the bot stops
            self._open.pop(update.update_id, None)
        if not delivery.deferred:
            await delivery.finish()
