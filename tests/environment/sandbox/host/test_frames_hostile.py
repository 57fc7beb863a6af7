"""Forged frames from a worker: every malformed frame is a protocol error, never a host fault.

A worker taken over by sandbox code could write anything on its pipe. The host bounds a frame's
size (its length prefix) and its nesting (the parser's recursion check) and turns each failure
into ``ProtocolError``, which replaces the worker and restores its variables.
"""

from __future__ import annotations

import asyncio
import struct

import pytest

from cove.environment.sandbox.frames import ProtocolError, parse_frame, read_frame
from cove.environment.sandbox.host.client import SandboxClient
from tests.environment.conftest import ok, run

DEEP = b'{"op": "done", "changes": ' + b"[" * 200_000 + b"]" * 200_000 + b"}"
# Deep enough for the parser's recursion check, small enough not to pause a real pipe's reader
# (a paused transport would outlive the killed worker).
DEEP_SMALL = b'{"op": "done", "changes": ' + b"[" * 20_000 + b"]" * 20_000 + b"}"


def framed(body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + body


@pytest.mark.parametrize(
    "body",
    [
        DEEP,
        b"[" * 1_000_000,
        b'{"op": "done", "x": ' + b'{"a": ' * 100_000 + b"1" + b"}" * 100_000 + b"}",
        b'{"op": "done", "n": ' + b"9" * 100_000 + b"}",  # past int()'s digit limit
        b'{"op": "done", "s": "\\ud800"}',
    ],
    ids=["deep arrays", "unterminated", "deep objects", "digit bomb", "lone surrogate"],
)
async def test_forged_frames_are_protocol_errors(body: bytes) -> None:
    reader = asyncio.StreamReader()
    reader.feed_data(framed(body))
    reader.feed_eof()
    try:
        message = await read_frame(reader)
    except ProtocolError:
        return
    assert isinstance(message, dict)  # only a well-formed frame may get through


def test_deep_nesting_is_a_protocol_error() -> None:
    with pytest.raises(ProtocolError, match="nested too deeply"):
        parse_frame(DEEP)


async def test_a_forged_deep_frame_restarts_the_worker(client: SandboxClient) -> None:
    await ok(client, "kept = [1, 2]")
    worker = client._worker
    assert worker is not None
    stdout = worker._process.stdout
    assert stdout is not None
    stdout.feed_data(framed(DEEP_SMALL))  # as if the worker had written it
    outcome = await run(client, "1 + 1")
    assert not outcome.ok and outcome.restart is not None
    assert outcome.restart.reason == "protocol"
    assert "kept" in outcome.restart.restored
    assert (await ok(client, "sum(kept)")).value_preview == "3"
