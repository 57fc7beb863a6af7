"""The sandbox worker process: ``python -m cove.environment.sandbox.worker.main CONFIG_JSON``.

Start-up order matters. The two pipe ends are first moved to private descriptors and 0/1/2 are
pointed at /dev/null, so nothing printed by any means can reach the frame channel. Then the heavy
imports run, every other descriptor is closed, the worker confines itself (``confine.py``: a
root of its own, no network, its own IPC namespace and user, Landlock, seccomp, the death signal
— as far as the host allows), starts the
thread that ends it when the host's pipe closes (``lifeline.py``) and applies the resource limits
(address space, CPU seconds, file size, open files, no core dumps, no child processes). Only then
does the worker announce ``{"op": "ready"}`` with the confinement it achieved and serve requests,
one at a time, until the host closes the pipe.

The host starts the worker in its own session with an empty environment (see ``process.py``).
"""

from __future__ import annotations

import json
import os
import resource  # at the top: once the worker dropped to nobody, the stdlib may be unreadable
import signal
import sys
import traceback
from typing import TYPE_CHECKING, Any, Protocol

from cove.environment.sandbox.frames import Frame, FrameChannel, ProtocolError
from cove.environment.sandbox.worker.confine import confine
from cove.environment.sandbox.worker.lifeline import watch_pipe

_MAX_FD = 1 << 30  # above any descriptor: closerange closes up to it in one system call

if TYPE_CHECKING:  # imported lazily: a failing import is reported in a "fatal" frame
    from cove.environment.sandbox.worker.runtime import Runtime


def claim_channel() -> FrameChannel:
    """Move the pipes off 0/1 and point 0/1/2 at /dev/null."""
    channel = FrameChannel(os.dup(0), os.dup(1))
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)
    return channel


def close_other_descriptors(keep: set[int]) -> None:
    """Close every file descriptor not in ``keep`` (a few calls, and no ``/proc`` needed)."""
    low = 0
    for fd in sorted(keep):
        if fd > low:  # closerange(a, b) with b <= a would close everything from a on
            os.closerange(low, fd)
        low = max(low, fd + 1)
    os.closerange(low, _MAX_FD)


def apply_limits(config: dict[str, Any], *, forking: bool = False) -> None:
    """Apply the resource limits (best effort: a limit the host forbids is skipped).

    Args:
        config: The worker configuration (``process.worker_config``).
        forking: For the zygote, which must keep forking and lives long: no CPU-time limit and no
            limit on processes; each forked worker then applies the full set to itself.
    """
    mib = 1024 * 1024
    cpu = int(config["cpu_s"])
    limits = [
        (resource.RLIMIT_AS, int(config["memory_mb"]) * mib, int(config["memory_mb"]) * mib),
        (
            resource.RLIMIT_FSIZE,
            int(config["file_size_mb"]) * mib,
            int(config["file_size_mb"]) * mib,
        ),
        (resource.RLIMIT_NOFILE, int(config["open_files"]), int(config["open_files"])),
        (resource.RLIMIT_CORE, 0, 0),
    ]
    if not forking:
        # The soft CPU limit sends SIGXCPU; the hard one, a little later, SIGKILL.
        limits += [(resource.RLIMIT_CPU, cpu, cpu + 2), (resource.RLIMIT_NPROC, 0, 0)]
    for kind, soft, hard in limits:
        try:
            _, current_hard = resource.getrlimit(kind)
            if current_hard != resource.RLIM_INFINITY:
                soft, hard = min(soft, current_hard), min(hard, current_hard)
            resource.setrlimit(kind, (soft, hard))
        except (ValueError, OSError):
            pass


def warm_up(*, libraries: bool = True) -> None:
    """Import lazily loaded pieces before the limits and the new root shut them out: the
    standard library's, and the data libraries (``data/libraries.py``) when they are installed."""
    import datetime

    from cove.environment.sandbox.worker.data import libraries as data_libraries

    datetime.datetime.strptime("2000-01-01", "%Y-%m-%d")
    loaded = data_libraries.load() if libraries else None
    if loaded is not None:
        data_libraries.warm_up(loaded)
        # Build every curated namespace once: whatever that imports is imported now.
        from cove.environment.sandbox.worker.runtime import Runtime

        runtime = Runtime(request=lambda frame: frame, output_limit=1, value_limit=1)
        for name in runtime.modules.names():
            runtime.modules.get(name)


class Link(Protocol):
    """Where a runtime sends frames and reads the host's replies (a ``FrameChannel``)."""

    def send(self, message: Frame) -> None:
        """Send one frame."""

    def receive(self) -> Frame | None:
        """The next frame; None once the host is gone."""


def make_runtime(channel: Link, config: dict[str, Any]) -> Runtime:
    """A fresh sandbox runtime whose extension calls go through ``channel``."""
    from cove.environment.sandbox.worker.runtime import Runtime

    def request(message: dict[str, Any]) -> dict[str, Any]:
        channel.send(message)
        reply = channel.receive()
        if reply is None:
            os._exit(0)  # the host is gone; nothing left to serve
        return reply

    return Runtime(
        request=request,
        output_limit=int(config["output_limit"]),
        value_limit=int(config["value_limit"]),
        libraries=bool(config.get("libraries", True)),
        post=channel.send,
    )


def main() -> int:
    """Run the worker; returns the process exit code."""
    channel = claim_channel()
    try:
        config = json.loads(sys.argv[1])
        warm_up(libraries=bool(config.get("libraries", True)))
        runtime = make_runtime(channel, config)
        # Its own session keeps terminal Ctrl-C away; an interrupt between blocks must not end it.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        close_other_descriptors({0, 1, 2, channel.read_fd, channel.write_fd})
        # Before the limits: with RLIMIT_NPROC already 0, older kernels refuse the setuid.
        confinement = confine(bool(config.get("confine", True)), parent=int(config["owner"]))
        watch_pipe(channel.read_fd)  # a thread: after seccomp (it inherits it), before NPROC 0
        apply_limits(config)
    except BaseException:
        channel.send({"op": "fatal", "error": traceback.format_exc(limit=5)})
        return 1
    channel.send({"op": "ready", "pid": os.getpid(), "confinement": confinement.as_frame()})
    return serve(channel, runtime, config, fixed_directory=confinement.enabled)


def serve(
    channel: FrameChannel,
    runtime: Runtime,
    config: dict[str, Any],
    *,
    fixed_directory: bool = False,
) -> int:
    """Answer the host's requests, one at a time, until it closes the pipe; the exit code.

    With ``config["unrestricted"]`` (tests only: ``WorkerPool(assume_breach=True)``) blocks run
    as plain Python (``run_unrestricted``). A confined worker (``fixed_directory``) needs no
    file: it answers a change of directory by staying in ``/`` (of its own root, if it has one).
    """
    unrestricted = bool(config.get("unrestricted", False))
    while True:
        try:
            message = channel.receive()
        except ProtocolError as exc:
            channel.send({"op": "error", "error": f"bad frame from host: {exc}"})
            return 2
        if message is None:
            return 0
        try:
            reply: dict[str, Any]
            if unrestricted and message.get("op") == "execute":
                reply = run_unrestricted(runtime, message)
            elif message.get("op") == "chdir":
                if not fixed_directory:
                    os.chdir(str(message["path"]))
                reply = {"op": "ok", "cwd": "/" if fixed_directory else str(message["path"])}
            else:
                reply = runtime.handle(message)
        except MemoryError:
            reply = {"op": "error", "error": "MemoryError while serving a request", "fatal": True}
        except Exception as exc:
            reply = {"op": "error", "error": f"{type(exc).__name__}: {exc}"}
        try:
            channel.send(reply)
        except ProtocolError as exc:  # the reply would not fit in a frame
            channel.send({"op": "error", "error": str(exc)})


def run_unrestricted(runtime: Runtime, message: dict[str, Any]) -> dict[str, Any]:
    """Run a block as plain, unrestricted Python: what escaped code could do (tests only).

    The block leaves its finding in ``result``; the reply is that of a block whose value is
    ``str(result)``, or the exception it raised.
    """
    namespace: dict[str, Any] = {"__name__": "__breach__"}
    try:
        exec(compile(str(message["code"]), "<breach>", "exec"), namespace)
        result = str(namespace.get("result"))
    except BaseException as exc:  # what escaped code raises is its finding too
        result = f"raised {type(exc).__name__}: {exc}"
    return runtime.execute(repr(result[:400]), int(message["seed"]), float(message["clock"]))


if __name__ == "__main__":
    sys.exit(main())
