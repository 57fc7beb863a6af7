"""One sent turn as a chat sees it: typing, one status message edited as it runs (throttled),
then the answer as new messages, the figures its blocks made as photos and the files the code
wrote as documents. A turn queued behind another in its chat shows its status and answer only
once the one before said everything, so answers come in the order they were asked."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

from cove.channels.figures import FigureRef
from cove.channels.telegram.figures import Fetch, send_figures
from cove.channels.telegram.outbox import ChatRef, Outbox
from cove.channels.telegram.progress import StatusLine
from cove.conversation import TurnHandle
from cove.errors import CoveError
from cove.events import BlockFinished, Event, TurnFinished, TurnQueued, TurnStarted
from cove.results import BlockFigure

log = logging.getLogger("cove.telegram")

TYPING_EVERY_S = 4.5  # the typing action shows for about five seconds
MAX_FILES_BACK = 5
MAX_FILE_BACK_BYTES = 45 * 1024 * 1024  # Bot API upload limit is 50 MB
QUEUED = "⏳ A turn is running in this chat; this message is queued and runs next."

Snapshot = dict[str, tuple[int, int]]
#: Deals with the error that ended a turn before it ran; False: the error is told as it is.
NotRun = Callable[[CoveError], Awaitable[bool]]


def workspace_snapshot(root: Path) -> Snapshot:
    """Regular files under ``root`` (no symbolic links, nothing hidden): path -> (size, mtime)."""
    found: Snapshot = {}
    if not root.is_dir():
        return found
    for path in root.rglob("*"):
        relative = path.relative_to(root)
        if any(part.startswith(".") for part in relative.parts) or path.is_symlink():
            continue
        with contextlib.suppress(OSError):
            if path.is_file():
                stat = path.lstat()
                found[relative.as_posix()] = (stat.st_size, stat.st_mtime_ns)
        if len(found) > 10_000:
            break
    return found


def safe_name(name: str, fallback: str = "file") -> str:
    """A file name fit for a workspace or a document: no directories, nothing hidden."""
    base = re.sub(r"[^A-Za-z0-9._-]+", "_", Path(name).name).strip("._")[:100]
    return base or fallback


class TurnView:
    """Shows one ``TurnHandle`` in a chat until it ends."""

    def __init__(
        self,
        outbox: Outbox,
        chat: ChatRef,
        handle: TurnHandle,
        workspace: Path,
        interval: float,
        fetch: Fetch | None = None,
        first: Event | None = None,
        not_run: NotRun | None = None,
        after: asyncio.Event | None = None,
    ) -> None:
        self.outbox = outbox
        #: Set once the chat's turn before this one said everything: until then this one shows
        #: no status and no answer, so a chat's answers come in the order it asked.
        self.after = after
        self.first = first  # the handle's first event, when the sender already read it
        self.not_run = not_run  # a turn refused before it ran: the sender's to deal with
        self.fetch = fetch  # reads a figure's PNG when an event does not carry it
        self.figures: list[tuple[FigureRef, BlockFigure]] = []
        self.chat = chat
        self.handle = handle
        self.workspace = workspace
        self.interval = interval
        self.status = StatusLine()
        self.status_id: int | None = None
        self._shown = ""
        self._wake = asyncio.Event()
        self._ended = asyncio.Event()
        self._before: Snapshot | None = None
        self._position = 0

    @property
    def started(self) -> bool:
        """Whether the turn started (it is recorded)."""
        return self._position > 0

    async def run(self) -> TurnFinished | None:
        """Follow the turn to its end; errors are told to the chat, never raised."""
        editor = asyncio.create_task(self._edit_loop())
        typing = asyncio.create_task(self._typing_loop())
        finished: TurnFinished | None = None
        try:
            finished = await self._follow()
        except CoveError as exc:
            if self.not_run is None or self.started or not await self.not_run(exc):
                await self._tell(f"⚠️ {exc}")
        finally:
            self._ended.set()
            self._wake.set()
            typing.cancel()
            with contextlib.suppress(Exception):  # told below; the editor never raises out
                await editor
        if finished is not None:
            await self._deliver(finished)
        return finished

    async def _follow(self) -> TurnFinished | None:
        finished = None
        async for event in self._events():
            if isinstance(event, TurnQueued):
                await self._tell(QUEUED)
            if isinstance(event, TurnStarted):
                self._before = await asyncio.to_thread(workspace_snapshot, self.workspace)
                self._position = event.position
            if isinstance(event, BlockFinished):
                ref = (self._position, event.iteration, event.index)
                self.figures += [(ref, figure) for figure in event.block.figures]
            if isinstance(event, TurnFinished):
                finished = event
            if self.status.update(event):
                self._wake.set()
        return finished

    async def _events(self) -> AsyncIterator[Event]:
        if self.first is not None:
            yield self.first
        async for event in self.handle:
            yield event

    async def _edit_loop(self) -> None:
        """Show the status at most once per ``interval``; the last state always."""
        while True:
            await self._wake.wait()
            self._wake.clear()
            ending = self._ended.is_set()
            try:
                await self._show(self.status.text())
            except Exception as exc:  # a failed edit must not end the turn's view
                log.warning("status update failed in chat %s: %s", self.chat.key, exc)
            if ending:
                return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._ended.wait(), self.interval)

    async def _show(self, text: str) -> None:
        if text == self._shown:
            return
        if self.after is not None:
            await self.after.wait()
        if self.status_id is None:
            if self.status.iteration == 0 and (self.status.ended or self._ended.is_set()):
                return  # ended before it began (withdrawn, refused): the error says it all
            message = await self.outbox.plain(self.chat, text)
            self.status_id = message.message_id
        else:
            await self.outbox.edit(self.chat, self.status_id, text)
        self._shown = text

    async def _typing_loop(self) -> None:
        while True:
            with contextlib.suppress(Exception):
                await self.outbox.typing(self.chat)
            await asyncio.sleep(TYPING_EVERY_S)

    async def _deliver(self, finished: TurnFinished) -> None:
        if self.after is not None:
            await self.after.wait()
        try:
            if finished.answer:
                await self.outbox.answer(self.chat, finished.answer)
            elif self.status_id is None and finished.error:
                await self.outbox.plain(self.chat, f"⚠️ {finished.error}")
            if self.figures and self.fetch is not None:
                await send_figures(self.outbox, self.chat, self.figures, self.fetch)
            await self._send_files()
        except Exception as exc:
            log.error("could not deliver the answer in chat %s: %s", self.chat.key, exc)

    async def _send_files(self) -> None:
        """Send the files the turn's code wrote or changed."""
        if self._before is None:
            return
        after = await asyncio.to_thread(workspace_snapshot, self.workspace)
        changed = [p for p, info in sorted(after.items()) if self._before.get(p) != info]
        for relative in changed[:MAX_FILES_BACK]:
            path = self.workspace / relative
            size = after[relative][0]
            if size == 0 or size > MAX_FILE_BACK_BYTES:
                continue
            data = await asyncio.to_thread(path.read_bytes)
            await self.outbox.document(self.chat, safe_name(relative), data, caption=relative[:200])
        if len(changed) > MAX_FILES_BACK:
            await self._tell(f"…and {len(changed) - MAX_FILES_BACK} more files in the workspace.")

    async def _tell(self, text: str) -> None:
        try:
            await self.outbox.plain(self.chat, text)
        except Exception as exc:
            log.error("could not write to chat %s: %s", self.chat.key, exc)
