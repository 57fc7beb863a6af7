"""Signal routing for commands that run turns: Ctrl-C and SIGTERM reach the event loop."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Callable, Iterator


@contextlib.contextmanager
def routed_signals(on_sigint: Callable[[], None], on_sigterm: Callable[[], None]) -> Iterator[None]:
    """Route SIGINT and SIGTERM to the running event loop for the body.

    SIGTERM (a service manager, ``kill``, a closed terminal's shell) is treated like a first
    Ctrl-C: the running turn is cancelled and recorded, workers stop, the database closes.
    """
    loop = asyncio.get_running_loop()
    installed = []
    try:
        for signum, handler in ((signal.SIGINT, on_sigint), (signal.SIGTERM, on_sigterm)):
            loop.add_signal_handler(signum, handler)
            installed.append(signum)
    except (NotImplementedError, RuntimeError):  # not the main thread
        pass
    try:
        yield
    finally:
        for signum in installed:
            loop.remove_signal_handler(signum)
