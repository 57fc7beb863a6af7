"""The ``files`` extension: read, write and list files inside the conversation's workspace.

Every path is relative to the workspace. Refused, with a ``PermissionError`` naming the reason:
absolute paths, ``..`` components, paths whose symlinks resolve outside the workspace, and special
files (fifos, devices, sockets — detected with ``lstat``/``stat`` and never opened). Reads larger
than ``settings.max_file_read_bytes`` and writes larger than ``settings.worker_file_size_mb`` are
refused with a ``ValueError``; paths deeper than ``quota.MAX_DEPTH`` parts with a
``PermissionError``; a write that would take the workspace past its quota
(``settings.workspace_quota_mb``, every entry counted with its disk blocks plus a per-entry
cost; ``settings.workspace_max_entries`` entries) is refused with an ``OSError`` saying so
(``quota.py``). The work runs in a thread so the event loop never blocks on disk.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import stat
from pathlib import Path, PurePosixPath
from typing import Any

from cove.environment.extensions.base import CallContext, Extension, ExtensionFunction
from cove.environment.extensions.quota import MAX_DEPTH, WorkspaceQuota

_PROMPT = """
Paths are relative to your workspace directory (uploaded files land there). Absolute paths, '..',
symlinks leading outside and special files are refused.
"""


def _confined(workspace: Path, path: Any, function: str) -> Path:
    """The resolved absolute path of ``path`` inside ``workspace``, or a refusal."""
    if not isinstance(path, str):
        raise TypeError(f"{function}(): path must be a str, not {type(path).__name__}")
    if "\x00" in path:
        raise ValueError(f"{function}(): path contains a NUL character")
    pure = PurePosixPath(path)
    if pure.is_absolute() or path.startswith("~"):
        raise PermissionError(f"{function}(): absolute paths are not allowed ({path!r})")
    if ".." in pure.parts:
        raise PermissionError(f"{function}(): '..' is not allowed in paths ({path!r})")
    root = workspace.resolve()
    # resolve() follows every symlink on the way, including dangling ones, so a link that points
    # outside is caught here whether or not its target exists.
    target = (root / pure).resolve()
    if not target.is_relative_to(root):
        raise PermissionError(f"{function}(): {path!r} leads outside the workspace")
    return target


def _display(root: Path, target: Path) -> str:
    relative = target.relative_to(root.resolve())
    return str(relative) if str(relative) != "." else "."


def _require_regular(mode: int, path: str, function: str) -> None:
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(f"{function}(): {path!r} is a directory")
    if not stat.S_ISREG(mode):
        raise PermissionError(f"{function}(): {path!r} is a special file (fifo, device or socket)")


def _read(ctx: CallContext, path: Any, binary: bool) -> str | bytes:
    target = _confined(ctx.workspace, path, "read_file")
    try:
        info = target.stat()
    except FileNotFoundError:
        raise FileNotFoundError(f"read_file(): no file {path!r} in the workspace") from None
    _require_regular(info.st_mode, path, "read_file")
    limit = ctx.settings.max_file_read_bytes
    if info.st_size > limit:
        raise ValueError(f"read_file(): {path!r} has {info.st_size} bytes; the limit is {limit}")
    # O_NOFOLLOW: the resolved path has no symlinks, so one appearing now is a swap — refuse it.
    fd = os.open(target, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise PermissionError(f"read_file(): {path!r} is not a regular file")
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise ValueError(f"read_file(): {path!r} is larger than the limit of {limit} bytes")
    if binary:
        return data
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(
            f"read_file(): {path!r} is not UTF-8 text; use read_file(path, binary=True)"
        ) from None


def _write(ctx: CallContext, path: Any, content: Any) -> int:
    if isinstance(content, str):
        data = content.encode("utf-8")
    elif isinstance(content, bytes):
        data = content
    else:
        raise TypeError(f"write_file(): content must be str or bytes, not {type(content).__name__}")
    limit = ctx.settings.worker_file_size_mb * 1024 * 1024
    if len(data) > limit:
        raise ValueError(f"write_file(): {len(data)} bytes exceed the limit of {limit} bytes")
    target = _confined(ctx.workspace, path, "write_file")
    root = ctx.workspace.resolve()
    if target == root:
        raise IsADirectoryError(f"write_file(): {path!r} is the workspace directory")
    depth = len(target.relative_to(root).parts)
    if depth > MAX_DEPTH:
        raise PermissionError(
            f"write_file(): {path[:60]!r} has {depth:,} parts; paths may have at most "
            f"{MAX_DEPTH} parts"
        )
    with contextlib.suppress(FileNotFoundError):
        _require_regular(target.lstat().st_mode, path, "write_file")
    quota = ctx.quota or WorkspaceQuota(root, ctx.settings)
    with quota.writing("write_file", target, len(data)):
        target.parent.mkdir(parents=True, exist_ok=True)
        # O_NONBLOCK makes a fifo swapped in after the check fail instead of hanging the host.
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_NONBLOCK
        fd = os.open(target, flags, 0o644)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
    return len(data)


def _list(ctx: CallContext, path: Any) -> list[dict[str, Any]]:
    target = _confined(ctx.workspace, path, "list_files")
    if not target.exists():
        raise FileNotFoundError(f"list_files(): no directory {path!r} in the workspace")
    if not target.is_dir():
        raise NotADirectoryError(f"list_files(): {path!r} is not a directory")
    entries = []
    for child in sorted(target.iterdir(), key=lambda p: p.name):
        mode = child.lstat().st_mode
        kind = (
            "dir"
            if stat.S_ISDIR(mode)
            else "file"
            if stat.S_ISREG(mode)
            else "symlink"
            if stat.S_ISLNK(mode)
            else "special"
        )
        size = child.lstat().st_size if kind == "file" else None
        entries.append({"path": _display(ctx.workspace, child), "type": kind, "size": size})
    return entries


async def read_file(ctx: CallContext, path: str, *, binary: bool = False) -> str | bytes:
    """Read a workspace file as text (UTF-8) or, with ``binary=True``, as bytes."""
    return await asyncio.to_thread(_read, ctx, path, binary)


async def write_file(ctx: CallContext, path: str, content: str | bytes) -> int:
    """Write text or bytes to a workspace file (parents created); returns the byte count."""
    return await asyncio.to_thread(_write, ctx, path, content)


async def list_files(ctx: CallContext, path: str = ".") -> list[dict[str, Any]]:
    """List a workspace directory: one dict per entry with ``path``, ``type`` and ``size``."""
    return await asyncio.to_thread(_list, ctx, path)


FILES = Extension(
    name="files",
    doc="Read, write and list files in this conversation's workspace directory.",
    prompt=_PROMPT,
    functions=(
        ExtensionFunction(
            name="read_file",
            implementation=read_file,
            doc="Read a workspace file as UTF-8 text, or as bytes with binary=True.",
            signature="read_file(path, *, binary=False) -> str | bytes",
            examples=('text = read_file("notes.txt")', 'raw = read_file("img.png", binary=True)'),
        ),
        ExtensionFunction(
            name="write_file",
            implementation=write_file,
            doc="Write str (as UTF-8) or bytes to a workspace file; returns the bytes written.",
            signature="write_file(path, content) -> int",
            examples=('write_file("out/report.md", report)',),
            effect="write",
        ),
        ExtensionFunction(
            name="list_files",
            implementation=list_files,
            doc="List a workspace directory: [{'path', 'type': file|dir|symlink|special, 'size'}].",
            signature='list_files(path=".") -> list[dict]',
            examples=("list_files()", 'list_files("data")'),
        ),
    ),
)
