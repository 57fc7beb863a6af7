"""Following turns that another process runs, through the database.

The store's ``commits`` tell of commits from any process (a hint: on SQLite a poll of the file's
data version, on PostgreSQL a notification plus a poll of a commit sequence). ``follow``
rebuilds the conversation's new durable events from the committed rows after each commit and
publishes those past the hub's last seq, so a follower never repeats or skips one;
finer-grained commits (a reply, one block) simply show up sooner. When the turn's lease belongs
to a process that died or lapsed, the turn is marked ``interrupted`` so watchers see it end.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from cove.conversation.batched import Batched
from cove.conversation.lease import owner_is_dead
from cove.conversation.watch.hub import ConversationHub
from cove.conversation.watch.rebuild import rebuild
from cove.conversation.watch.sequence import turn_of
from cove.conversation.watch.wakes import ChangeWakes, Marker
from cove.errors import CoveError, NotFound
from cove.events import TitleChanged
from cove.persistence.records import ConversationRecord, Transcript
from cove.persistence.store import Store

#: How often a follower checks that a running turn's process is still alive.
LEASE_CHECK_S = 1.0


def change_markers(store: Store) -> Batched[Marker]:
    """The followers' reader of change markers: one read for those a commit wakes together."""
    return Batched(store.change_markers, "conversation")


async def follow(
    hub: ConversationHub,
    store: Store,
    markers: Batched[Marker],
    wakes: ChangeWakes,
    *,
    reap: Callable[[ConversationRecord], Awaitable[None]],
) -> None:
    """Publish into ``hub`` what other processes commit, while it has watchers.

    ``markers`` reads the conversation's change marker (``Store.change_markers``) together with
    those of the other followers woken at once; ``wakes`` wakes the follower only once that
    marker moved (one read per commit for every follower of the process).

    A database error ends the watchers with it (a watcher must not wait for what cannot come).
    """
    try:
        await _follow(hub, store, markers, wakes, reap)
    except CoveError as exc:
        hub.close_watchers(exc)


@dataclass
class _Followed:
    """What a follower remembers between reads of its conversation."""

    title: str | None = None
    next_lease_check: float = 0.0
    marker: Marker | None = None
    running: bool = False

    def wait_s(self) -> float:
        """How long to wait for a commit before looking again."""
        return LEASE_CHECK_S if self.running else 5.0


async def _follow(
    hub: ConversationHub,
    store: Store,
    markers: Batched[Marker],
    wakes: ChangeWakes,
    reap: Callable[[ConversationRecord], Awaitable[None]],
) -> None:
    state = _Followed()
    poller = wakes.commits
    async with poller.use():
        seen = poller.version
        while hub.watchers:
            if hub.local_turns:
                # The turn publishes its own events: no commit needs a look until it ends.
                await hub.no_local_turn()
                seen = poller.version
                continue
            try:
                transcript = await _changes(hub, store, markers, state)
            except NotFound:
                hub.close_watchers()
                return
            # Re-checked after the read: a turn that started here meanwhile publishes live.
            if transcript is not None and hub.local_turns == 0:
                stale = _publish(hub, transcript, state)
                if stale is not None:
                    await reap(stale)
                    continue
            if poller.version == seen:  # else a commit came during the read: read again now
                await wakes.changed(hub.conversation_id, state.marker, state.wait_s())
            seen = poller.version


async def _changes(
    hub: ConversationHub, store: Store, markers: Batched[Marker], state: _Followed
) -> Transcript | None:
    """What was committed since the hub's last event, or None when nothing was.

    Most commits are to other conversations: a cheap check comes first.
    """
    changed = await markers.get(hub.conversation_id)
    lease_due = state.running and time.monotonic() >= state.next_lease_check
    if changed == state.marker and not lease_due:
        return None
    state.marker = changed
    return await store.transcript_since(hub.conversation_id, turn_of(hub.last_seq))


def _publish(
    hub: ConversationHub,
    transcript: Transcript,
    state: _Followed,
) -> ConversationRecord | None:
    """Publish the rebuilt events and a title change; returns the conversation when its running
    turn's lease is stale (its process is gone) and it must be reaped."""
    for event in rebuild(transcript, hub.last_seq):
        hub.publish_rebuilt(event)
    conversation = transcript.conversation
    if state.title is not None and conversation.title not in (None, state.title):
        hub.publish(TitleChanged(title=conversation.title or ""))
    state.title = conversation.title
    state.running = bool(transcript.turns) and transcript.turns[-1].status == "running"
    now = time.monotonic()
    if state.running and now >= state.next_lease_check:
        state.next_lease_check = now + LEASE_CHECK_S
        if lease_is_stale(conversation):
            return conversation
    return None


def lease_is_stale(conversation: ConversationRecord) -> bool:
    """True when no live process holds the conversation's lease."""
    owner, until = conversation.lease_owner, conversation.lease_until
    if owner is None or until is None or until <= time.time():
        return True
    return owner_is_dead(owner)
