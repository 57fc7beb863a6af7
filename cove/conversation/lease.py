"""The database lease that keeps two cove processes from driving one conversation at once."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import uuid
from collections.abc import AsyncIterator, Callable

from cove.errors import Busy
from cove.persistence.fence import Fence, fenced
from cove.persistence.store import Store


def new_owner_id() -> str:
    """A lease owner id naming this process: ``host:pid:random``."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def owner_is_dead(owner: str) -> bool:
    """True when ``owner`` names a process on this host that no longer exists."""
    host, _, rest = owner.partition(":")
    pid_text = rest.partition(":")[0]
    if host != socket.gethostname() or not pid_text.isdigit():
        return False
    try:
        os.kill(int(pid_text), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


@contextlib.asynccontextmanager
async def held_lease(
    store: Store,
    conversation_id: str,
    owner: str,
    ttl_s: float,
    on_lost: Callable[[], object],
) -> AsyncIterator[int]:
    """Hold the conversation's lease for the body, renewing it in the background; yields its
    epoch.

    A lease held by a process of this host that has died is taken over at once instead of
    waiting for it to expire. ``on_lost`` is called if renewal fails (another process took over).
    Every store write the body issues carries the lease's epoch (``fenced``), so one still in
    flight when another process takes over is refused instead of landing after the takeover.

    Raises:
        Busy: When a live lease is held by another owner.
    """
    try:
        epoch = await store.acquire_lease(conversation_id, owner, ttl_s)
    except Busy as exc:
        if exc.owner is None or not owner_is_dead(exc.owner):
            raise
        await store.release_lease(conversation_id, exc.owner)
        epoch = await store.acquire_lease(conversation_id, owner, ttl_s)
    renewal = asyncio.create_task(_renew(store, conversation_id, owner, ttl_s, on_lost))
    try:
        with fenced(Fence(conversation_id, owner, epoch)):
            yield epoch
    finally:
        renewal.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await renewal
        await store.release_lease(conversation_id, owner)


async def _renew(
    store: Store, conversation_id: str, owner: str, ttl_s: float, on_lost: Callable[[], object]
) -> None:
    while True:
        await asyncio.sleep(ttl_s / 3)
        try:
            await store.renew_lease(conversation_id, owner, ttl_s)
        except Busy:
            on_lost()
            return
