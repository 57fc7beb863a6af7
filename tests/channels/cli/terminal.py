"""Running ``cove`` with one of its output streams on a pseudo-terminal, as in a real shell."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from typing import Any

from tests.channels.cli.helpers import CoveProcess


def on_terminal(
    cli: CoveProcess, *args: str, stream: str = "stdout", stdin: str | None = None
) -> tuple[int, str, str]:
    """Run ``cove ARGS`` with ``stream`` ("stdout" or "stderr") on a terminal, the other piped.

    ``stdin`` is piped in when given (else stdin is empty). Returns the exit code, what the
    terminal received and what the pipe received.
    """
    main, child = os.openpty()
    os.set_blocking(main, True)
    received: list[bytes] = []

    def read() -> None:
        while True:
            try:
                data = os.read(main, 65536)
            except OSError:  # EIO: every process holding the terminal has closed it
                return
            if not data:
                return
            received.append(data)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    env = dict(cli.env, TERM="xterm-256color", COLUMNS="120")
    piped = "stderr" if stream == "stdout" else "stdout"
    streams: dict[str, Any] = {stream: child, piped: subprocess.PIPE}
    proc = subprocess.Popen(
        [sys.executable, "-m", "cove", *args],
        env=env,
        stdin=subprocess.DEVNULL if stdin is None else subprocess.PIPE,
        **streams,
    )
    os.close(child)
    out, err = proc.communicate(None if stdin is None else stdin.encode(), timeout=120)
    reader.join(timeout=30)
    os.close(main)
    other = (err if stream == "stdout" else out).decode()
    return proc.returncode, b"".join(received).decode(errors="replace"), other
