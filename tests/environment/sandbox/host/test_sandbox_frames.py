"""The frame protocol, and how each side treats garbage."""

from __future__ import annotations

import asyncio
import struct
from pathlib import Path

import pytest

from cove.config import Settings
from cove.environment.sandbox.frames import (
    MAX_FRAME_BYTES,
    ProtocolError,
    frame_bytes,
    parse_frame,
    read_frame,
)
from cove.environment.sandbox.host.client import SandboxClient
from cove.environment.sandbox.host.process import WorkerGone, WorkerProcess, describe_exit
from cove.environment.sandbox.host.replies import block_reply, restore_reply
from cove.errors import SandboxError


async def stream(data: bytes) -> asyncio.StreamReader:
    reader = asyncio.StreamReader()
    reader.feed_data(data)
    reader.feed_eof()
    return reader


async def test_frames_round_trip() -> None:
    message = {"op": "execute", "code": "print('é')", "seed": 1}
    reader = await stream(frame_bytes(message) + frame_bytes({"op": "ping"}))
    assert await read_frame(reader) == message
    assert await read_frame(reader) == {"op": "ping"}
    with pytest.raises(asyncio.IncompleteReadError):
        await read_frame(reader)


@pytest.mark.parametrize(
    "data",
    [
        struct.pack(">I", MAX_FRAME_BYTES + 1) + b"{}",
        struct.pack(">I", 3) + b"abc",
        struct.pack(">I", 2) + b"[]",
        struct.pack(">I", 2) + b"{}",
        struct.pack(">I", 2) + b"\xff\xfe",
    ],
)
async def test_garbage_frames_are_protocol_errors(data: bytes) -> None:
    with pytest.raises(ProtocolError):
        await read_frame(await stream(data))


def test_parse_frame_requires_an_op() -> None:
    assert parse_frame(b'{"op": "x", "n": 1}') == {"op": "x", "n": 1}
    with pytest.raises(ProtocolError):
        parse_frame(b'{"op": 1}')


def test_exit_descriptions() -> None:
    assert describe_exit(-9) == "signal 9"
    assert describe_exit(1) == "exit code 1"
    assert describe_exit(None) == "still running"


@pytest.mark.slow
async def test_a_worker_answers_garbage_with_an_error_and_exits(tmp_path: Path) -> None:
    worker = await WorkerProcess.start(
        Settings.load(env={}, sandbox_libraries=False, data_dir=tmp_path).sandbox, cwd=tmp_path
    )
    assert (await worker.request({"op": "ping"})) == {"op": "ok"}
    assert (await worker.request({"op": "nonsense"}))["op"] == "error"
    stdin = worker._process.stdin
    assert stdin is not None
    stdin.write(struct.pack(">I", MAX_FRAME_BYTES + 5))
    reply = await worker.receive()
    assert reply["op"] == "error" and "bad frame" in reply["error"]
    with pytest.raises(WorkerGone) as gone:
        await worker.receive()
    assert gone.value.returncode == 2
    await worker.terminate()


async def test_invalid_extension_names_are_refused(client: SandboxClient) -> None:
    for name in ("_getattr_", "not an identifier", "__import__"):
        with pytest.raises(SandboxError):
            await client.configure(functions=[name], constants={})
        with pytest.raises(SandboxError):
            await client.configure(functions=[], constants={name: 1})


def test_malformed_worker_replies_are_protocol_errors() -> None:
    good = {"op": "done", "ok": True, "stdout": "", "changes": [], "imports": {}}
    assert block_reply(good).ok is True
    for bad in (
        {**good, "op": "restored"},
        {**good, "ok": "yes"},
        {**good, "changes": [{"name": "x", "kind": "evil"}]},
        {**good, "changes": [{"name": 1, "kind": "value"}]},
        {**good, "changes": "x"},
        {**good, "imports": {"m": ["math"]}},
        {**good, "stdout": None},
    ):
        with pytest.raises(ProtocolError):
            block_reply(bad)
    assert restore_reply({"op": "restored", "restored": ["a"], "lost": []}, {"a"}) == (["a"], [])
    for restored in ([1], ["b"]):
        with pytest.raises(ProtocolError):
            restore_reply({"op": "restored", "restored": restored, "lost": []}, {"a"})
