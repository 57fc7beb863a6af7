"""``cove serve --processes N``: one port, N processes, each running the whole service.

The parent binds the port and one private unix socket per process (in a 0700 directory), then
forks the processes, which inherit them: the kernel hands each new connection on the port to
one of them, and a process forwards a turn's request to the conversation's home process over
that process's socket (``affinity.py``). The channels that must run once (Telegram, MCP) run in
process 0. The parent runs no event loop and serves nothing; it

- prints the address once every process serves (a process that fails to start stops them all);
- restarts a process that dies (its turns are recovered through the leases: a lease held by a
  dead process is taken over at once), after a pause if it died young;
- forwards SIGTERM / SIGINT to every process, so each drains as a single service does, and
  exits once they all have (a second signal is forwarded too: they exit at once).

Each process is put in a process group of its own (a terminal's Ctrl-C reaches the parent
only, which forwards it once) and dies with the parent (the parent-death signal).
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import select
import shutil
import signal
import socket
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from cove.channels.serve.affinity import FIRST, Placement
from cove.channels.web.listen import listen
from cove.config import Settings

log = logging.getLogger("cove.serve")

_SIGNALS = {signal.SIGTERM, signal.SIGINT, signal.SIGCHLD}
#: A process that dies sooner than this after it started is restarted only after a pause.
YOUNG_S = 5.0
RESTART_PAUSE_S = 1.0
#: The longest path a unix socket may have (``sun_path`` less its NUL).
_MAX_SOCKET_PATH = 107


def default_processes() -> int:
    """One process per core this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


@dataclass
class _Child:
    pid: int
    started: float
    ready_fd: int | None  # the read end of its ready pipe until it said it serves


@dataclass(frozen=True)
class ChildSockets:
    """What a forked process serves on: the shared port, its own unix socket, and where the
    others' are; ``ready_fd`` gets one byte once it serves."""

    tcp: socket.socket
    unix: socket.socket
    placement: Placement
    ready_fd: int


#: Runs one process's service on its sockets and returns its exit status.
RunChild = Callable[[ChildSockets], int]


class Supervisor:
    """The parent of ``processes`` service processes on one port."""

    def __init__(
        self,
        settings: Settings,
        host: str,
        port: int,
        processes: int,
        run_child: RunChild,
        announce: Callable[[int], None],
        once: tuple[str, ...] = (),
    ) -> None:
        self.settings = settings
        self.host = host
        self.port = port
        self.processes = processes
        self.run_child = run_child
        self.announce = announce
        self.once = once
        self._children: dict[int, _Child] = {}  # by index
        self._due: dict[int, float] = {}  # restarts waiting for their pause, by index
        self._started: dict[int, float] = {}  # when each process that ended had started
        self._signals: list[int] = []  # the stop signals received

    def run(self) -> int:
        """Serve until a stop signal and every process has stopped; returns the exit status.

        Raises:
            ListenError: The address cannot be bound.
        """
        tcp = listen(self.host, self.port)
        folder = _socket_folder(self.settings.store.data_dir)
        paths = [folder / f"{index}.sock" for index in range(self.processes)]
        unix = [_bind_unix(path) for path in paths]
        fields = {"processes": self.processes, "sockets": str(folder)}
        log.info("starting processes", extra={"fields": fields})
        signal.pthread_sigmask(signal.SIG_BLOCK, _SIGNALS)
        try:
            for index in range(self.processes):
                self._start(index, tcp, unix, paths)
            if not self._await_ready():
                self._stop_all(signal.SIGTERM)
                self._reap_all()
                return 1
            self.announce(tcp.getsockname()[1])
            return self._supervise(tcp, unix, paths)
        finally:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, _SIGNALS)
            for sock in (tcp, *unix):
                sock.close()
            shutil.rmtree(folder, ignore_errors=True)

    def _start(
        self, index: int, tcp: socket.socket, unix: list[socket.socket], paths: list[Path]
    ) -> None:
        read_fd, write_fd = os.pipe()
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:  # the child: never returns
            os.close(read_fd)
            _child_main(
                parent,
                self.run_child,
                ChildSockets(
                    tcp=tcp,
                    unix=unix[index],
                    placement=Placement(index=index, sockets=tuple(paths), once=self.once),
                    ready_fd=write_fd,
                ),
            )
        os.close(write_fd)
        self._children[index] = _Child(pid=pid, started=time.monotonic(), ready_fd=read_fd)
        log.info("process started", extra={"fields": {"process": index, "pid": pid}})

    def _await_ready(self) -> bool:
        """Wait until every process serves; False when one ended first (or a stop signal)."""
        waiting = {c.ready_fd: i for i, c in self._children.items() if c.ready_fd is not None}
        while waiting:
            ready, _, _ = select.select(list(waiting), [], [], 0.2)
            for fd in ready:
                index = waiting.pop(fd)
                ok = os.read(fd, 1) == b"r"
                self._ready(index)
                if not ok:
                    log.error("a process failed to start", extra={"fields": {"process": index}})
                    return False
            if signal.sigtimedwait({signal.SIGTERM, signal.SIGINT}, 0) is not None:
                return False
        return True

    def _ready(self, index: int) -> None:
        child = self._children[index]
        if child.ready_fd is not None:
            os.close(child.ready_fd)
            child.ready_fd = None

    def _supervise(self, tcp: socket.socket, unix: list[socket.socket], paths: list[Path]) -> int:
        stopping = False
        while self._children or (self._due and not stopping):
            timeout = max(0.0, min(self._due.values()) - time.monotonic()) if self._due else 1.0
            info = signal.sigtimedwait(_SIGNALS, timeout)
            if info is not None and info.si_signo != signal.SIGCHLD:
                stopping = True
                self._signals.append(info.si_signo)
                log.info(
                    "stopping", extra={"fields": {"signal": signal.Signals(info.si_signo).name}}
                )
                self._stop_all(signal.Signals(info.si_signo))
                self._due.clear()
            for index, status in self._reap():
                if stopping:
                    continue
                self._restart_later(index, status)
            for index in [i for i, due in self._due.items() if due <= time.monotonic()]:
                del self._due[index]
                self._start(index, tcp, unix, paths)
            for index, child in self._children.items():
                if child.ready_fd is not None and select.select([child.ready_fd], [], [], 0)[0]:
                    self._ready(index)
        log.info("stopped")
        # A second signal made the processes exit at once: say so, as a single service does.
        return 0 if len(self._signals) <= 1 else 128 + self._signals[-1]

    def _restart_later(self, index: int, status: int) -> None:
        lived = time.monotonic() - self._started.pop(index, time.monotonic())
        pause = RESTART_PAUSE_S if lived < YOUNG_S else 0.0
        fields = {"process": index, "status": status, "restart_in_s": pause}
        log.warning("process ended; restarting it", extra={"fields": fields})
        self._due[index] = time.monotonic() + pause

    def _reap(self) -> list[tuple[int, int]]:
        """The processes that ended, with their exit statuses (128 + signal when killed)."""
        ended = []
        for index, child in list(self._children.items()):
            pid, status = os.waitpid(child.pid, os.WNOHANG)
            if pid == 0:
                continue
            del self._children[index]
            self._started[index] = child.started
            if child.ready_fd is not None:
                os.close(child.ready_fd)
            code = os.waitstatus_to_exitcode(status)
            ended.append((index, code if code >= 0 else 128 - code))
        return ended

    def _stop_all(self, signum: signal.Signals) -> None:
        for child in self._children.values():
            with contextlib.suppress(ProcessLookupError):
                os.kill(child.pid, signum)

    def _reap_all(self) -> None:
        for child in self._children.values():
            os.waitpid(child.pid, 0)
            if child.ready_fd is not None:
                os.close(child.ready_fd)
        self._children.clear()


def _child_main(parent: int, run_child: RunChild, sockets: ChildSockets) -> None:
    """A forked process: its own process group, death with the parent, the signals the
    parent blocked unblocked; runs the service and exits with its status."""
    code = 1
    try:
        os.setpgid(0, 0)
        _die_with(parent)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _SIGNALS)
        code = run_child(sockets)
    except BaseException:  # a forked process must never return into the parent's code
        traceback.print_exc()
    finally:
        logging.shutdown()
        with contextlib.suppress(Exception):
            sys.stderr.flush()
        os._exit(code)


def _die_with(parent: int) -> None:
    """Be killed (SIGKILL) when the parent dies; exit at once if it already has."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)  # PDEATHSIG
    if os.getppid() != parent:
        os._exit(1)


def _socket_folder(data_dir: Path) -> Path:
    """A new 0700 folder for the processes' unix sockets: under the data directory, or a
    temporary one when that path is too long for a socket's address."""
    base = data_dir / "run"
    if len(str(base)) + len("/serve-12345678/999.sock") <= _MAX_SOCKET_PATH:
        base.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(base, 0o700)
        return Path(tempfile.mkdtemp(prefix="serve-", dir=base))  # mkdtemp: mode 0700
    return Path(tempfile.mkdtemp(prefix="cove-serve-"))


def _bind_unix(path: Path) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(path))
    os.chmod(path, 0o600)
    sock.listen(2048)
    return sock


__all__ = ["FIRST", "ChildSockets", "RunChild", "Supervisor", "default_processes"]
