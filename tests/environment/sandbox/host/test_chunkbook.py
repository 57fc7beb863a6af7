"""What a worker sends as chunks is hostile: each must hash to its name, a tree may name only
chunks held or received, and a reply may not bring more than the report limit."""

from __future__ import annotations

import base64

import pytest

from cove import codec
from cove.environment.sandbox.frames import ProtocolError
from cove.environment.sandbox.host.chunkbook import ChunkBook
from cove.results import VarVersion

TREE = codec.encode_tree(list(range(20_000)), max_bytes=1 << 30, max_depth=100)


def wire(pairs: object) -> list[list[str]]:
    return [[name, base64.b64encode(data).decode("ascii")] for name, data in pairs]  # type: ignore[attr-defined]


def change(root: str) -> VarVersion:
    return VarVersion("nums", "value", root, "list", "[0, 1, ...]")


def test_received_chunks_are_attached_then_held() -> None:
    book = ChunkBook()
    book.begin()
    book.receive(wire(TREE.chunks.items()))
    [attached] = book.attach([change(TREE.root)])
    assert dict(attached.chunks) == dict(TREE.chunks)
    book.apply([attached])
    assert len(book) == len(TREE.chunks)
    book.begin()  # the next block: the same tree needs nothing new
    [again] = book.attach([change(TREE.root)])
    assert again.chunks == ()


def test_a_chunk_that_is_not_what_its_name_says_is_a_protocol_error() -> None:
    book = ChunkBook()
    book.begin()
    name, data = next(iter(TREE.chunks.items()))
    with pytest.raises(ProtocolError, match="does not match its name"):
        book.receive(wire([(name, data + b" ")]))
    with pytest.raises(ProtocolError, match="malformed"):
        book.receive([["not a name", "AAAA"]])


def test_a_tree_naming_a_chunk_never_sent_is_a_protocol_error() -> None:
    book = ChunkBook()
    book.begin()
    book.receive(wire(list(TREE.chunks.items())[1:]))  # the first is held back
    with pytest.raises(ProtocolError, match="never sent"):
        book.attach([change(TREE.root)])
