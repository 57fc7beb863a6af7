"""Encoding a value as a tree of chunks (the node forms are in ``chunks.py``).

The tree is a pure function of the value: long item lists are cut by position into runs of
``RUN_ITEMS`` items (a run whose text is longer than ``LEAF_CHARS`` is split in halves, by its
own content only), their names grouped ``FANOUT`` at a time into interior chunks until one node
remains; long strings, bytes and arrays are cut into ``PART_BYTES`` parts the same way. So an
``append`` changes the last run and the interior chunks above it, an element changed in place
its run and the path above it; every other chunk keeps its name and need not be written again.

``TreeEncoder`` is the codec's ``Encoder`` with the places where items, strings and binary
payloads are emitted overridden; everything else (types, limits, determinism) is the codec's.
``leaf`` and ``index`` build runs nodes, also for callers that keep some runs from an earlier
encoding (the worker's tracker).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from cove.codec.chunks import (
    BINARY,
    FANOUT,
    INLINE_CHARS,
    LEAF_CHARS,
    PART_BYTES,
    RUN_ITEMS,
    Tree,
    chunk_hash,
    text_hash,
)
from cove.codec.encoder import Encoder
from cove.codec.nodes import Json
from cove.codec.shapes import SourceOf, dumps
from cove.errors import CodecError, ValueTooLarge

Known = Callable[[str], bool]
"""Whether the caller already holds a chunk (so its data need not be built)."""

# The codec charges at least 1/17 of an item list's text (an int is charged 1 and takes at most
# 17 characters): a list charged less than INLINE_CHARS / 17 is short without measuring it.
_CHARGE_RATIO = 17


class TreeEncoder(Encoder):
    """Encodes one value as a ``Tree``; create a new instance per value.

    Args:
        max_bytes: The largest accepted encoding (the whole tree), in bytes.
        max_depth: The deepest accepted nesting of containers.
        source_of: As for ``cove.codec.encode``.
        known: Chunks the caller holds: named in the tree, not built.
    """

    def __init__(
        self,
        *,
        max_bytes: int,
        max_depth: int,
        source_of: SourceOf | None,
        known: Known | None = None,
    ) -> None:
        super().__init__(max_bytes=max_bytes, max_depth=max_depth, source_of=source_of)
        self.known: Known = known or _nothing
        self.built: dict[str, bytes] = {}
        self.sizes: dict[str, int] = {}  # every chunk reached, with its size
        self.log: list[str] | None = None  # when a list: the name of every chunk reached
        # Interior runs chunks built or reused, by the names they group: a caller that keeps
        # them (the worker's tracker) hands them to the next encoding of the same value, whose
        # unchanged groups then cost a lookup, not an encoding and a hash.
        self.interior: dict[tuple[str, ...], tuple[str, int]] = {}
        self.earlier: Mapping[tuple[str, ...], tuple[str, int]] = {}

    def tree(self, value: object) -> Tree:
        """The tree of ``value``.

        Raises:
            ValueTooLarge: Over ``max_bytes`` or nested deeper than ``max_depth``.
            CodecError: An unsupported type, or a container that contains itself.
        """
        for surrogates in (False, True):
            self.reset(surrogates)
            try:
                root = self._run(value)  # its chunks recorded in this encoder
                root.encode("utf-8")
            except UnicodeEncodeError:
                continue  # a string holds lone surrogates: encode again, tagging such strings
            return self.finish(root)
        raise CodecError(
            "cannot encode lone surrogates outside a str (in a time zone name, a definition "
            "or an opaque record)"
        )

    def reset(self, surrogates: bool) -> None:
        """Start over (``surrogates``: tag strings holding lone surrogates)."""
        self.check_surrogates = surrogates
        self.used = 0
        self.built.clear()
        self.sizes.clear()
        self.interior.clear()
        self._path.clear()

    def finish(self, root: str) -> Tree:
        """The ``Tree`` of a root built with this encoder."""
        size = len(root.encode("utf-8")) + sum(self.sizes.values())
        if size > self.max_bytes:
            raise ValueTooLarge(
                f"value too large: its encoding is {size:,} bytes, over the limit of "
                f"{self.max_bytes:,} bytes (max_bytes)"
            )
        return Tree(root, text_hash(root), dict(self.built), frozenset(self.sizes), size)

    # -- the overridden emitters --------------------------------------------------------------

    def plain(self, values: list[Any] | tuple[Any, ...], kinds: set[type]) -> list[Json] | None:
        if str in kinds and (kinds != {str} or max(map(len, values)) > INLINE_CHARS // 4):
            return None  # each string decides whether it is stored apart
        return super().plain(values, kinds)

    def seq(self, trees: list[Json], charged: int) -> Json:
        if len(trees) <= RUN_ITEMS and (
            charged * _CHARGE_RATIO <= INLINE_CHARS or len(dumps(trees)) <= INLINE_CHARS
        ):
            return trees
        leaves = [leaf(self, trees[i : i + RUN_ITEMS]) for i in range(0, len(trees), RUN_ITEMS)]
        return index(self, leaves)

    def text(self, value: str) -> Json:
        if len(value) <= INLINE_CHARS // 4:
            return value  # at most 4 bytes a character
        data = value.encode("utf-8")  # lone surrogates raise: tree() encodes again
        if len(data) <= INLINE_CHARS:
            return value
        return {"utf8": self.parts(b"", memoryview(data))}

    def binary(self, tag: str, head: bytes, body: memoryview) -> Json:
        if len(head) + len(body) <= INLINE_CHARS:
            return super().binary(tag, head, body)
        self.charge(len(head) + len(body) + len(tag) + 5)
        return {tag: self.parts(head, body)}

    # -- chunks ---------------------------------------------------------------------------

    def put(self, text: str) -> str:
        """Keep a text chunk; its name."""
        data = text.encode("utf-8")
        name = chunk_hash(data)
        return self.keep(name, data, len(data))

    def keep(self, name: str, data: bytes | None, size: int) -> str:
        """Record chunk ``name`` as reached, and built unless the caller holds it."""
        self.sizes[name] = size
        if self.log is not None:
            self.log.append(name)
        if data is not None and name not in self.built and not self.known(name):
            self.built[name] = data
        return name

    def parts(self, head: bytes, body: memoryview) -> Json:
        """The parts node of ``head + body`` (never concatenated: the body is only viewed)."""
        first = PART_BYTES - len(head)
        pieces: list[tuple[bytes, memoryview]] = [(head, body[:first])] if head else []
        start = first if head else 0
        pieces += [(b"", body[i : i + PART_BYTES]) for i in range(start, len(body), PART_BYTES)]
        names: list[str] = []
        for lead, piece in pieces:
            name = chunk_hash(BINARY, lead, piece)
            size = 1 + len(lead) + len(piece)
            held = name in self.built or self.known(name)
            names.append(self.keep(name, None if held else BINARY + lead + piece, size))
        level = 0
        while len(names) > FANOUT:
            names = [
                self.put(dumps({"parts": [level, names[i : i + FANOUT]]}))
                for i in range(0, len(names), FANOUT)
            ]
            level += 1
        return {"parts": [level, names]}


def _nothing(name: str) -> bool:
    return False


def leaf(enc: TreeEncoder, items: Sequence[Json], text: str | None = None) -> str:
    """The chunk of one run of item trees (split in halves while longer than ``LEAF_CHARS``);
    ``text``, when given, is ``dumps(items)`` already made."""
    if text is None:
        text = dumps(items if isinstance(items, list) else list(items))
    if len(text) > LEAF_CHARS and len(items) > 1:
        middle = len(items) // 2
        halves = [leaf(enc, items[:middle]), leaf(enc, items[middle:])]
        return enc.put(dumps({"runs": halves}))
    return enc.put(text)


def index(enc: TreeEncoder, names: list[str]) -> Json:
    """The runs node over leaf chunks ``names`` (grouped into interior chunks as needed)."""
    while len(names) > FANOUT:
        names = [_interior(enc, tuple(names[i : i + FANOUT])) for i in range(0, len(names), FANOUT)]
    return {"runs": names}


def _interior(enc: TreeEncoder, group: tuple[str, ...]) -> str:
    """The interior chunk over ``group``: the one ``enc.earlier`` names when the caller still
    holds it (its text is a function of the names alone), else built."""
    found = enc.earlier.get(group)
    if found is not None and enc.known(found[0]):
        name = enc.keep(found[0], None, found[1])
    else:
        name = enc.put(dumps({"runs": list(group)}))
    enc.interior[group] = (name, enc.sizes[name])
    return name


def encode_tree(
    value: object,
    *,
    source_of: SourceOf | None = None,
    max_bytes: int,
    max_depth: int,
    known: Known | None = None,
) -> Tree:
    """``value`` as a tree of chunks (see the module docstring).

    Raises:
        ValueTooLarge: The whole tree would exceed ``max_bytes``, or the nesting ``max_depth``.
        CodecError: As for ``cove.codec.encode``.
    """
    encoder = TreeEncoder(
        max_bytes=max_bytes, max_depth=max_depth, source_of=source_of, known=known
    )
    return encoder.tree(value)
