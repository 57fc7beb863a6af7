"""One sandbox worker process as seen from the host: start, frames, kill.

The worker runs ``python -P -s -m cove.environment.sandbox.worker.main`` (no current directory on
``sys.path``: the workspace holds files written by sandbox code) in its own session, so killing its
process group takes everything it might have started. Its environment is empty apart from a fixed
hash seed and UTF-8 mode: no API key or other secret of the host reaches it. Unless
``sandbox_confine`` is off, it then confines itself (``confine.py``) and reports how far it
got in its ``ready`` frame: ``WorkerProcess.confinement``.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import json
import logging
import os
import signal
import sys
from pathlib import Path
from typing import Protocol

from cove.config import SandboxSettings
from cove.environment.sandbox.frames import Frame, ProtocolError, frame_bytes, read_frame
from cove.environment.sandbox.worker.confine import NOT_REPORTED, Confinement
from cove.errors import SandboxError

WORKER_MODULE = "cove.environment.sandbox.worker.main"
STARTUP_TIMEOUT_S = 30.0
_EXIT_WAIT_S = 5.0
_PR_SET_DUMPABLE = 4

log = logging.getLogger("cove.environment.sandbox")


def worker_environment() -> dict[str, str]:
    """The complete environment of a worker: nothing inherited from the host."""
    return {"PYTHONHASHSEED": "0", "PYTHONUTF8": "1", "PYTHONDONTWRITEBYTECODE": "1"}


def make_host_undumpable() -> None:
    """Mark this (host) process non-dumpable, so no worker can read ``/proc/<ppid>/environ``.

    Linux only, best effort: elsewhere, or when prctl is unavailable, nothing happens.
    """
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)


def describe_exit(returncode: int | None) -> str:
    """``signal 9`` / ``exit code 1`` / ``still running``, for error messages."""
    if returncode is None:
        return "still running"
    if returncode < 0:
        number = -returncode
        if number == signal.SIGXCPU:
            return f"signal {number}: CPU time limit reached"
        return f"signal {number}"
    return f"exit code {returncode}"


class WorkerGone(Exception):
    """The worker's pipe closed: it exited or was killed."""

    def __init__(self, returncode: int | None) -> None:
        super().__init__(describe_exit(returncode))
        self.returncode = returncode


class ProcessHandle(Protocol):
    """What ``WorkerProcess`` needs of a process: an ``asyncio`` subprocess, or a forked worker
    (``forkserver.ForkedProcess``)."""

    @property
    def pid(self) -> int:
        """The process id."""

    @property
    def returncode(self) -> int | None:
        """The exit status once known, else None."""

    @property
    def stdin(self) -> asyncio.StreamWriter | None:
        """The worker's input."""

    @property
    def stdout(self) -> asyncio.StreamReader | None:
        """The worker's output."""

    async def wait(self) -> int | None:
        """Wait for the process to end; its exit status (None when it cannot be known)."""

    def kill(self) -> None:
        """Send SIGKILL to the process itself."""


def worker_config(settings: SandboxSettings, *, unrestricted: bool = False) -> dict[str, object]:
    """The configuration a worker (or the zygote) gets as its command-line argument.

    Args:
        settings: The limits and switches.
        unrestricted: Tests only (``WorkerPool(assume_breach=True)``): blocks run as plain,
            unrestricted Python, in a worker confined as usual.
    """
    return {
        "memory_mb": settings.worker_memory_mb,
        "cpu_s": settings.worker_cpu_s,
        "file_size_mb": settings.worker_file_size_mb,
        "open_files": settings.worker_open_files,
        "output_limit": settings.output_limit_chars,
        "value_limit": settings.value_limit_mb * 1024 * 1024,
        "libraries": settings.sandbox_libraries,
        "confine": settings.sandbox_confine,
        "owner": os.getpid(),  # the process it must not outlive (``lifeline.py``)
        "unrestricted": unrestricted,
    }


class WorkerProcess:
    """A started, ready worker process and its frame channel."""

    def __init__(self, process: ProcessHandle) -> None:
        self._process = process
        self._confinement = NOT_REPORTED

    @classmethod
    async def start(
        cls, settings: SandboxSettings, *, cwd: Path, unrestricted: bool = False
    ) -> WorkerProcess:
        """Start a worker in ``cwd`` (a cold start) and wait until it reports ready.

        ``unrestricted`` is for tests only (``worker_config``).

        Raises:
            SandboxError: The interpreter cannot be started or the worker fails to get ready.
        """
        config = json.dumps(worker_config(settings, unrestricted=unrestricted))
        try:
            process = await asyncio.create_subprocess_exec(
                sys.executable, "-P", "-s", "-m", WORKER_MODULE, config,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.DEVNULL,
                cwd=str(cwd),
                env=worker_environment(),
                start_new_session=True,
            )  # fmt: skip
        except OSError as exc:
            raise SandboxError(f"cannot start a sandbox worker: {exc}") from exc
        return await cls.attach(process)

    @classmethod
    async def attach(cls, process: ProcessHandle) -> WorkerProcess:
        """Wait until a just started (or forked) worker reports ready.

        Raises:
            SandboxError: The worker fails to get ready; it is killed.
        """
        worker = cls(process)
        try:
            async with asyncio.timeout(STARTUP_TIMEOUT_S):
                hello = await worker.receive()
        except (TimeoutError, WorkerGone, ProtocolError) as exc:
            await worker.terminate()
            raise SandboxError(f"sandbox worker failed to start: {exc or 'timed out'}") from exc
        except asyncio.CancelledError:
            worker.kill()  # no waiting here: the caller is being cancelled
            if process.stdin is not None:
                process.stdin.close()
            worker._close_output()
            raise
        if hello.get("op") != "ready":
            await worker.terminate()
            detail = str(hello.get("error") or hello)[-2000:]
            raise SandboxError(f"sandbox worker failed to start: {detail}")
        try:
            worker._confinement = Confinement.from_frame(hello.get("confinement"))
        except ProtocolError as exc:
            await worker.terminate()
            raise SandboxError(f"sandbox worker failed to start: {exc}") from exc
        log.debug("sandbox worker %d started: %s", worker.pid, worker._confinement)
        return worker

    @property
    def pid(self) -> int:
        """The worker's process id (also its process group id)."""
        return self._process.pid

    @property
    def confinement(self) -> Confinement:
        """The confinement the worker reported when it got ready."""
        return self._confinement

    @property
    def alive(self) -> bool:
        """Whether the process has not exited yet (as far as the event loop knows)."""
        return self._process.returncode is None

    async def send(self, message: Frame) -> None:
        """Send one frame.

        Raises:
            WorkerGone: The worker's stdin is closed.
        """
        stdin = self._process.stdin
        assert stdin is not None
        try:
            stdin.write(frame_bytes(message))
            await stdin.drain()
        except (BrokenPipeError, ConnectionResetError) as exc:
            raise WorkerGone(await self._exit_code()) from exc

    async def receive(self) -> Frame:
        """Receive one frame.

        Raises:
            WorkerGone: The worker closed its stdout (it exited or was killed).
            ProtocolError: The worker sent garbage.
        """
        stdout = self._process.stdout
        assert stdout is not None
        try:
            return await read_frame(stdout)
        except asyncio.IncompleteReadError as exc:
            raise WorkerGone(await self._exit_code()) from exc

    async def request(self, message: Frame) -> Frame:
        """Send a frame and return the reply (only for requests that run no sandbox code)."""
        await self.send(message)
        return await self.receive()

    def kill(self) -> None:
        """Kill the worker's whole process group at once (SIGKILL)."""
        if self._process.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self._process.pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            self._process.kill()

    async def terminate(self) -> int | None:
        """Kill the worker, close its pipes and reap it; returns its exit status."""
        self.kill()
        if self._process.stdin is not None:
            self._process.stdin.close()
        try:
            return await self._exit_code()
        finally:
            self._close_output()

    def _close_output(self) -> None:
        """Close the output pipe now, not when its end-of-file is read.

        A worker given up on may die after the event loop stopped reading (a test's loop, the
        CLI's at exit); its pipe transport would then stay open until garbage collection.
        """
        close_output = getattr(self._process, "close_output", None)
        if close_output is not None:  # a forked worker
            close_output()
            return
        # A cold-started worker is an asyncio subprocess: closing its transport closes its pipes.
        transport = getattr(self._process, "_transport", None)
        if transport is not None:
            transport.close()

    async def _exit_code(self) -> int | None:
        try:
            async with asyncio.timeout(_EXIT_WAIT_S):
                return await self._process.wait()
        except TimeoutError:
            # The pipe closed but the process lingers: it is of no use any more.
            self.kill()
            return await self._process.wait()
