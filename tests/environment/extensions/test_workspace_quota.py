"""The per-conversation workspace quota: many writes under the per-file cap still stop at it."""

from __future__ import annotations

from pathlib import Path

import pytest

from cove.environment.extensions.files import workspace_usage, write_file
from tests.environment.extensions.test_files import make_ctx, workspace

__all__ = ["workspace"]

MB = 1024 * 1024


async def test_writes_stop_at_the_workspace_quota(workspace: Path) -> None:
    ctx = make_ctx(workspace, workspace_quota_mb=2, worker_file_size_mb=1)
    assert await write_file(ctx, "a.bin", b"x" * MB) == MB
    assert await write_file(ctx, "sub/b.bin", b"x" * (MB - 10)) == MB - 10
    with pytest.raises(OSError, match="workspace quota of 2 MB would be exceeded"):
        await write_file(ctx, "c.bin", b"x" * 11)
    assert not (workspace / "c.bin").exists()
    # Overwriting a file counts only the difference; small writes still fit.
    assert await write_file(ctx, "a.bin", b"y" * MB) == MB
    assert await write_file(ctx, "d.txt", "0123456789") == 10
    assert workspace_usage(workspace) == 2 * MB


async def test_symlinked_files_are_not_counted_twice(workspace: Path, tmp_path: Path) -> None:
    ctx = make_ctx(workspace, workspace_quota_mb=1, worker_file_size_mb=1)
    await write_file(ctx, "a.bin", b"x" * 1000)
    (workspace / "link").symlink_to(workspace / "a.bin")
    assert workspace_usage(workspace) == 1000
