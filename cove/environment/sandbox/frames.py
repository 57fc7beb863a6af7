"""Length-prefixed JSON frames: the only channel between the host and a sandbox worker.

A frame is a 4-byte big-endian length followed by that many bytes of UTF-8 JSON holding one
object (a dict with an ``"op"`` key). Both sides use this module: the worker with blocking file
descriptors (``FrameChannel``), the host with asyncio streams (``read_frame``/``frame_bytes``).
"""

from __future__ import annotations

import asyncio
import json
import os
import struct
from typing import Any

MAX_FRAME_BYTES = 64 * 1024 * 1024
"""The largest frame either side accepts; a larger length prefix is protocol garbage."""

_HEADER = struct.Struct(">I")

Frame = dict[str, Any]


class ProtocolError(Exception):
    """A frame could not be read: bad length, bad JSON, or not an object."""


def frame_bytes(message: Frame) -> bytes:
    """The wire form of ``message``.

    Raises:
        ProtocolError: The encoded message is larger than ``MAX_FRAME_BYTES``.
    """
    body = json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    if len(body) > MAX_FRAME_BYTES:
        raise ProtocolError(f"frame of {len(body):,} bytes exceeds {MAX_FRAME_BYTES:,} bytes")
    return _HEADER.pack(len(body)) + body


def parse_frame(body: bytes) -> Frame:
    """Decode a frame body into its message.

    The body is hostile input: its size is bounded by ``MAX_FRAME_BYTES`` (``frame_length``),
    its nesting by the JSON parser's recursion check; every way it can fail is a
    ``ProtocolError`` (the host then replaces the worker), never another exception.

    Raises:
        ProtocolError: The body is not JSON, or not a JSON object with a string ``op``.
    """
    try:
        message = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ProtocolError(f"frame is not UTF-8 JSON: {exc}") from exc
    except RecursionError:  # forged nesting deeper than the parser's stack: hostile, not a bug
        raise ProtocolError("frame is nested too deeply") from None
    except MemoryError:
        raise ProtocolError("frame is too large to decode") from None
    if not isinstance(message, dict) or not isinstance(message.get("op"), str):
        raise ProtocolError("frame is not an object with an 'op'")
    return message


def frame_length(header: bytes) -> int:
    """The body length announced by a 4-byte header.

    Raises:
        ProtocolError: The length exceeds ``MAX_FRAME_BYTES``.
    """
    (length,) = _HEADER.unpack(header)
    if length > MAX_FRAME_BYTES:
        raise ProtocolError(f"announced frame of {length:,} bytes exceeds the limit")
    return int(length)


async def read_frame(reader: asyncio.StreamReader) -> Frame:
    """Read one frame from an asyncio stream (host side).

    Raises:
        asyncio.IncompleteReadError: The stream ended (the worker is gone).
        ProtocolError: The frame is malformed.
    """
    length = frame_length(await reader.readexactly(_HEADER.size))
    return parse_frame(await reader.readexactly(length))


class FrameChannel:
    """Blocking frame I/O over two raw file descriptors (worker side)."""

    def __init__(self, read_fd: int, write_fd: int) -> None:
        self.read_fd = read_fd
        self.write_fd = write_fd

    def send(self, message: Frame) -> None:
        """Write one frame, retrying short writes."""
        view = memoryview(frame_bytes(message))
        while view:
            written = os.write(self.write_fd, view)
            view = view[written:]

    def receive(self) -> Frame | None:
        """Read one frame; None when the host closed the pipe.

        Raises:
            ProtocolError: The frame is malformed or the pipe closed mid-frame.
        """
        header = self._read_exactly(_HEADER.size)
        if header is None:
            return None
        body = self._read_exactly(frame_length(header))
        if body is None:
            raise ProtocolError("pipe closed in the middle of a frame")
        return parse_frame(body)

    def _read_exactly(self, size: int) -> bytes | None:
        chunks: list[bytes] = []
        remaining = size
        while remaining:
            chunk = os.read(self.read_fd, min(remaining, 1 << 20))
            if not chunk:
                return None
            chunks.append(chunk)
            remaining -= len(chunk)
        return b"".join(chunks)
