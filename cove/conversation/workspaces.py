"""Workspaces: each conversation's directory of files (attachments, files its code writes).

The file work (copying a tree, removing one, writing attachments) runs in a worker thread so the
event loop keeps serving other conversations meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import shutil
from collections.abc import AsyncIterable, Sequence
from pathlib import Path

from cove.config import SandboxSettings
from cove.environment.extensions.quota import WorkspaceQuota
from cove.errors import CoveError, QuotaExceeded


class Workspaces:
    """The workspace directories under one root, one per conversation."""

    def __init__(self, root: Path, settings: SandboxSettings) -> None:
        self.root = root
        self._settings = settings  # the quota attachments count against, as the code's files do

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
            QuotaExceeded: Together they would take the workspace past its quota
                (``workspace_quota_mb``, ``workspace_max_entries``); nothing is written then.
        """
        if not attachments:  # most turns: the workspace is not touched (its environment makes it)
            return ()
        files = {_plain(name): data for name, data in attachments}
        workspace = await self.ensure(conversation_id)
        quota = WorkspaceQuota(workspace, self._settings)
        await asyncio.to_thread(_write_files, workspace, files, quota)
        return tuple((name, len(data)) for name, data in files.items())

    async def receive(self, conversation_id: str, name: str, chunks: AsyncIterable[bytes]) -> int:
        """Stream a file into the workspace as ``name`` (an upload); its size.

        The data goes to a staging file outside every workspace and is renamed into place only
        once complete and admitted by the quota: a refused or broken upload leaves nothing.

        Raises:
            CoveError: ``name`` is empty or hidden, or names a directory or link there.
            QuotaExceeded: The file would take the workspace past its quota or entry limit.
        """
        plain = _plain(name)
        staging = self.root / _STAGING
        await asyncio.to_thread(staging.mkdir, parents=True, exist_ok=True)
        partial = staging / f"{conversation_id}-{secrets.token_hex(8)}"
        try:
            with partial.open("wb") as out:
                async for chunk in chunks:
                    await asyncio.to_thread(out.write, chunk)
            workspace = await self.ensure(conversation_id)
            quota = WorkspaceQuota(workspace, self._settings)
            return await asyncio.to_thread(_place, partial, workspace / plain, quota)
        finally:
            partial.unlink(missing_ok=True)


_STAGING = ".incoming"  # under the workspaces' root; no conversation id starts with a dot


def _plain(name: str) -> str:
    """``name`` as a plain, visible file name.

    Raises:
        CoveError: It is empty, hidden or has a directory part.
    """
    if not name or Path(name).name != name or name.startswith("."):
        raise CoveError(f"file name {name!r} is not allowed (a plain name, not hidden)")
    return name


def _place(partial: Path, target: Path, quota: WorkspaceQuota) -> int:
    if target.is_symlink() or target.is_dir():
        raise CoveError(f"{target.name!r} exists and is not a regular file")
    size = partial.stat().st_size
    with contextlib.ExitStack() as admitted:
        _admit(admitted, quota, f"uploading {target.name!r}", [(target, size)])
        os.replace(partial, target)
    return size


def _copy_tree(source: Path, target: Path) -> None:
    # Symlinks stay links; ``target`` exists afterwards even when ``source`` does not.
    if source.is_dir():
        shutil.copytree(source, target, symlinks=True, dirs_exist_ok=True)
    target.mkdir(parents=True, exist_ok=True)


def _write_files(directory: Path, files: dict[str, bytes], quota: WorkspaceQuota) -> None:
    # Each file is written under a new name and renamed over the old one: the workspace's
    # directory then shows the change, which is how its quota learns that it must measure again.
    sizes = [(directory / name, len(data)) for name, data in files.items()]
    with contextlib.ExitStack() as admitted:
        _admit(admitted, quota, f"attaching {len(files)} file(s)", sizes)
        for name, data in files.items():
            partial = directory / f".attachment-{secrets.token_hex(8)}"
            try:
                partial.write_bytes(data)
                os.replace(partial, directory / name)
            finally:
                partial.unlink(missing_ok=True)


def _admit(
    stack: contextlib.ExitStack, quota: WorkspaceQuota, who: str, files: list[tuple[Path, int]]
) -> None:
    """Enter the quota's admission of ``files`` on ``stack``.

    Raises:
        QuotaExceeded: The quota refused them.
    """
    try:
        stack.enter_context(quota.writing_all(who, files))
    except OSError as exc:
        raise QuotaExceeded(str(exc)) from None
