"""``WorkerPool``: pre-started sandbox workers, forked from a zygote, handed out as clients."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from pathlib import Path

from cove.config import SandboxSettings
from cove.environment.sandbox.frames import ProtocolError
from cove.environment.sandbox.host.client import CallHandler, SandboxClient
from cove.environment.sandbox.host.forkserver import ForkServer
from cove.environment.sandbox.host.process import WorkerGone, WorkerProcess, make_host_undumpable
from cove.environment.sandbox.worker.confine import Confinement
from cove.errors import SandboxError

_CHDIR_TIMEOUT_S = 5.0
_ZYGOTE_RETRY_S = 5.0  # after a zygote failed to start, cold starts only for this long

log = logging.getLogger("cove.environment.sandbox")


def unconfined_warning(confinement: Confinement) -> str | None:
    """The warning for a host where confinement was asked for but nothing real took hold.

    The network and IPC namespaces, ``no_new_privs`` and the death signal alone keep sandbox code
    that escaped RestrictedPython from nothing the host's user may do: with neither a user of its
    own, nor a root of its own, nor Landlock, nor seccomp, the worker is the user.
    """
    real = {"uid", "mount", "landlock", "seccomp"}
    if not confinement.enabled or real & set(confinement.layers):
        return None
    why = "; ".join(confinement.notes) or "no reason given"
    return (
        "WARNING: the sandbox cannot confine its workers on this host (no separate user, no root "
        f"of their own, no Landlock, no seccomp: {why}). Code that escapes the Python guards "
        "would run with this user's rights; see `cove doctor`."
    )


class WorkerPool:
    """Pre-started workers, so a new or restored conversation does not wait for start-up.

    Workers are forked from a zygote (``forkserver.py``) unless ``sandbox_fork_server``
    is off; whenever the zygote cannot be had, they are cold-started, and a lost zygote is
    started again in the background (after a failed start, at most every few seconds). Owns
    every client it hands out: ``aclose`` closes them, kills the idle workers and stops the
    zygote.
    """

    def __init__(
        self, settings: SandboxSettings, *, size: int | None = None, assume_breach: bool = False
    ) -> None:
        """A pool for ``settings``, pre-starting ``size`` workers (default: the setting).

        ``assume_breach`` is for tests only, never reachable from settings: every block runs as
        plain, unrestricted Python in a worker confined exactly as usual, as if the guards had
        been escaped (``tests/environment/test_breach.py``).
        """
        self._settings = settings
        self._unrestricted = assume_breach
        self._size = settings.worker_pool_size if size is None else size
        self._idle: deque[WorkerProcess] = deque()
        self._starting: set[asyncio.Task[None]] = set()
        self._clients: set[SandboxClient] = set()
        self._host_protected = False
        self._closed = False
        self._zygote: ForkServer | None = None
        self._zygote_starting: asyncio.Task[ForkServer | None] | None = None
        self._zygote_failed_at: float | None = None
        self._warned = False

    @property
    def worker_counts(self) -> tuple[int, int]:
        """Worker processes held now: ``(in use by environments, idle and ready)``."""
        return len(self._clients), sum(1 for worker in self._idle if worker.alive)

    async def start(self) -> None:
        """Make the host non-dumpable, start the zygote and pre-start ``size`` workers.

        Raises:
            SandboxError: A worker cannot be started.
        """
        make_host_undumpable()
        self._host_protected = True
        workers = await asyncio.gather(
            *(self._start_worker(Path("/")) for _ in range(self._size)),
            return_exceptions=True,
        )
        failures = [w for w in workers if isinstance(w, BaseException)]
        for worker in workers:
            if isinstance(worker, WorkerProcess):
                self._idle.append(worker)
        if failures:
            raise SandboxError(f"cannot pre-start sandbox workers: {failures[0]}")

    async def acquire(self, *, workspace: Path, on_call: CallHandler) -> SandboxClient:
        """A client with a ready worker working in ``workspace``.

        Raises:
            SandboxError: The pool is closed, or no worker can be started.
        """
        if not self._host_protected:
            make_host_undumpable()
            self._host_protected = True
        # Private to the host's user when created here: the worker needs no file of it.
        await asyncio.to_thread(workspace.mkdir, mode=0o700, parents=True, exist_ok=True)
        worker = await self.take(workspace)
        client = SandboxClient(
            self, worker, workspace=workspace, on_call=on_call, settings=self._settings
        )
        self._clients.add(client)
        return client

    async def aclose(self) -> None:
        """Close every client, stop pre-starting and kill the idle workers."""
        self._closed = True
        for task in list(self._starting):
            task.cancel()
        if self._starting:
            await asyncio.gather(*self._starting, return_exceptions=True)
        for client in list(self._clients):
            await client.aclose()
        while self._idle:
            await self._idle.popleft().terminate()
        if self._zygote_starting is not None:
            await asyncio.shield(self._zygote_starting)  # a zygote it starts is closed at once
        zygote, self._zygote = self._zygote, None
        if zygote is not None:
            await zygote.aclose()

    async def take(self, workspace: Path) -> WorkerProcess:
        """A ready worker in ``workspace``: an idle one if any, else a cold start."""
        if self._closed:
            raise SandboxError("the worker pool is closed")
        while self._idle:
            worker = self._idle.popleft()
            if not worker.alive:
                continue
            try:
                async with asyncio.timeout(_CHDIR_TIMEOUT_S):
                    reply = await worker.request({"op": "chdir", "path": str(workspace)})
                if reply.get("op") == "ok":
                    self._refill()
                    return worker
            except (TimeoutError, WorkerGone, ProtocolError):
                pass
            await worker.terminate()
        self._refill()
        return await self._start_worker(workspace)

    async def _start_worker(self, cwd: Path) -> WorkerProcess:
        """A new ready worker in ``cwd``: forked from the zygote if possible, else cold-started.

        Raises:
            SandboxError: Not even a cold start gives a worker.
        """
        zygote = await self._zygote_for_fork()
        worker: WorkerProcess | None = None
        if zygote is not None:
            try:
                worker = await WorkerProcess.attach(await zygote.fork(cwd))
            except SandboxError as exc:
                log.warning("no worker from the zygote, starting one cold: %s", exc)
        if worker is None:
            worker = await WorkerProcess.start(
                self._settings, cwd=cwd, unrestricted=self._unrestricted
            )
        if not self._warned:
            weakness = unconfined_warning(worker.confinement)
            if weakness is not None:
                self._warned = True
                log.warning("%s", weakness)
        return worker

    async def _zygote_for_fork(self) -> ForkServer | None:
        """The live zygote; None means: start this worker cold.

        The first zygote is waited for. A lost one is replaced in the background while workers
        start cold; after a zygote failed to start, only cold starts for a few seconds.
        """
        if not self._settings.sandbox_fork_server or self._closed:
            return None
        zygote = self._zygote
        if zygote is not None and zygote.alive:
            return zygote
        starting = self._zygote_starting
        if starting is None:
            failed_at = self._zygote_failed_at
            if failed_at is not None and time.monotonic() - failed_at < _ZYGOTE_RETRY_S:
                return None
            starting = self._zygote_starting = asyncio.create_task(self._start_zygote())
        if zygote is not None:
            return None
        return await asyncio.shield(starting)

    async def _start_zygote(self) -> ForkServer | None:
        """Replace the (lost or missing) zygote by a new one; None when it cannot be started."""
        try:
            lost = self._zygote
            if lost is not None:
                await lost.aclose()  # reap it
            try:
                zygote: ForkServer | None = await ForkServer.start(
                    self._settings, unrestricted=self._unrestricted
                )
            except SandboxError as exc:
                log.warning("sandbox zygote unavailable, starting workers cold: %s", exc)
                self._zygote_failed_at = time.monotonic()
                return None
            if self._closed:
                assert zygote is not None
                await zygote.aclose()
                zygote = None
            self._zygote, self._zygote_failed_at = zygote, None
            return zygote
        finally:
            self._zygote_starting = None

    def _refill(self) -> None:
        if self._closed:
            return
        for _ in range(self._size - len(self._idle) - len(self._starting)):
            task = asyncio.create_task(self._start_idle())
            self._starting.add(task)
            task.add_done_callback(self._starting.discard)

    async def _start_idle(self) -> None:
        try:
            worker = await self._start_worker(Path("/"))
        except SandboxError:
            return  # the next acquire cold-starts and reports the failure
        if self._closed:
            await worker.terminate()
        else:
            self._idle.append(worker)

    def release(self, client: SandboxClient) -> None:
        """Forget a closed client (``SandboxClient.aclose`` calls it)."""
        self._clients.discard(client)
