"""An inbox channel for ``cove serve --channel inbox`` (a ``cove.channels`` entry point).

Each ``*.txt`` file dropped into ``$NOTEBOOK_INBOX`` is a request: it becomes a conversation's
turn, and its answer is written beside it as ``NAME.answer`` (the request is renamed
``NAME.taken`` first, so it is answered once). It shows the shape of every channel: a ``name``,
``start`` and ``stop``, and the one ``Conversations`` API the built-in channels use; and with
``routes``, pages of its own on ``cove serve``'s HTTP server, behind its login: ``GET /inbox``
lists what is waiting and what was answered.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from pathlib import Path

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from cove.config import Settings
from cove.conversation import Conversations
from cove.events import TurnFinished

POLL_S = 0.2


class Inbox:
    """Requests from files in a directory, answers into files beside them."""

    name = "inbox"

    def __init__(self, convs: Conversations, directory: Path) -> None:
        self.convs = convs
        self.directory = directory
        self._task: asyncio.Task[None] | None = None
        #: Served by ``cove serve`` under ``/inbox``, behind its login.
        self.routes = [Route("/inbox", self.listing, methods=["GET"])]

    async def listing(self, request: Request) -> JSONResponse:
        """What is waiting in the inbox and what was answered, by file name."""

        def names(pattern: str) -> list[str]:
            return sorted(path.stem for path in self.directory.glob(pattern))

        waiting = await asyncio.to_thread(names, "*.txt")
        answered = await asyncio.to_thread(names, "*.answer")
        return JSONResponse({"waiting": waiting, "answered": answered})

    async def start(self) -> None:
        """Start watching the directory."""
        await asyncio.to_thread(self.directory.mkdir, parents=True, exist_ok=True)
        self._task = asyncio.create_task(self._watch())

    async def stop(self) -> None:
        """Stop watching (a turn running for a request is cancelled with the task)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _watch(self) -> None:
        while True:
            for request in sorted(await asyncio.to_thread(self.directory.glob, "*.txt")):
                taken = request.with_suffix(".taken")
                await asyncio.to_thread(request.rename, taken)
                answer = await self._answer(await asyncio.to_thread(taken.read_text))
                await asyncio.to_thread(request.with_suffix(".answer").write_text, answer)
            await asyncio.sleep(POLL_S)

    async def _answer(self, text: str) -> str:
        conversation = await self.convs.create(channel="inbox")
        async for event in self.convs.send(conversation.id, text):
            if isinstance(event, TurnFinished):
                return event.answer or f"({event.status}: {event.error})"
        return "(no answer)"


def inbox_channel(convs: Conversations, settings: Settings) -> Inbox:
    """The channel ``cove serve --channel inbox`` runs."""
    directory = Path(os.environ.get("NOTEBOOK_INBOX", "~/cove-inbox")).expanduser()
    return Inbox(convs, directory)
