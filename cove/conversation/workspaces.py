"""Workspaces: each conversation's directory of files (attachments, files its code writes).

The file work (copying a tree, removing one, writing attachments) runs in a worker thread so the
event loop keeps serving other conversations meanwhile.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import shutil
from collections.abc import Sequence
from pathlib import Path

from cove.errors import CoveError


class Workspaces:
    """The workspace directories under one root, one per conversation."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def path(self, conversation_id: str) -> Path:
        """The workspace of a conversation (it may not exist yet)."""
        return self.root / conversation_id

    async def ensure(self, conversation_id: str) -> Path:
        """The workspace of a conversation, created if missing."""
        workspace = self.path(conversation_id)
        await asyncio.to_thread(workspace.mkdir, parents=True, exist_ok=True)
        return workspace

    async def copy(self, source_id: str, target_id: str) -> None:
        """Give ``target_id`` a copy of the files of ``source_id`` (a fork)."""
        await asyncio.to_thread(_copy_tree, self.path(source_id), self.path(target_id))

    async def remove(self, conversation_id: str) -> None:
        """Delete the workspace of a conversation and everything in it."""
        await asyncio.to_thread(shutil.rmtree, self.path(conversation_id), ignore_errors=True)

    async def save_attachments(
        self, conversation_id: str, attachments: Sequence[tuple[str, bytes]]
    ) -> tuple[tuple[str, int], ...]:
        """Write the files into the workspace; return their (name, size) for the request.

        Raises:
            CoveError: A name is empty or hidden (starts with a dot); nothing is written then.
        """
        files: dict[str, bytes] = {}
        for name, data in attachments:
            safe = Path(name).name
            if not safe or safe.startswith("."):
                raise CoveError(f"attachment name {name!r} is not allowed")
            files[safe] = data
        workspace = await self.ensure(conversation_id)
        await asyncio.to_thread(_write_files, workspace, files)
        return tuple((name, len(data)) for name, data in files.items())


def _copy_tree(source: Path, target: Path) -> None:
    # Symlinks stay links; ``target`` exists afterwards even when ``source`` does not.
    if source.is_dir():
        shutil.copytree(source, target, symlinks=True, dirs_exist_ok=True)
    target.mkdir(parents=True, exist_ok=True)


def _write_files(directory: Path, files: dict[str, bytes]) -> None:
    # Each file is written under a new name and renamed over the old one: the workspace's
    # directory then shows the change, which is how its quota learns that it must measure again.
    for name, data in files.items():
        partial = directory / f".attachment-{secrets.token_hex(8)}"
        try:
            partial.write_bytes(data)
            os.replace(partial, directory / name)
        finally:
            partial.unlink(missing_ok=True)
