"""How the command line answers approval requests: a flag for the whole run, or the terminal.

``cove run --approve-all`` / ``--reject-all`` answer every request of the run (recorded as
``flag``). Without either, a run whose stdin and stderr are a terminal asks there, as ``cove
chat`` does; off a terminal nobody can be asked, and the call is denied. The prompt reads its
line without blocking the event loop, so the turn's approval timeout still applies.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Callable
from typing import TextIO

from rich.console import Console

from cove.channels.cli.render import line
from cove.conversation import ApprovalAnswer, ApprovalRequest, Approver

#: What the person may type, and what it means: (approved, remember).
ANSWERS: dict[str, tuple[bool, bool]] = {
    "y": (True, False),
    "yes": (True, False),
    "a": (True, True),
    "always": (True, True),
    "n": (False, False),
    "no": (False, False),
    "never": (False, True),
    "": (False, False),
}
QUESTION = "allow? [y]es · [n]o · [a]lways in this conversation · [never] › "


def flag_approver(approve: bool) -> Approver:
    """An approver answering every request with ``approve`` (``--approve-all``/``--reject-all``)."""

    async def answer(request: ApprovalRequest) -> ApprovalAnswer:
        return ApprovalAnswer(approve, reason="flag")

    return answer


def terminal_approver(console: Console, stdin: TextIO | None = None) -> Approver:
    """An approver asking on the terminal: the request, then one line of answer."""
    stream = stdin or sys.stdin

    async def answer(request: ApprovalRequest) -> ApprovalAnswer:
        console.print(line(("approval needed: ", "bold yellow"), request.text))
        while True:
            console.print(QUESTION, end="", markup=False, highlight=False)
            text = (await _read_line(stream)).strip().lower()
            if text in ANSWERS:
                approved, remember = ANSWERS[text]
                console.print(line(("approved" if approved else "denied", "dim")))
                return ApprovalAnswer(approved, remember)
            console.print(line((f"{text!r}: type y, n, a or never", "yellow")))

    return answer


def first(before: Callable[[], None], approver: Approver) -> Approver:
    """``approver`` calling ``before`` first (to stop a progress spinner drawing over it)."""

    async def answer(request: ApprovalRequest) -> ApprovalAnswer:
        before()
        return await approver(request)

    return answer


def run_approver(approve_all: bool, reject_all: bool, console: Console) -> Approver | None:
    """The approver of ``cove run``: a flag's, the terminal's, or None (off a terminal)."""
    if approve_all or reject_all:
        return flag_approver(approve_all)
    if sys.stdin.isatty() and console.is_terminal:
        return terminal_approver(console)
    return None


async def _read_line(stream: TextIO) -> str:
    """One line of ``stream`` (a terminal or pipe), read when it is ready: cancelling the
    wait (the approval timeout) leaves nothing blocked behind it."""
    loop = asyncio.get_running_loop()
    fd = stream.fileno()
    ready: asyncio.Future[str] = loop.create_future()
    buffer = bytearray()

    def readable() -> None:
        data = os.read(fd, 4096)
        buffer.extend(data)
        if (not data or b"\n" in buffer) and not ready.done():
            ready.set_result(buffer.split(b"\n", 1)[0].decode(errors="replace"))

    loop.add_reader(fd, readable)
    try:
        return await ready
    finally:
        loop.remove_reader(fd)
