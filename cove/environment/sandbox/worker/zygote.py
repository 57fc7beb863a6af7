"""The zygote: ``python -m cove.environment.sandbox.worker.zygote CONFIG_JSON``, a worker unborn.

It does everything a worker does before serving its first frame — imports, warm-up, making the
sandbox runtime (each worker gets its own copy, untouched), the shared part of confinement
(``confine.prepare``: a root of its own and no network, no_new_privs, the Landlock ruleset and
the seccomp program built once), the resource limits that suit a long-lived forking process — but
never runs sandbox code. Its memory is then folded into huge pages (``hugepages.py``), so a fork
copies few page-table entries. As root it stays root, to give each worker a user of its own
(``uids.py``); each forked worker then seals itself (``confine.seal``: its own IPC namespace and
ids, no capability, Landlock, seccomp) before it serves, from ``/``. The zygote forks one worker
per request of the host, so a worker costs a fork instead of an interpreter start. Every worker
is forked from the pristine zygote, never from
another worker: nothing a worker changes can reach the next one.

The control channel is a ``SOCK_SEQPACKET`` Unix socket on the zygote's descriptor 0, one JSON
message per packet:

- host -> zygote ``{"op": "fork"}`` carrying a descriptor of the worker's directory; the
  zygote answers, in order, ``{"op": "forked", "pid": N}`` carrying three descriptors (the
  host's ends of the worker's two pipes: its input to write, its output to read; and a pidfd
  of the worker), or ``{"op": "error", "error": TEXT}``;
- zygote -> host, unasked: ``{"op": "exited", "pid": N, "returncode": R}`` when it reaped a
  worker (``R`` as ``subprocess`` reports it: negative for a signal).

The host closing the socket ends the zygote. The zygote dies with the host and every worker dies
with the zygote (``lifeline.py``): when a zygote is lost, so are the workers it forked.
"""

from __future__ import annotations

import contextlib
import fcntl
import gc
import json
import os
import select
import signal
import socket
import sys
import traceback
from typing import TYPE_CHECKING, Any

from cove.environment.sandbox.frames import Frame, FrameChannel
from cove.environment.sandbox.worker.confine import (
    Confinement,
    Preparation,
    preload_codecs,
    prepare,
    seal,
)
from cove.environment.sandbox.worker.hugepages import collapse
from cove.environment.sandbox.worker.lifeline import die_with_parent
from cove.environment.sandbox.worker.main import (
    Steps,
    apply_limits,
    close_other_descriptors,
    make_runtime,
    start,
    warm_up,
)
from cove.environment.sandbox.worker.uids import UidPool

if TYPE_CHECKING:
    from cove.environment.sandbox.worker.runtime import Runtime

_MESSAGE_BYTES = 64 * 1024


def send(control: socket.socket, message: dict[str, Any], fds: list[int] | None = None) -> None:
    """Send one control message, with descriptors attached when given."""
    data = json.dumps(message).encode("utf-8")
    if fds:
        socket.send_fds(control, [data], fds)
    else:
        control.send(data)


def main() -> int:
    """Run the zygote; returns its exit code."""
    control = socket.socket(fileno=os.dup(0))
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)
    try:
        config = json.loads(sys.argv[1])
        import cove.environment.sandbox.worker.runtime  # noqa: F401 - every worker needs it: import once

        warm_up(libraries=bool(config.get("libraries", True)))
        pending = PendingChannel()
        runtime = make_runtime(pending, config)  # made once, before any fork, never used here
        collapse()  # a fork copies one page-table entry per 2 MiB of it, not per 4 KiB
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        # SIGCHLD only wakes the loop (through the pipe); the reaping happens there.
        wake_read, wake_write = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        signal.set_wakeup_fd(wake_write)
        signal.signal(signal.SIGCHLD, lambda number, frame: None)
        close_other_descriptors({0, 1, 2, control.fileno(), wake_read, wake_write})
        preparation = prepare(bool(config.get("confine", True)))
        if preparation.needs_codecs():
            preload_codecs()
        apply_limits(config, forking=True)
        die_with_parent(int(config["owner"]))  # last: a change of user would disarm it
        gc.freeze()  # what exists now stays shared with every worker (copy-on-write)
    except BaseException:
        send(control, {"op": "fatal", "error": traceback.format_exc(limit=5)})
        return 1
    uids = UidPool(preparation.ids) if preparation.ids is not None else None
    send(control, {"op": "ready", "pid": os.getpid()})
    while True:
        readable, _, _ = select.select([control.fileno(), wake_read], [], [])
        if wake_read in readable:
            with contextlib.suppress(BlockingIOError):
                while os.read(wake_read, 512):
                    pass
            reap(control, uids)
        if control.fileno() in readable:
            data, fds, _, _ = socket.recv_fds(control, _MESSAGE_BYTES, 1)
            if not data:
                return 0  # the host is done with us
            request = json.loads(data)
            if request.get("op") == "fork" and len(fds) == 1:
                fork_worker(control, (config, runtime, pending), preparation, fds[0], uids)
            else:
                send(control, {"op": "error", "error": f"bad request {request.get('op')!r}"})
            for fd in fds:
                os.close(fd)


def reap(control: socket.socket, uids: UidPool | None) -> None:
    """Collect every worker that has exited and tell the host how it ended."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        code = os.waitstatus_to_exitcode(status)
        if uids is not None:
            uids.release(pid)
        send(control, {"op": "exited", "pid": pid, "returncode": code})


def fork_worker(
    control: socket.socket,
    made: tuple[dict[str, Any], Runtime, PendingChannel],
    preparation: Preparation,
    cwd: int,
    uids: UidPool | None,
) -> None:
    """Fork one worker in the directory open as ``cwd``; hand the host its pipe ends and a pidfd.

    The host opens the directory: as with a cold start, the worker needs the right to enter it,
    not to reach it from ``/`` (the workspace may sit below a directory closed to nobody).
    ``made`` is the configuration, the runtime the zygote made for its workers and the channel
    that runtime talks through once a worker owns it.
    """
    try:
        to_worker = os.pipe()
        from_worker = os.pipe()
    except OSError as exc:
        send(control, {"op": "error", "error": f"no pipes for a worker: {exc}"})
        return
    zygote = os.getpid()
    try:
        uid = uids.pick() if uids is not None else None
        pid = os.fork()
    except OSError as exc:
        for fd in (*to_worker, *from_worker):
            os.close(fd)
        send(control, {"op": "error", "error": f"cannot fork a worker: {exc}"})
        return
    if pid == 0:
        code = 1
        try:
            channel = FrameChannel(to_worker[0], from_worker[1])
            code = become_worker(channel, made, preparation, cwd, (zygote, uid))
        finally:
            os._exit(code)  # never back into the zygote's loop
    if uids is not None and uid is not None:
        uids.claim(pid, uid)
    os.close(to_worker[0])
    os.close(from_worker[1])
    handed = [to_worker[1], from_worker[0]]
    try:
        handed.append(os.pidfd_open(pid))
        send(control, {"op": "forked", "pid": pid}, handed)
    except OSError as exc:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        send(control, {"op": "error", "error": f"cannot hand a worker over: {exc}"})
    finally:
        for fd in handed:
            os.close(fd)


def become_worker(
    channel: FrameChannel,
    made: tuple[dict[str, Any], Runtime, PendingChannel],
    preparation: Preparation,
    cwd: int,
    identity: tuple[int, int | None],
) -> int:
    """In the forked child: leave the zygote behind and serve as a worker; the exit code.

    The worker's start is ``main.start``'s, with the steps of a forked worker: settling takes a
    session of its own (the host kills the group, never the zygote), undoes the zygote's SIGCHLD
    handling and closes the zygote's descriptors; the runtime is the one the zygote made
    (``made``: the configuration, that runtime and the channel it talks through), given this
    worker's channel; confining is ``seal`` (the zygote did ``prepare``), then the move into the
    directory opened as ``cwd`` when the worker is not confined (a confined worker stays in ``/``).

    ``identity`` is the zygote's pid (the worker dies with it, which dies with the host:
    ``lifeline.py``) and the worker's own user id on a root host.
    """
    zygote, uid = identity
    config, runtime, pending = made

    def settle() -> FrameChannel:
        os.setsid()
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        keep = {0, 1, 2, channel.read_fd, channel.write_fd, cwd} | preparation.keep_fds()
        close_other_descriptors(keep)
        return settle_channel(channel)

    def attach(ready: FrameChannel) -> Runtime:
        pending.channel = ready  # the runtime made in the zygote is this worker's alone now
        return runtime

    def seal_prepared() -> Confinement:
        confinement = seal(preparation, parent=zygote, uid=uid)
        if not confinement.enabled:
            os.fchdir(cwd)
        os.close(cwd)
        return confinement

    return start(channel, config, Steps(settle, attach, seal_prepared))


class PendingChannel:
    """The channel of a runtime made in the zygote: the forked worker's, once there is one.

    Making the runtime (its curated modules, the data libraries' surfaces) costs milliseconds;
    made once before any fork, every worker gets its own copy of a runtime that never ran.
    """

    def __init__(self) -> None:
        self.channel: FrameChannel | None = None

    def send(self, message: Frame) -> None:
        """Send through the worker's channel."""
        self._attached().send(message)

    def receive(self) -> Frame | None:
        """Read from the worker's channel."""
        return self._attached().receive()

    def _attached(self) -> FrameChannel:
        if self.channel is None:
            raise RuntimeError("the zygote's runtime has no worker to talk for")
        return self.channel


def settle_channel(channel: FrameChannel) -> FrameChannel:
    """Put the pipe ends on descriptors 3 and 4, where a cold-started worker has them."""
    high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (channel.read_fd, channel.write_fd)]
    os.close(channel.read_fd)
    os.close(channel.write_fd)
    for target, fd in zip((3, 4), high, strict=True):
        os.dup2(fd, target, inheritable=False)
        os.close(fd)
    return FrameChannel(3, 4)


if __name__ == "__main__":
    sys.exit(main())
