"""The sandbox worker process: ``python -m cove.environment.sandbox.worker.main CONFIG_JSON``.

Start-up order matters, and a worker started cold here and one forked by the zygote
(``zygote.py``) go through the same sequence, ``start``; what differs between them is passed to
it as two steps. Cold, the two pipe ends are first moved to private descriptors and 0/1/2 are
pointed at /dev/null, so nothing printed by any means can reach the frame channel; then the
heavy imports run and every other descriptor is closed (``settle``), and the worker confines
itself whole (``confine.py``: a root of its own, no network, its own IPC namespace and user,
Landlock, seccomp, the death signal — as far as the host allows). Then, as every worker does, it
builds its runtime, starts the thread that ends it when the host's pipe closes (``lifeline.py``)
and applies the resource limits (address space, CPU seconds, file size, open files, no core
dumps, no child processes). Only then does the worker announce ``{"op": "ready"}`` with the
confinement it achieved and serve requests, one at a time, until the host closes the pipe.

The host starts the worker in its own session with an empty environment (see ``process.py``).
"""

from __future__ import annotations

import json
import os
import resource  # at the top: once the worker dropped to nobody, the stdlib may be unreadable
import signal
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from cove.environment.sandbox.frames import Frame, FrameChannel, ProtocolError
from cove.environment.sandbox.worker.confine import Confinement, confine
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


@dataclass(frozen=True)
class Steps:
    """What differs between a cold-started and a forked worker's start (``start``).

    Attributes:
        settle: Leaves the worker with the frame channel on its descriptors and no other
            descriptor open (but those ``confine`` still needs); returns the channel.
        runtime: The worker's runtime, talking through the channel it is given.
        confine: Confines the worker; returns the confinement it achieved.
    """

    settle: Callable[[], FrameChannel]
    runtime: Callable[[FrameChannel], Runtime]
    confine: Callable[[], Confinement]


def start(channel: FrameChannel, config: dict[str, Any], steps: Steps) -> int:
    """Take a worker from its first instruction to serving; returns its exit code.

    The one start-up sequence of every worker, cold-started (``main``) or forked (``zygote.py``),
    in an order each step needs:

    1. SIGINT ignored: an interrupt between blocks must not end the worker.
    2. ``steps.settle``: nothing open but the channel, before any confinement (no descriptor
       of the host's may reach sandbox code). Cold, the imports and warm-up come first; a forked
       worker has them from the zygote, and takes a session of its own.
    3. ``steps.runtime``: before confinement, while whatever making it reads is in reach. Cold,
       it is made now; a forked worker's was made by the zygote and gets the channel here.
    4. ``steps.confine``: cold, the whole of ``confine.py``; forked, ``seal`` only (the zygote
       prepared the rest). Either way: namespaces, root, no_new_privs, then the worker's own
       ids, then the death signal, Landlock and seccomp.
    5. The lifeline thread: after seccomp (a thread is filtered only if made after it), before
       the process limit.
    6. The resource limits: after confinement (with RLIMIT_NPROC already 0, older kernels refuse
       the change of user).
    7. ``ready`` with the confinement, then requests until the host closes the pipe.

    A failure anywhere before ``ready`` is reported in a ``fatal`` frame.
    """
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        channel = steps.settle()
        runtime = steps.runtime(channel)
        confinement = steps.confine()
        watch_pipe(channel.read_fd)
        apply_limits(config)
    except BaseException:
        channel.send({"op": "fatal", "error": traceback.format_exc(limit=5)})
        return 1
    channel.send({"op": "ready", "pid": os.getpid(), "confinement": confinement.as_frame()})
    return serve(channel, runtime, config, fixed_directory=confinement.enabled)


def main() -> int:
    """Run the worker, started cold; returns the process exit code."""
    channel = claim_channel()
    try:
        config: dict[str, Any] = json.loads(sys.argv[1])
    except BaseException:
        channel.send({"op": "fatal", "error": traceback.format_exc(limit=5)})
        return 1

    def settle() -> FrameChannel:
        warm_up(libraries=bool(config.get("libraries", True)))
        close_other_descriptors({0, 1, 2, channel.read_fd, channel.write_fd})
        return channel

    def confine_whole() -> Confinement:
        return confine(bool(config.get("confine", True)), parent=int(config["owner"]))

    return start(
        channel, config, Steps(settle, lambda ready: make_runtime(ready, config), confine_whole)
    )


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
