"""Deliveries from outside as channels keep and run them: the store's inbox
(``persistence/inbox.py``) with this process as the holder.

A channel whose sender is not asked again for what it delivered (Telegram's webhook, once it
answered 200) keeps each delivery here before acknowledging it, runs the ones this process
holds, renews its claims while it is alive, takes over the deliveries of a process that died
or stopped, and finishes each once handled. A claim lasts as long as a conversation's lease
(``store.lease_ttl_s``), so a node's death is noticed as soon as its turns' leases lapse; a
holder that names a process of this host that no longer exists is taken over at once (a node
restarted after ``kill -9``).
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from typing import TYPE_CHECKING

from cove.conversation.lease import owner_is_dead
from cove.persistence.inbox import InboxEntry, Start

if TYPE_CHECKING:
    from cove.config import Settings
    from cove.persistence.store import Store

__all__ = ["DeliveriesAPI", "InboxEntry"]


class DeliveriesAPI:
    """The inbox's methods, mixed into ``Conversations`` (this process is ``owner``)."""

    _store: Store
    settings: Settings
    owner: str

    @abstractmethod
    def _check_open(self) -> None: ...

    @property
    def claim_s(self) -> float:
        """How long this process's claim on a delivery lasts unless renewed."""
        return self.settings.store.lease_ttl_s

    async def first_delivery(self, key: str, keep_s: float) -> bool:
        """Record a delivery from outside by its name (``persistence/deliveries.py``); whether
        it is the first: a channel whose sender may deliver twice handles only the first,
        whichever process (or node) it reached. ``keep_s``: the sender's redelivery window."""
        self._check_open()
        return await self._store.first_delivery(key, keep_s)

    async def receive_delivery(
        self,
        key: str,
        *,
        sender: str,
        lane: str | None,
        seq: int,
        body: str,
        hold: bool,
        keep_s: float,
    ) -> bool:
        """Keep a delivery until it is handled; whether it is new (the first time its name is
        recorded: a repeat keeps nothing).

        Args:
            key: Its name, unique for its sender.
            sender: Whose deliveries it is among (``telegram:<bot id>``).
            lane: What it keeps its order in (a chat); None: none.
            seq: Its place in the lane.
            body: What was delivered.
            hold: This process runs it (its claim); False leaves it for any process to take
                (this one is stopping).
            keep_s: The sender's redelivery window.
        """
        self._check_open()
        return await self._store.receive_delivery(
            key,
            sender=sender,
            lane=lane,
            seq=seq,
            body=body,
            holder=self.owner if hold else None,
            claim_s=self.claim_s,
            keep_s=keep_s,
        )

    async def take_deliveries(self, sender: str) -> list[InboxEntry]:
        """Take over the sender's deliveries whose holder's claim ended, was given back, or
        names a dead process of this host; the ones taken, by lane and seq."""
        self._check_open()
        claims = await self._store.inbox_claims(sender)
        dead = [h for h in claims.holders if h != self.owner and owner_is_dead(h)]
        if not claims.free and not dead:
            return []  # nothing to take: nothing written
        return await self._store.take_deliveries(sender, self.owner, self.claim_s, dead)

    async def renew_deliveries(self, sender: str, keys: Sequence[str]) -> int:
        """Renew this process's claims on the deliveries ``keys`` it runs; how many it still
        holds (one another process took over is not renewed)."""
        self._check_open()
        return await self._store.renew_deliveries(sender, self.owner, self.claim_s, keys)

    async def release_deliveries(self, sender: str, key: str | None = None) -> int:
        """Give back this process's claim on delivery ``key`` (None: on all the sender's), for
        any process to take at once; how many were given back."""
        self._check_open()
        return await self._store.release_deliveries(sender, self.owner, key)

    async def start_delivery(self, key: str) -> Start:
        """Start delivery ``key`` (something that runs without a turn), once: ``start`` the
        first time, ``ran`` when it started before (under a process that died), ``taken`` when
        it is another process's or gone."""
        self._check_open()
        return await self._store.start_delivery(key, self.owner)

    async def finish_delivery(self, key: str) -> bool:
        """Delivery ``key`` was handled: delete it; False when this process no longer held it."""
        self._check_open()
        return await self._store.finish_delivery(key, self.owner)

    async def deliveries_ahead(self, sender: str, lane: str, seq: int) -> list[InboxEntry]:
        """The sender's unfinished deliveries before ``seq`` in ``lane``, in order."""
        self._check_open()
        return await self._store.deliveries_ahead(sender, lane, seq)
