"""Chunked values: a large value as a tree of content-addressed chunks (``codec/tree.py``).

The tree round-trips exactly, is a function of the value alone, shares every chunk an edit did not
touch (so a new version costs what changed), and never decodes from chunks it was not given or
that are not what the tree says.
"""

from __future__ import annotations

from collections import Counter, OrderedDict, deque
from decimal import Decimal
from typing import Any

import numpy
import pandas
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cove.codec import closure, decode, encode, encode_tree, refs
from cove.codec.chunks import RUN_ITEMS, Tree, chunk_hash
from cove.errors import CodecError, ValueTooLarge
from tests.codec.test_codec import hashable_scalars, same, values

LIMIT = 1 << 30


def tree_of(value: Any, known: Tree | None = None) -> Tree:
    held = known.closure if known is not None else frozenset()
    return encode_tree(value, max_bytes=LIMIT, max_depth=100, known=held.__contains__)


def decoded(tree: Tree, *earlier: Tree) -> Any:
    chunks: dict[str, bytes] = {}
    for other in (*earlier, tree):
        chunks.update(other.chunks)
    return decode(tree.root, chunks=chunks.__getitem__)


def new_bytes(tree: Tree) -> int:
    return len(tree.root) + sum(map(len, tree.chunks.values()))


def tiled(items: list[Any]) -> list[Any]:
    """A long list made of a few drawn items (drawing hundreds would be slow)."""
    return (items * (3 * RUN_ITEMS // len(items) + 1))[: 3 * RUN_ITEMS]


few_scalars = st.lists(hashable_scalars, min_size=1, max_size=8)
few_values = st.lists(values, min_size=1, max_size=4)
big_values = st.one_of(
    few_scalars.map(tiled),
    few_scalars.map(lambda items: tuple(tiled(items))),
    few_values.map(tiled),
    few_values.map(lambda items: {n: item for n, item in enumerate(tiled(items))}),
    st.dictionaries(st.text(max_size=3), hashable_scalars, max_size=4).map(
        lambda row: [dict(row) for _ in range(300)]
    ),
    st.text(min_size=1, max_size=20).map(lambda text: text * 5_000),
    st.binary(min_size=1, max_size=20).map(lambda data: data * 9_000),
)


@pytest.mark.slow
@settings(max_examples=30)
@given(big_values)
def test_a_tree_round_trips_exactly(value: Any) -> None:
    tree = tree_of(value)
    assert same(value, decoded(tree))
    assert set(closure([tree.root], dict(tree.chunks).__getitem__)) == tree.closure


@settings(max_examples=25)
@given(values)
def test_a_value_without_long_parts_is_its_plain_encoding(value: Any) -> None:
    """So roots stored before chunks existed, and small values, read and compare the same."""
    tree = tree_of(value)
    if not tree.closure:
        assert tree.root == encode(value)


@settings(max_examples=25)
@given(big_values)
def test_the_tree_is_a_function_of_the_value(value: Any) -> None:
    first, second = tree_of(value), tree_of(value)
    assert (first.root, first.digest, first.closure) == (second.root, second.digest, second.closure)


def test_equal_values_built_differently_have_the_same_tree() -> None:
    grown: list[int] = []
    for number in range(100_000):
        grown.append(number)
    assert tree_of(grown).digest == tree_of(list(range(100_000))).digest
    assert (
        tree_of({str(n): n for n in range(1000)}).digest
        != tree_of({str(n): n for n in reversed(range(1000))}).digest
    )  # dict order is part of the value


def test_an_append_adds_only_the_tail_of_the_tree() -> None:
    numbers = list(range(100_000))
    before = tree_of(numbers)
    numbers.append(-1)
    after = tree_of(numbers, known=before)
    assert len(after.chunks) <= 3 and new_bytes(after) <= 16 * 1024
    assert decoded(after, before) == numbers


def test_one_changed_element_of_a_million_adds_little() -> None:
    numbers = list(range(1_000_000))
    before = tree_of(numbers)
    numbers[654_321] = -1
    after = tree_of(numbers, known=before)
    assert new_bytes(after) <= 64 * 1024
    assert decoded(after, before) == numbers


@pytest.mark.slow
def test_rows_appended_to_a_table_add_a_run() -> None:
    rows = [{"id": n, "name": f"item {n}", "price": n * 1.5} for n in range(50_000)]
    before = tree_of(rows)
    rows.append({"id": -1, "name": "new", "price": 0.5})
    after = tree_of(rows, known=before)
    assert new_bytes(after) <= 32 * 1024
    assert decoded(after, before) == rows


def test_a_long_string_and_bytes_share_their_unchanged_parts() -> None:
    text = "".join(chr(0x41 + n % 50) for n in range(1_000_000))
    before = tree_of(text)
    after = tree_of(text + "!", known=before)
    assert new_bytes(after) <= 70 * 1024 and decoded(after, before) == text + "!"
    data = bytes(range(256)) * 4_000
    before = tree_of(data)
    changed = data[:500_000] + b"x" + data[500_001:]
    after = tree_of(changed, known=before)
    assert new_bytes(after) <= 70 * 1024 and decoded(after, before) == changed


def test_arrays_and_frames_are_stored_in_parts() -> None:
    array = numpy.arange(2_000_000, dtype=numpy.float64)
    before = tree_of(array)
    array[1_000_000] = -1.5
    after = tree_of(array, known=before)
    assert new_bytes(after) <= 70 * 1024
    assert numpy.array_equal(decoded(after, before), array)
    frame = pandas.DataFrame({"a": numpy.arange(300_000), "b": numpy.arange(300_000) * 0.5})
    before = tree_of(frame)
    frame.loc[5, "b"] = -2.0
    after = tree_of(frame, known=before)
    assert new_bytes(after) <= 70 * 1024  # one column's part, not the frame
    assert decoded(after, before).equals(frame)


@pytest.mark.parametrize(
    "value",
    [
        tuple(range(1000)),
        set(range(1000)),
        frozenset(range(1000)),
        deque(range(1000), maxlen=2000),
        OrderedDict((n, str(n)) for n in range(1000)),
        Counter({n: n for n in range(1000)}),
        [Decimal(n) for n in range(1000)],
        ["\ud800" * 10_000, "a"],  # lone surrogates, long
        numpy.array([str(n) for n in range(5000)], dtype=object),
    ],
)
def test_every_container_can_hold_runs(value: Any) -> None:
    tree = tree_of(value)
    assert tree.closure
    result = decoded(tree)
    if isinstance(value, numpy.ndarray):
        assert result.dtype == object and result.tolist() == value.tolist()
    else:
        assert same(value, result)


def test_a_tree_cannot_be_decoded_without_its_chunks() -> None:
    tree = tree_of(list(range(1000)))
    with pytest.raises(CodecError, match="stored in chunks"):
        decode(tree.root)
    chunks = dict(tree.chunks)
    chunks.pop(next(iter(chunks)))
    with pytest.raises(CodecError, match="missing"):
        decode(tree.root, chunks=chunks.__getitem__)


def test_chunks_that_are_not_what_the_tree_says_are_refused() -> None:
    part = b"\x00" + b"x" * 10
    name = chunk_hash(part)

    def parts(level: int) -> str:
        return '{"bytes":{"parts":[' + str(level) + ',["' + name + '"]]}}'

    runs = '{"runs":["' + name + '"]}'
    wrong = {
        "leaf as parts": (parts(1), {name: part}),
        "text as part": (parts(0), {name: b"[1,2]"}),
        "part as run": (runs, {name: part}),
        "object as run": (runs, {name: b'{"x":1}'}),
        "bad level": (parts(99), {name: part}),
    }
    for root, chunks in wrong.values():
        with pytest.raises(CodecError):
            decode(root, chunks=chunks.__getitem__)


def test_a_chunk_loop_is_refused_not_followed_forever() -> None:
    """Names are hashes, so a real tree cannot loop; a forged source is still bounded."""
    name = "0" * 32
    looping = '{"runs":["' + name + '"]}'
    with pytest.raises(ValueTooLarge):
        decode(looping, chunks={name: looping.encode()}.__getitem__)


def test_refs_find_only_nodes_the_encoder_makes() -> None:
    text = encode(['{"runs":["' + "a" * 32 + '"]}', b'{"runs":["' + b"b" * 32 + b'"]}'])
    assert refs(text) == []
    tree = tree_of([list(range(300)), "x" * 40_000])
    assert len(refs(tree.root)) >= 2


def test_the_size_limit_counts_the_whole_tree() -> None:
    with pytest.raises(ValueTooLarge):
        encode_tree(list(range(100_000)), max_bytes=100_000, max_depth=100)
    with pytest.raises(ValueTooLarge):
        encode_tree(b"x" * 10_000_000, max_bytes=1_000_000, max_depth=100)
