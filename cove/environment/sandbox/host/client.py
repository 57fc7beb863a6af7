"""The host side of the sandbox: ``SandboxClient`` drives one worker (``pool.py`` hands them out).

A client keeps, for its conversation, everything needed to rebuild a worker: the latest snapshot
of each user variable, the import bindings and the extension configuration. Whenever a worker is
lost — a block timed out (the host kills it: the wall-clock limit is enforced here, never trusted
to the worker), the worker crashed or ran out of memory, broke protocol, or was killed on request —
the whole process group is killed, a fresh worker is taken from the pool, reconfigured, and the
variables are restored as they were before the failed block. The outcome then carries a
``RestartReport`` saying what came back and what was lost (opaque values cannot be restored).

A snapshot's value is a root naming chunks (``cove.codec.chunks``). The client holds every chunk
the live snapshots reach (``ChunkBook``), exactly the set the worker's tracker counts as held, so
a block's reply carries only the chunks that are new; each is checked against its name, and a
root or chunk naming a chunk the client neither holds nor received is a ``ProtocolError``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import fields, replace
from pathlib import Path
from typing import Any, Protocol

from cove import codec
from cove.config import SandboxSettings
from cove.environment.sandbox.frames import MAX_FRAME_BYTES, Frame, ProtocolError
from cove.environment.sandbox.host.chunkbook import ChunkBook
from cove.environment.sandbox.host.process import WorkerGone, WorkerProcess
from cove.environment.sandbox.host.replies import block_reply, restore_reply
from cove.environment.sandbox.outcome import (
    BlockOutcome,
    ImportBinding,
    RestartReport,
)
from cove.environment.sandbox.worker.confine import Confinement
from cove.errors import SandboxError
from cove.results import BlockResult, VarVersion

CallHandler = Callable[[str, list[Any], dict[str, Any]], Awaitable[Any]]
"""Runs an extension call from sandbox code: ``(function name, args, kwargs) -> result``."""

_RESTORE_CHUNK_BYTES = 8 * 1024 * 1024  # snapshots per restore frame, well under MAX_FRAME_BYTES
_CALL_RESULT_LIMIT = MAX_FRAME_BYTES // 2
_CONSTANT_LIMIT = 1_000_000  # the encoding of one extension constant (``REQUEST``...)
_REFUSED_CALL = {
    "op": "reply",
    "ok": False,
    "error": "extension functions are not served while the sandbox restores its variables",
}

log = logging.getLogger("cove.environment.sandbox")


class WorkerSource(Protocol):
    """Where a client gets its workers and reports its end (``WorkerPool`` is one)."""

    async def take(self, workspace: Path) -> WorkerProcess:
        """A ready worker in ``workspace``."""
        ...

    def release(self, client: SandboxClient) -> None:
        """Forget ``client``: it is closed and holds no worker."""
        ...


class SandboxClient:
    """One conversation's sandbox: a worker process plus what it takes to rebuild it.

    Get one from ``WorkerPool.acquire``. Requests are serialised (one at a time).
    """

    def __init__(
        self,
        pool: WorkerSource,
        worker: WorkerProcess,
        *,
        workspace: Path,
        on_call: CallHandler,
        settings: SandboxSettings,
    ) -> None:
        self._pool = pool
        self._worker: WorkerProcess | None = worker
        self._workspace = workspace
        self._on_call = on_call
        self._settings = settings
        self._lock = asyncio.Lock()
        self._snapshots: dict[str, VarVersion] = {}
        self._book = ChunkBook()
        self._imports: dict[str, ImportBinding] = {}
        self._functions: list[str] = []
        self._constants: dict[str, str] = {}
        self._running: asyncio.Task[Frame] | None = None
        self._kill_requested = False
        self._pending_restart: str | None = None  # why the worker must be replaced before use
        self._closed = False
        self._clocks: list[asyncio.Timeout] = []  # the served call's block limit and budget
        self._paused_s = 0.0  # how long the served call was paused (``paused``)

    @property
    def pid(self) -> int | None:
        """The current worker's process id, or None when there is none."""
        return self._worker.pid if self._worker is not None else None

    @property
    def confinement(self) -> Confinement | None:
        """How far the current worker is confined (user, network), or None when there is none."""
        return self._worker.confinement if self._worker is not None else None

    def snapshots(self) -> dict[str, VarVersion]:
        """The latest snapshot of each live user variable, as tracked from the worker's reports.

        A copy of all of them: for one name use ``snapshot``.
        """
        return dict(self._snapshots)

    @contextlib.asynccontextmanager
    async def paused(self) -> AsyncIterator[None]:
        """Stop the block's clocks while the body runs (an extension call waiting for a person).

        Neither the block's time limit nor its ``extension_time_budget_s`` counts that time,
        and neither can expire during it; outside a served call this does nothing.
        """
        loop = asyncio.get_running_loop()
        clocks = [(clock, clock.when()) for clock in self._clocks]
        for clock, _ in clocks:
            clock.reschedule(None)
        started = loop.time()
        try:
            yield
        finally:
            elapsed = loop.time() - started
            self._paused_s += elapsed
            for clock, when in clocks:
                clock.reschedule(None if when is None else when + elapsed)

    def snapshot(self, name: str) -> VarVersion | None:
        """The latest snapshot of user variable ``name``, or None when it is not live."""
        return self._snapshots.get(name)

    async def execute(
        self, code: str, *, timeout_s: float, seed: int, clock: float, position: int = 0
    ) -> BlockOutcome:
        """Run one block.

        Args:
            code: The block's source.
            position: The block's position in its iteration (reported in the result).
            timeout_s: Wall-clock limit; past it the worker is killed and replaced.
            seed: Seeds the sandbox's ``random`` (and ``uuid.uuid4``) for this block.
            clock: The time (seconds since the epoch) the block sees as "now".

        Returns:
            The outcome; failures of the code (and of the worker) are reported in it.

        Raises:
            SandboxError: No fresh worker could be started after a failure, or the client is closed.
        """
        async with self._lock:
            self._check_open()
            earlier = await self._ensure_worker()
            self._book.begin()
            started = time.monotonic()
            failure: tuple[str, str, str] | None = None  # (restart reason, error type, error)
            timed_out = False
            try:
                reply = block_reply(
                    await self._run(
                        {"op": "execute", "code": code, "seed": seed, "clock": clock}, timeout_s
                    ),
                    reserved={*self._functions, *self._constants},
                )
            except TimeoutError:
                timed_out = True
                message = f"TimeoutError: block exceeded {timeout_s:g} s and was stopped"
                failure = ("timeout", "TimeoutError", message)
            except (WorkerGone, ProtocolError, asyncio.CancelledError) as exc:
                failure = self._failure(exc)
            changes: tuple[VarVersion, ...] = ()
            if failure is None:
                try:
                    self._book.receive(reply.chunks)
                    changes = self._book.attach(reply.changes)
                except ProtocolError as exc:
                    failure = self._failure(exc)
            duration_ms = (time.monotonic() - started) * 1000
            ran = BlockResult(
                position=position, code=code, ok=False, duration_ms=duration_ms, seed=seed,
                clock=clock,
            )  # fmt: skip
            if failure is not None:
                reason, error_type, error = failure
                failed = replace(ran, error=error, timed_out=timed_out)
                restarted = await self._replace(reason)
                return BlockOutcome(failed, restart=restarted, error_type=error_type)
            self._apply(changes)
            self._imports = dict(reply.imports)
            restart = earlier
            if reply.fatal:
                restart = await self._replace("memory")
            result = replace(
                ran,
                ok=reply.ok,
                result_preview=reply.value_preview,
                result_encoded=reply.value_encoded,
                stdout=reply.stdout,
                error=reply.error,
                figures=reply.figures,
            )
            return BlockOutcome(result, changes, restart, error_type=reply.error_type)

    async def configure(self, *, functions: Sequence[str], constants: Mapping[str, Any]) -> None:
        """Bind extension function proxies and read-only constants (e.g. ``REQUEST``).

        May be called again (each turn); the previous configuration is replaced.

        Raises:
            CodecError: A constant cannot be encoded.
            SandboxError: A name is not a public identifier, or the worker cannot be (re)started.
        """
        for name in [*functions, *constants]:
            if not name.isidentifier() or name.startswith("_"):
                raise SandboxError(f"invalid extension name {name!r}: use a public identifier")
        encoded = {
            name: codec.encode(value, max_bytes=_CONSTANT_LIMIT)
            for name, value in constants.items()
        }
        async with self._lock:
            self._check_open()
            self._functions = list(functions)
            self._constants = encoded
            await self._ensure_worker()
            try:
                await self._configure_worker()
            except (TimeoutError, WorkerGone, ProtocolError, asyncio.CancelledError) as exc:
                reason = self._failure(exc)[0]
                await self._replace(reason)

    def imports(self) -> dict[str, ImportBinding]:
        """The sandbox's import bindings: name -> (module, member or None for the module)."""
        return dict(self._imports)

    async def restore(
        self,
        snapshots: Sequence[VarVersion],
        *,
        imports: Mapping[str, ImportBinding] | None = None,
        chunks: Mapping[str, bytes] | None = None,
    ) -> RestartReport:
        """Make the sandbox's user variables exactly ``snapshots`` (reason ``"restore"``).

        Values are decoded, functions and classes defined again from their source; opaque
        snapshots cannot be restored and are reported lost. ``imports``, when given, replaces
        the import bindings (``import math``, ``from re import sub``) bound alongside them.
        ``chunks`` holds the chunks the snapshots' roots reach (a snapshot missing one is lost).

        Raises:
            SandboxError: The worker cannot be (re)started.
        """
        async with self._lock:
            self._check_open()
            await self._ensure_worker()
            live = [s for s in snapshots if s.kind != "deleted"]
            self._snapshots = {s.name: s for s in self._book.reset(live, chunks or {})}
            if imports is not None:
                self._imports = dict(imports)
            try:
                restored, lost = await self._restore_worker(reset=True)
            except (TimeoutError, WorkerGone, ProtocolError, asyncio.CancelledError) as exc:
                report = await self._replace(self._failure(exc)[0])
                return RestartReport("restore", report.restored, report.lost)
            return RestartReport("restore", restored, lost)

    async def kill(self) -> None:
        """Stop running code at once; the worker is replaced and the variables restored.

        A block running now returns an outcome with ``restart.reason == "killed"``.
        """
        if self._closed or self._worker is None:
            return
        victim = self._worker
        self._kill_requested = True
        victim.kill()
        if self._running is not None:
            self._running.cancel()
        async with self._lock:
            if self._worker is victim and not self._closed:
                self._pending_restart = "killed"
                await self._ensure_worker()

    async def aclose(self) -> None:
        """Kill the worker and release the client; later calls raise ``SandboxError``."""
        if self._closed:
            return
        self._closed = True
        if self._running is not None:
            self._running.cancel()
        worker, self._worker = self._worker, None
        if worker is not None:
            await worker.terminate()
        self._pool.release(self)

    # -- internals --------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise SandboxError("the sandbox client is closed")

    def _failure(self, exc: BaseException) -> tuple[str, str, str]:
        if isinstance(exc, TimeoutError):
            return ("timeout", "TimeoutError", "TimeoutError: the sandbox did not answer in time")
        if isinstance(exc, asyncio.CancelledError) or self._kill_requested:
            current = asyncio.current_task()
            if not self._kill_requested and current is not None and current.cancelling():
                raise exc
            return ("killed", "CancelledError", "CancelledError: the block was stopped")
        if isinstance(exc, WorkerGone):
            return ("crash", "SandboxError", f"SandboxError: worker died ({exc})")
        return ("protocol", "SandboxError", f"SandboxError: worker broke protocol: {exc}")

    async def _run(self, message: Frame, timeout_s: float) -> Frame:
        """Exchange ``message`` with the worker within ``timeout_s``, serving extension calls.

        The clock stops while the parent serves an extension call (an ``llm_query`` may take
        far longer than a block's limit): the limit is for the sandbox's own work.
        Cancelling the task (``kill``) or the caller leaves the worker in an unknown state: it is
        killed here and must be replaced.
        """
        worker = self._worker
        assert worker is not None
        try:
            async with asyncio.timeout(timeout_s) as limit:
                self._running = asyncio.create_task(self._exchange(worker, message, limit))
                return await self._running
        except BaseException:
            if self._running is not None:
                self._running.cancel()
            worker.kill()
            self._pending_restart = "killed"
            raise
        finally:
            self._running = None

    async def _exchange(
        self, worker: WorkerProcess, message: Frame, limit: asyncio.Timeout
    ) -> Frame:
        """Send ``message`` and serve extension calls until the worker's final reply.

        Only a block's calls are served: one made while the worker restores (a recorded
        definition running again) is refused without reaching the host. Time spent serving a
        call is given back to the block's clock (``limit``) afterwards; a
        single call is still cut by the block's remaining time. The calls of one request also
        share ``extension_time_budget_s`` of host time: a call that would exceed it is stopped
        and fails inside the block, as do all later ones, so a loop of calls cannot stretch a
        block without bound.
        """
        loop = asyncio.get_running_loop()
        budget = self._settings.extension_time_budget_s
        spent = 0.0
        await worker.send(message)
        serving = message["op"] == "execute"  # a restore or configure calls nothing on the host
        while True:
            reply = await worker.receive()
            if reply["op"] == "call" and not serving:
                await worker.send(_REFUSED_CALL)
            elif reply["op"] == "call":
                started, deadline, self._paused_s = loop.time(), limit.when(), 0.0
                self._clocks.append(limit)
                try:
                    answer = await self._serve_within(reply, budget - spent)
                finally:
                    self._clocks.remove(limit)
                elapsed = loop.time() - started
                spent += elapsed - self._paused_s
                if deadline is not None:
                    limit.reschedule(deadline + elapsed)
                await worker.send(answer)
            elif reply["op"] == "chunks" and serving:
                self._book.receive(reply.get("chunks"))
            elif reply["op"] == "error":
                raise ProtocolError(str(reply.get("error")))
            else:
                return reply

    async def _serve_within(self, request: Frame, remaining: float) -> Frame:
        exceeded = {
            "op": "reply",
            "ok": False,
            "error": (
                f"TimeoutError: {request.get('name')!s:.60}() stopped: this block's extension "
                f"calls used up their {self._settings.extension_time_budget_s:g} s of host time "
                "(extension_time_budget_s)"
            ),
        }
        if remaining <= 0:
            return exceeded
        try:
            async with asyncio.timeout(remaining) as budget:
                self._clocks.append(budget)
                try:
                    return await self._serve_call(request)
                finally:
                    self._clocks.remove(budget)
        except TimeoutError:
            return exceeded

    async def _serve_call(self, request: Frame) -> Frame:
        name = str(request.get("name"))
        try:
            args = codec.decode(str(request["args"]))
            kwargs = codec.decode(str(request["kwargs"]))
            if not isinstance(args, list) or not isinstance(kwargs, dict):
                raise ProtocolError("malformed extension call")
            result = await self._on_call(name, args, kwargs)
            encoded = codec.encode(result, max_bytes=_CALL_RESULT_LIMIT)
        except (asyncio.CancelledError, ProtocolError):
            raise
        except Exception as exc:
            return {"op": "reply", "ok": False, "error": f"{type(exc).__name__}: {exc}"}
        return {"op": "reply", "ok": True, "value": encoded}

    def _apply(self, changes: Sequence[VarVersion]) -> None:
        self._book.apply(changes)
        for change in changes:
            if change.kind == "deleted":
                self._snapshots.pop(change.name, None)
            else:
                self._snapshots[change.name] = replace(change, chunks=())

    async def _ensure_worker(self) -> RestartReport | None:
        """Replace the worker first if an earlier request left it unusable."""
        if self._pending_restart is None and self._worker is not None and self._worker.alive:
            return None
        return await self._replace(self._pending_restart or "crash")

    async def _replace(self, reason: str) -> RestartReport:
        """Kill the worker, take a fresh one and load this conversation's state into it.

        If loading fails (a definition that loops when run again, a crash), one more fresh worker
        gets only the plain values, which run no code when restored; the rest is reported lost.

        Raises:
            SandboxError: No fresh worker could be started.
        """
        self._pending_restart = reason
        dropped: list[str] = []
        attempts = ["full", "full", "values"]
        while attempts:
            mode = attempts.pop(0)
            await self._drop_worker()
            self._worker = await self._pool.take(self._workspace)
            self._kill_requested = False
            if mode == "values":
                for name, snapshot in list(self._snapshots.items()):
                    if snapshot.kind != "value" or '{"def":' in self._book.text_of(snapshot):
                        dropped.append(name)
                        del self._snapshots[name]
                        self._book.drop(name)
            try:
                await self._configure_worker()
                restored, lost = await self._restore_worker(reset=False)
            except (TimeoutError, WorkerGone, ProtocolError, asyncio.CancelledError) as exc:
                if isinstance(exc, asyncio.CancelledError) and not self._kill_requested:
                    raise
                if mode == "full" and not self._kill_requested and attempts[0] == "full":
                    attempts.pop(0)  # only a kill during the restore earns a second full try
                continue
            self._pending_restart = None
            return RestartReport(reason, restored, (*dropped, *lost))
        await self._drop_worker()
        raise SandboxError("a fresh sandbox worker could not be set up")

    async def _drop_worker(self) -> None:
        old, self._worker = self._worker, None
        if old is not None:
            await old.terminate()

    async def _configure_worker(self) -> None:
        if not self._functions and not self._constants:
            return
        message = {"op": "configure", "functions": self._functions, "constants": self._constants}
        reply = await self._run(message, self._settings.block_timeout_s)
        if reply.get("op") != "configured":
            raise ProtocolError(f"configure failed: {reply.get('error', reply.get('op'))}")

    async def _restore_worker(self, *, reset: bool) -> tuple[tuple[str, ...], tuple[str, ...]]:
        snapshots = list(self._snapshots.values())
        if not snapshots and not self._imports and not reset:
            return (), ()
        restored: list[str] = []
        lost: list[str] = []
        for batch in self._book.frames(_RESTORE_CHUNK_BYTES):
            reply = await self._run(
                {"op": "chunks", "chunks": batch}, self._settings.block_timeout_s
            )
            if reply.get("op") != "ok":
                raise ProtocolError("the worker refused the chunks of a restore")
        for index, chunk in enumerate(_batches(snapshots)):
            message = {
                "op": "restore",
                "reset": reset and index == 0,
                "imports": self._imports if index == 0 else {},
                "snapshots": [_wire(s) for s in chunk],
            }
            reply = await self._run(message, self._settings.block_timeout_s)
            names, missing = restore_reply(reply, sent={s.name for s in chunk})
            restored.extend(names)
            lost.extend(missing)
        for name in lost:
            self._snapshots.pop(name, None)
            self._book.drop(name)
        return tuple(restored), tuple(lost)


def _batches(snapshots: list[VarVersion]) -> list[list[VarVersion]]:
    chunks: list[list[VarVersion]] = [[]]
    size = 0
    for snapshot in snapshots:
        weight = len(snapshot.encoded or "") + len(snapshot.preview) + 200
        if chunks[-1] and size + weight > _RESTORE_CHUNK_BYTES:
            chunks.append([])
            size = 0
        chunks[-1].append(snapshot)
        size += weight
    return chunks


def _wire(snapshot: VarVersion) -> dict[str, Any]:
    """A snapshot as a restore frame carries it (its chunks travel in frames of their own)."""
    return {f.name: getattr(snapshot, f.name) for f in fields(VarVersion) if f.name != "chunks"}
