"""Dying with the owner: a worker or zygote never outlives the process that started it.

Two signals, so that neither a lost race nor a busy interpreter lets a process linger:

- ``die_with_parent``: the kernel's parent-death signal (``PR_SET_PDEATHSIG`` = SIGKILL), set as
  the very last change of credentials (a change of user clears it), then a check that the parent
  is still the one expected: a parent that died before the signal was armed left the process
  with another parent already, and it exits at once.
- ``watch_pipe``: a thread blocked in ``poll`` on the channel from the host; when every writer
  is gone (the host died or closed it) it ends the process, even in the middle of a block.

The zygote arms the first with the host as parent; each worker forked from it arms it with the
zygote as parent, so the death of the host takes the zygote and with it every worker. A cold
worker arms it with the host as parent. For the kernel the parent is the *thread* that forked:
the host starts both from its event loop's thread, which lives as long as the pool.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import select
import signal
import sys
import threading

from cove.environment.sandbox.worker.libc import libc

_PR_SET_PDEATHSIG = 1
ORPHANED_EXIT = 70  # the exit code of a process whose owner was already gone


def die_with_parent(parent: int) -> str | None:
    """Be killed (SIGKILL) when ``parent`` dies; exit at once if it is already gone.

    Args:
        parent: The process id of the expected parent (the host or the zygote).

    Returns:
        None when armed, else why not (Linux only).
    """
    if not sys.platform.startswith("linux"):
        return f"not available on {sys.platform}"
    try:
        c = libc()
    except OSError as exc:
        return f"no C library to call: {exc}"
    if c.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        return os.strerror(ctypes.get_errno())
    if os.getppid() != parent:  # the parent died before the signal was armed: no one to serve
        os._exit(ORPHANED_EXIT)
    return None


def watch_pipe(fd: int) -> None:
    """End this process as soon as ``fd`` (the read end of the host's channel) hangs up.

    The thread only polls: it reads nothing, so the frames stay for the main thread.
    """
    poller = select.poll()
    poller.register(fd, select.POLLHUP | select.POLLERR)

    def watch() -> None:
        while True:
            with contextlib.suppress(InterruptedError):
                for _, event in poller.poll():
                    if event & (select.POLLHUP | select.POLLERR | select.POLLNVAL):
                        os._exit(0)

    threading.Thread(target=watch, name="cove-lifeline", daemon=True).start()
