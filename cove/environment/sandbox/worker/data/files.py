"""Workspace files for the libraries' readers and writers, through the host.

The worker has no file access of its own (Landlock lets it read only the Python runtime). When
sandbox code names a file — ``pd.read_csv("sales.csv")``, ``df.to_csv("out.csv")``,
``fig.savefig("chart.png")`` — the curated function asks the host for the bytes (the ``files``
extension's ``read_file``/``write_file``, with their checks: relative paths inside the workspace,
no ``..``, no symlink out, the read limit, the workspace quota) and hands the library an in-memory
buffer. A path is always a workspace name: URLs and file objects are refused.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

HostCall = Callable[[str, tuple[Any, ...], dict[str, Any]], Any]
"""Calls an extension function on the host: ``(name, args, kwargs) -> result``."""


class WorkspaceFiles:
    """Reads and writes files of the conversation's workspace by asking the host."""

    def __init__(self, call: HostCall) -> None:
        self._call = call

    def read(self, path: object, function: str) -> bytes:
        """The bytes of workspace file ``path``.

        Raises:
            TypeError: ``path`` is not a str.
            ValueError: ``path`` is a URL.
            ExtensionError: The host refused (no such file, outside the workspace, too large).
        """
        name = checked_path(path, function)
        data = self._call("read_file", (name,), {"binary": True})
        if type(data) is not bytes:
            raise TypeError(f"{function}(): the host sent no bytes for {name!r}")
        return data

    def write(self, path: object, data: bytes | str, function: str) -> int:
        """Write ``data`` to workspace file ``path``; the number of bytes written.

        Raises:
            TypeError: ``path`` is not a str.
            ValueError: ``path`` is a URL.
            ExtensionError: The host refused (outside the workspace, over the quota).
        """
        name = checked_path(path, function)
        content = data.encode("utf-8") if isinstance(data, str) else bytes(data)
        return int(self._call("write_file", (name, content), {}))

    def text_buffer(self, path: object, function: str, encoding: str | None = None) -> io.StringIO:
        """A ``StringIO`` over workspace file ``path`` decoded as ``encoding`` (UTF-8)."""
        raw = self.read(path, function)
        return io.StringIO(raw.decode(encoding or "utf-8"))


def checked_path(path: object, function: str) -> str:
    """``path`` when it is a workspace name (a str that is not a URL), else a clear refusal."""
    if type(path) is not str:
        raise TypeError(
            f"{function}(): give a file name in the workspace (a str such as 'data.csv'), not a "
            f"{type(path).__name__}"
        )
    if "://" in path:
        raise ValueError(f"{function}(): {path!r} is a URL; the sandbox has no network")
    return path


def is_target(value: object) -> bool:
    """Whether a writer's target argument names a file (else the writer returns its text)."""
    return value is not None
