"""The files extension: normal use works; every way out of the workspace is refused clearly."""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Any

import pytest

from cove.config import Settings
from cove.environment.extensions.base import CallContext
from cove.environment.extensions.files import list_files, read_file, write_file
from cove.environment.extensions.quota import WorkspaceQuota

SECRET = b"top secret"


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    secret = tmp_path / "secret.txt"
    secret.write_bytes(SECRET)
    return secret


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    return ws


def untouched(path: Path) -> bool:
    return path.read_bytes() == SECRET


def make_ctx(workspace: Path, **settings: Any) -> CallContext:
    # The files functions only use workspace, settings and quota; the rest stays empty here.
    sandbox = Settings.load(
        env={}, sandbox_libraries=False, data_dir=workspace.parent / "data", **settings
    ).sandbox
    return CallContext(
        environment=None,  # type: ignore[arg-type]
        conversation_id="c1",
        workspace=workspace,
        store=None,  # type: ignore[arg-type]
        settings=sandbox,
        hooks=None,
        quota=WorkspaceQuota(workspace, sandbox),
    )


async def test_write_read_and_list_round_trip(workspace: Path) -> None:
    ctx = make_ctx(workspace)
    assert await write_file(ctx, "notes/a.txt", "héllo") == len("héllo".encode())
    assert await write_file(ctx, "raw.bin", b"\x00\xff") == 2
    assert await read_file(ctx, "notes/a.txt") == "héllo"
    assert await read_file(ctx, "raw.bin", binary=True) == b"\x00\xff"
    listing = await list_files(ctx)
    assert listing == [
        {"path": "notes", "type": "dir", "size": None},
        {"path": "raw.bin", "type": "file", "size": 2},
    ]
    assert await list_files(ctx, "notes") == [{"path": "notes/a.txt", "type": "file", "size": 6}]


async def test_symlink_inside_workspace_is_followed(workspace: Path) -> None:
    ctx = make_ctx(workspace)
    (workspace / "real.txt").write_text("inside")
    (workspace / "link.txt").symlink_to(workspace / "real.txt")
    assert await read_file(ctx, "link.txt") == "inside"
    kinds = {e["path"]: e["type"] for e in await list_files(ctx)}
    assert kinds == {"link.txt": "symlink", "real.txt": "file"}


@pytest.mark.parametrize("path", ["../secret.txt", "a/../../secret.txt", "..", "x/.."])
async def test_dotdot_is_refused(workspace: Path, outside: Path, path: str) -> None:
    ctx = make_ctx(workspace)
    with pytest.raises(PermissionError, match=r"'\.\.' is not allowed"):
        await read_file(ctx, path)
    with pytest.raises(PermissionError, match=r"'\.\.' is not allowed"):
        await write_file(ctx, path, "overwritten")
    assert untouched(outside)


async def test_absolute_paths_are_refused(workspace: Path, outside: Path) -> None:
    ctx = make_ctx(workspace)
    for path in (str(outside), "/etc/passwd", "~/x"):
        with pytest.raises(PermissionError, match="absolute paths are not allowed"):
            await read_file(ctx, path)
    with pytest.raises(PermissionError, match="absolute paths are not allowed"):
        await write_file(ctx, str(outside), "overwritten")
    with pytest.raises(PermissionError, match="absolute paths are not allowed"):
        await list_files(ctx, "/")
    assert untouched(outside)


async def test_symlinks_leading_out_are_refused(workspace: Path, outside: Path) -> None:
    ctx = make_ctx(workspace)
    (workspace / "leak.txt").symlink_to(outside)
    (workspace / "up").symlink_to(outside.parent)
    (workspace / "dangling").symlink_to(outside.parent / "not-yet.txt")
    with pytest.raises(PermissionError, match="leads outside the workspace"):
        await read_file(ctx, "leak.txt")
    with pytest.raises(PermissionError, match="leads outside the workspace"):
        await write_file(ctx, "leak.txt", "overwritten")
    with pytest.raises(PermissionError, match="leads outside the workspace"):
        await read_file(ctx, "up/secret.txt")
    with pytest.raises(PermissionError, match="leads outside the workspace"):
        await list_files(ctx, "up")
    with pytest.raises(PermissionError, match="leads outside the workspace"):
        await write_file(ctx, "dangling", "created outside")
    assert untouched(outside)
    assert not (outside.parent / "not-yet.txt").exists()


async def test_fifo_is_refused_without_opening_it(workspace: Path) -> None:
    ctx = make_ctx(workspace)
    os.mkfifo(workspace / "pipe")
    # Opening a fifo with no writer would block this test forever: a pass proves it was not opened.
    with pytest.raises(PermissionError, match="special file"):
        await read_file(ctx, "pipe")
    with pytest.raises(PermissionError, match="special file"):
        await write_file(ctx, "pipe", "x")
    assert {e["path"]: e["type"] for e in await list_files(ctx)} == {"pipe": "special"}


async def test_socket_and_device_are_refused(workspace: Path) -> None:
    ctx = make_ctx(workspace)
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(workspace / "sock"))
        with pytest.raises(PermissionError, match="special file"):
            await read_file(ctx, "sock")
    (workspace / "null").symlink_to("/dev/null")
    with pytest.raises(PermissionError, match="leads outside the workspace"):
        await read_file(ctx, "null")


async def test_oversize_read_is_refused(workspace: Path) -> None:
    ctx = make_ctx(workspace, max_file_read_bytes=10)
    (workspace / "big.txt").write_text("x" * 11)
    (workspace / "ok.txt").write_text("x" * 10)
    with pytest.raises(ValueError, match="has 11 bytes; the limit is 10"):
        await read_file(ctx, "big.txt")
    assert await read_file(ctx, "ok.txt") == "x" * 10


async def test_oversize_write_is_refused(workspace: Path) -> None:
    ctx = make_ctx(workspace, worker_file_size_mb=1)
    with pytest.raises(ValueError, match="exceed the limit"):
        await write_file(ctx, "big.bin", b"x" * (1024 * 1024 + 1))
    assert not (workspace / "big.bin").exists()


async def test_bad_arguments_and_missing_files(workspace: Path) -> None:
    ctx = make_ctx(workspace)
    (workspace / "d").mkdir()
    (workspace / "bin").write_bytes(b"\xff\xfe")
    with pytest.raises(FileNotFoundError, match=r"no file 'nope\.txt'"):
        await read_file(ctx, "nope.txt")
    with pytest.raises(IsADirectoryError, match="is a directory"):
        await read_file(ctx, "d")
    with pytest.raises(IsADirectoryError, match="is the workspace directory"):
        await write_file(ctx, ".", "x")
    with pytest.raises(ValueError, match="binary=True"):
        await read_file(ctx, "bin")
    with pytest.raises(TypeError, match="path must be a str"):
        await read_file(ctx, 3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="content must be str or bytes"):
        await write_file(ctx, "x.txt", [1, 2])  # type: ignore[arg-type]
    with pytest.raises(NotADirectoryError):
        await list_files(ctx, "bin")
    with pytest.raises(FileNotFoundError, match="no directory"):
        await list_files(ctx, "missing")
    with pytest.raises(ValueError, match="NUL"):
        await read_file(ctx, "a\x00b")
