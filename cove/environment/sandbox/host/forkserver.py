"""The host side of the zygote (``zygote.py``): workers forked from a pre-initialised process.

``ForkServer.start`` runs the zygote as a cold worker would be run (``python -P -s``, its own
session, the worker's empty environment) with one end of a ``SOCK_SEQPACKET`` socket pair as its
standard input. ``ForkServer.fork`` asks for a worker and gets back its two pipe ends and a pidfd,
wrapped as a ``ForkedProcess`` that ``WorkerProcess.attach`` drives exactly like a cold-started
subprocess: the worker's death shows as the end of its output, it is killed by process group, and
its exit status comes from the zygote, which reaps it.

A zygote that dies, answers garbage or stops answering is killed and marked lost: ``alive`` turns
False, waiting forks fail with ``SandboxError``, and workers already forked carry on (their end is
then seen through their pidfd, without an exit status).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import socket
import sys
from collections import deque
from pathlib import Path
from typing import Any

from cove.config import SandboxSettings
from cove.environment.sandbox.host.process import (
    STARTUP_TIMEOUT_S,
    worker_config,
    worker_environment,
)
from cove.errors import SandboxError

ZYGOTE_MODULE = "cove.environment.sandbox.worker.zygote"
FORK_TIMEOUT_S = 10.0
_STATUS_WAIT_S = 2.0  # how long the zygote may take to report a worker it reaps
_CLOSE_WAIT_S = 5.0
_MESSAGE_BYTES = 64 * 1024

log = logging.getLogger("cove.environment.sandbox")


class ForkedProcess:
    """A worker forked by the zygote, seen like an ``asyncio`` subprocess (``ProcessHandle``)."""

    def __init__(
        self,
        pid: int,
        *,
        stdin: asyncio.StreamWriter,
        stdout: asyncio.StreamReader,
        output: asyncio.ReadTransport,
        pidfd: int,
        exit_status: asyncio.Future[int | None],
    ) -> None:
        self._pid = pid
        self._stdin = stdin
        self._stdout = stdout
        self._output = output
        self._pidfd = pidfd
        self._exit = exit_status
        self._dead: asyncio.Future[None] | None = None
        self._exit.add_done_callback(self._on_status)

    @property
    def pid(self) -> int:
        """The worker's process id (and process group id)."""
        return self._pid

    @property
    def returncode(self) -> int | None:
        """The exit status reported by the zygote; None while running or when it cannot know."""
        return self._exit.result() if self._exit.done() else None

    @property
    def stdin(self) -> asyncio.StreamWriter:
        """The worker's input pipe."""
        return self._stdin

    def close_output(self) -> None:
        """Close the output pipe's transport (the worker was given up; nothing more is read)."""
        self._output.close()

    @property
    def stdout(self) -> asyncio.StreamReader:
        """The worker's output pipe."""
        return self._stdout

    async def wait(self) -> int | None:
        """Wait until the worker has exited; its status, or None if the zygote cannot tell."""
        if self._exit.done():
            return self._exit.result()
        if self._pidfd >= 0:
            if self._dead is None:
                loop = asyncio.get_running_loop()
                self._dead = loop.create_future()
                loop.add_reader(self._pidfd, self._gone)
            await asyncio.shield(self._dead)
        try:
            async with asyncio.timeout(_STATUS_WAIT_S):
                return await asyncio.shield(self._exit)
        except TimeoutError:
            return None

    def kill(self) -> None:
        """SIGKILL the worker through its pidfd (no risk of hitting a reused pid)."""
        if self._pidfd >= 0:
            with contextlib.suppress(OSError):
                signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)

    def _on_status(self, status: asyncio.Future[int | None]) -> None:
        if not status.cancelled() and status.result() is not None:
            self._gone()  # reaped: the pidfd has nothing more to say

    def _gone(self) -> None:
        """The worker has ended: wake ``wait`` and let go of the pidfd (once)."""
        if self._pidfd < 0:
            return
        self._stdin.close()  # as a subprocess transport does when its process exits
        if self._dead is not None:
            if not self._dead.done():
                self._dead.set_result(None)
            asyncio.get_running_loop().remove_reader(self._pidfd)
        os.close(self._pidfd)
        self._pidfd = -1


class ForkServer:
    """A running zygote and its control channel. Get one from ``ForkServer.start``."""

    def __init__(self, process: asyncio.subprocess.Process, control: socket.socket) -> None:
        self._process = process
        self._control = control
        self._ready: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending: deque[asyncio.Future[tuple[dict[str, Any], list[int]]]] = deque()
        self._exits: dict[int, asyncio.Future[int | None]] = {}
        self._lost = False

    @classmethod
    async def start(cls, settings: SandboxSettings, *, unrestricted: bool = False) -> ForkServer:
        """Start a zygote and wait until it is ready to fork.

        ``unrestricted`` is for tests only (``process.worker_config``).

        Raises:
            SandboxError: It cannot be started or fails to get ready.
        """
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            process = await asyncio.create_subprocess_exec(
                sys.executable, "-P", "-s", "-m", ZYGOTE_MODULE,
                json.dumps(worker_config(settings, unrestricted=unrestricted)),
                stdin=theirs.fileno(),
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.DEVNULL,
                cwd="/",
                env=worker_environment(),
                start_new_session=True,
            )  # fmt: skip
        except OSError as exc:
            ours.close()
            raise SandboxError(f"cannot start the sandbox zygote: {exc}") from exc
        finally:
            theirs.close()
        ours.setblocking(False)
        server = cls(process, ours)
        asyncio.get_running_loop().add_reader(ours.fileno(), server._on_readable)
        try:
            async with asyncio.timeout(STARTUP_TIMEOUT_S):
                hello = await asyncio.shield(server._ready)
        except (TimeoutError, SandboxError) as exc:
            await server.aclose()
            raise SandboxError(f"the sandbox zygote failed to start: {exc or 'timed out'}") from exc
        except asyncio.CancelledError:
            server._lose("cancelled while starting")
            raise
        if hello.get("op") != "ready":
            await server.aclose()
            detail = str(hello.get("error") or hello)[-2000:]
            raise SandboxError(f"the sandbox zygote failed to start: {detail}")
        log.debug("sandbox zygote %d started", process.pid)
        return server

    @property
    def pid(self) -> int:
        """The zygote's process id."""
        return self._process.pid

    @property
    def alive(self) -> bool:
        """Whether the zygote can still be asked for workers."""
        return not self._lost and self._process.returncode is None

    async def fork(self, cwd: Path) -> ForkedProcess:
        """A new worker process in ``cwd``; it still has to report ready (``WorkerProcess``).

        Raises:
            SandboxError: The zygote is lost, refused, or did not answer (it is then killed).
        """
        if not self.alive:
            raise SandboxError("the sandbox zygote is gone")
        try:
            directory = os.open(cwd, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as exc:
            raise SandboxError(f"cannot start a sandbox worker: {exc}") from exc
        try:
            socket.send_fds(self._control, [b'{"op": "fork"}'], [directory])
        except OSError as exc:
            self._lose(f"cannot write to it: {exc}")
            raise SandboxError(f"the sandbox zygote is gone: {exc}") from exc
        finally:
            os.close(directory)
        answer: asyncio.Future[tuple[dict[str, Any], list[int]]]
        answer = asyncio.get_running_loop().create_future()
        self._pending.append(answer)
        try:
            async with asyncio.timeout(FORK_TIMEOUT_S):
                message, fds = await asyncio.shield(answer)
        except asyncio.CancelledError:
            answer.add_done_callback(_discard)  # the worker may still come: nobody wants it
            raise
        except TimeoutError as exc:
            self._lose("no answer to a fork request")
            raise SandboxError("the sandbox zygote did not answer") from exc
        if message.get("op") != "forked" or len(fds) != 3 or type(message.get("pid")) is not int:
            for fd in fds:
                os.close(fd)
            raise SandboxError(f"the sandbox zygote could not fork: {message.get('error')}")
        pid: int = message["pid"]
        stdin_fd, stdout_fd, pidfd = fds
        exit_status = self._exits.setdefault(pid, asyncio.get_running_loop().create_future())
        try:
            stdin, stdout, output = await _streams(stdin_fd, stdout_fd)
        except OSError as exc:
            with contextlib.suppress(OSError):
                signal.pidfd_send_signal(pidfd, signal.SIGKILL)
            os.close(pidfd)
            raise SandboxError(f"cannot talk to a forked worker: {exc}") from exc
        return ForkedProcess(
            pid, stdin=stdin, stdout=stdout, output=output, pidfd=pidfd, exit_status=exit_status
        )

    async def aclose(self) -> None:
        """Stop the zygote (workers it forked are not touched) and reap it."""
        self._lose("closed", kill=False)
        try:
            async with asyncio.timeout(_CLOSE_WAIT_S):
                await self._process.wait()
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                self._process.kill()
            await self._process.wait()

    # -- internals --------------------------------------------------------------------------

    def _on_readable(self) -> None:
        while not self._lost:
            try:
                data, fds, _, _ = socket.recv_fds(self._control, _MESSAGE_BYTES, 3)
            except BlockingIOError:
                return
            except OSError as exc:
                self._lose(f"control channel failed: {exc}")
                return
            try:
                if not data:
                    raise ValueError("it closed the control channel")
                message = json.loads(data)
                if not isinstance(message, dict):
                    raise ValueError("a message that is no object")
                self._dispatch(message, fds)
            except (ValueError, KeyError, TypeError) as exc:
                for fd in fds:
                    os.close(fd)
                self._lose(str(exc))

    def _dispatch(self, message: dict[str, Any], fds: list[int]) -> None:
        op = message.get("op")
        if op == "exited":
            pid, code = message["pid"], message["returncode"]
            status = self._exits.pop(int(pid), None)
            if status is not None and not status.done():
                status.set_result(int(code))
            return
        if op in ("ready", "fatal") and not self._ready.done():
            self._ready.set_result(message)
            return
        if op in ("forked", "error") and self._pending:
            answer = self._pending.popleft()
            if answer.done():  # its asker is gone: do not leak what came with it
                for fd in fds:
                    os.close(fd)
            else:
                answer.set_result((message, fds))
                if op == "forked":
                    self._exits.setdefault(
                        int(message["pid"]), asyncio.get_running_loop().create_future()
                    )
            return
        raise ValueError(f"unexpected message {op!r}")

    def _lose(self, why: str, *, kill: bool = True) -> None:
        """Give the zygote up: stop listening, fail the waiting forks, kill it when asked."""
        if self._lost:
            return
        self._lost = True
        if kill:
            log.warning("sandbox zygote %d lost: %s", self._process.pid, why)
        with contextlib.suppress(ValueError, OSError):
            asyncio.get_running_loop().remove_reader(self._control.fileno())
        self._control.close()
        if kill and self._process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self._process.kill()
        gone = SandboxError(f"the sandbox zygote is gone: {why}")
        if not self._ready.done():
            self._ready.set_exception(gone)
            self._ready.exception()  # retrieved here: nobody may be waiting any more
        while self._pending:
            answer = self._pending.popleft()
            if not answer.done():
                answer.set_exception(gone)
                answer.exception()
        for status in self._exits.values():
            if not status.done():
                status.set_result(None)  # the pidfd still tells when the worker ends
        self._exits.clear()


def _discard(answer: asyncio.Future[tuple[dict[str, Any], list[int]]]) -> None:
    """Kill and forget a worker forked for a request whose asker has gone."""
    if answer.cancelled() or answer.exception() is not None:
        return
    _, fds = answer.result()
    if len(fds) == 3:
        with contextlib.suppress(OSError):
            signal.pidfd_send_signal(fds[2], signal.SIGKILL)
    for fd in fds:
        os.close(fd)


async def _streams(
    stdin_fd: int, stdout_fd: int
) -> tuple[asyncio.StreamWriter, asyncio.StreamReader, asyncio.ReadTransport]:
    """Asyncio streams over a worker's two pipe ends (ownership of the descriptors passes).

    Returns the input writer, the output reader and the output's transport (closed by its owner
    when the worker is given up: a killed worker's end-of-file may never be read).
    """
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    try:
        output, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(stdout_fd, "rb", buffering=0)
        )
    except BaseException:
        os.close(stdin_fd)
        raise
    try:
        transport, protocol = await loop.connect_write_pipe(
            lambda: asyncio.StreamReaderProtocol(asyncio.StreamReader()),
            os.fdopen(stdin_fd, "wb", buffering=0),
        )
    except BaseException:
        output.close()
        raise
    return asyncio.StreamWriter(transport, protocol, None, loop), reader, output
