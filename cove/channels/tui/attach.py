"""Attaching files in the terminal UI: the palette's "Attach a file…" asks for a path; the file
goes with the next message into the conversation's workspace, readable there by name
(``pd.read_csv('sales.csv')``), as attachments do in every channel."""

from __future__ import annotations

import asyncio
from pathlib import Path

from cove.channels.tui.format import clean
from cove.channels.tui.host import AppHost
from cove.channels.tui.screens.dialogs import AskText
from cove.errors import CoveError


def ask(app: AppHost) -> None:
    """Ask for the path of a file to attach to the next message."""

    def chosen(path: str | None) -> None:
        if path:
            app.run_worker(app.guard(lambda: attach(app, Path(path).expanduser())), group="attach")

    app.push_screen(AskText("File to attach to the next message:", placeholder="path"), chosen)


async def attach(app: AppHost, path: Path) -> None:
    """Read ``path`` and keep it for the next message.

    Raises:
        CoveError: Not a readable file, or over the size the sandbox reads.
    """
    data = await asyncio.to_thread(_read, path, app.convs.settings.sandbox.max_file_read_bytes)
    app.attachments = [(n, d) for n, d in app.attachments if n != path.name] + [(path.name, data)]
    names = ", ".join(clean(name) for name, _ in app.attachments)
    app.notify(f"attached (sent with your next message): {names}")


def _read(path: Path, limit: int) -> bytes:
    try:
        if not path.is_file():
            raise CoveError(f"{clean(str(path))} is not a file")
        if path.stat().st_size > limit:
            raise CoveError(f"{clean(path.name)} is over the {limit:,}-byte limit of the sandbox")
        return path.read_bytes()
    except OSError as exc:
        raise CoveError(f"cannot read {clean(str(path))}: {exc.strerror or exc}") from exc
