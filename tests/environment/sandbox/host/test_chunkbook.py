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


def node(*names: str) -> bytes:
    return ('{"runs":[' + ",".join(f'"{n}"' for n in names) + "]}").encode()


def run_block(book: ChunkBook, pairs: dict[str, bytes], root: str) -> VarVersion:
    book.begin()
    book.receive(wire(pairs.items()))
    [attached] = book.attach([change(root)])
    book.apply([attached])
    return attached


def test_a_new_version_holds_only_what_it_reaches_and_releases_what_it_no_longer_does() -> None:
    book = ChunkBook()
    leaves = {codec.chunks.chunk_hash(d): d for d in (b"[1]", b"[2]", b"[3]")}
    a, b, c = leaves
    first = {a: leaves[a], b: leaves[b]}
    run_block(book, first, node(a, b).decode())
    assert len(book) == 2
    second = run_block(book, {c: leaves[c]}, node(b, c).decode())
    assert [n for n, _ in second.chunks] == [c]  # the shared chunk is not sent again
    assert len(book) == 2  # the first leaf went with the version that reached it
    assert {n for batch in book.frames(1 << 20) for n, _ in batch} == {b, c}
    book.drop("nums")
    assert len(book) == 0


def test_a_tree_grown_one_level_per_block_is_refused_past_the_codec_depth() -> None:
    book = ChunkBook()
    leaf = b"[0]"
    below = codec.chunks.chunk_hash(leaf)
    run_block(book, {below: leaf}, node(below).decode())
    with pytest.raises(ProtocolError, match="nested too deeply"):
        for _ in range(codec.chunks.MAX_LEVELS + 3):
            data = node(below)
            name = codec.chunks.chunk_hash(data)
            run_block(book, {name: data}, node(name).decode())
            below = name


def test_a_restored_snapshot_missing_a_chunk_holds_nothing() -> None:
    book = ChunkBook()
    chunks = dict(list(TREE.chunks.items())[1:])
    [snapshot] = book.reset([change(TREE.root)], chunks)
    assert snapshot.name == "nums"
    assert len(book) == 0
    book.reset([change(TREE.root)], dict(TREE.chunks))
    assert len(book) == len(TREE.chunks)
