"""Workspaces: each conversation's directory of files (attachments, files its code writes)."""

from __future__ import annotations

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

    def ensure(self, conversation_id: str) -> Path:
        """The workspace of a conversation, created if missing."""
        workspace = self.path(conversation_id)
        workspace.mkdir(parents=True, exist_ok=True)
        return workspace

    def copy(self, source_id: str, target_id: str) -> None:
        """Give ``target_id`` a copy of the files of ``source_id`` (a fork)."""
        source = self.path(source_id)
        target = self.path(target_id)
        if source.is_dir():
            shutil.copytree(source, target, symlinks=True, dirs_exist_ok=True)
        target.mkdir(parents=True, exist_ok=True)

    def remove(self, conversation_id: str) -> None:
        """Delete the workspace of a conversation and everything in it."""
        shutil.rmtree(self.path(conversation_id), ignore_errors=True)

    def save_attachments(
        self, conversation_id: str, attachments: Sequence[tuple[str, bytes]]
    ) -> tuple[tuple[str, int], ...]:
        """Write the files into the workspace; return their (name, size) for the request."""
        workspace = self.ensure(conversation_id)
        saved: dict[str, int] = {}
        for name, data in attachments:
            safe = Path(name).name
            if not safe or safe.startswith("."):
                raise CoveError(f"attachment name {name!r} is not allowed")
            (workspace / safe).write_bytes(data)
            saved[safe] = len(data)
        return tuple(saved.items())
