"""Chunked values: a large value as a tree of content-addressed chunks (see ``tree.py``).

A value's *root* is codec text like any other, except that where a long list of items, a long
string or a long binary payload would stand, it holds a node naming chunks by their hash:

=================================  ===========================================================
Node                               Stands for
=================================  ===========================================================
``{"runs": [h, ...]}``             a list of item trees: the concatenation of what each chunk
                                   holds, in order. A chunk is either a *leaf*, the JSON array
                                   of up to ``RUN_ITEMS`` item trees (``[1,2,3]``), or an
                                   *interior* chunk, itself a ``{"runs": [...]}`` node.
``{"parts": [level, [h, ...]]}``   bytes: the concatenation of the chunks. At level 0 each
                                   chunk is a binary part (``BINARY`` then up to
                                   ``PART_BYTES`` bytes); at level n each chunk is a
                                   ``{"parts": [n - 1, [...]]}`` node.
=================================  ===========================================================

A runs node replaces an items array anywhere one stands (a list value itself, a tuple's, set's
or dict's payload, an array of objects...); a parts node replaces the base64 text of ``bytes``
and ``ndarray`` values, and long strings become ``{"utf8": parts}``. Chunks are named by
``chunk_hash`` (the first 128 bits of SHA-256, hex), so equal pieces are stored once, wherever
they come from.

Such a node can only be made by the encoder: inside JSON strings quotes are escaped, so
``{"runs":[`` never occurs in a string, and ``refs`` finds a chunk's (or a root's) children
with a regular expression, without parsing it. A binary part starts with a NUL byte, which JSON
text never does, so a chunk's kind never depends on who refers to it.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from cove.errors import CodecError

HASH_CHARS = 32
"""Hex digits of a chunk's name (128 bits)."""

RUN_ITEMS = 256
"""Items per leaf run: a list of more items is stored as runs of this many, by position."""

FANOUT = 64
"""Chunk names per interior node (and at most in a root node)."""

INLINE_CHARS = 16 * 1024
"""A list of items, a string or a binary payload longer than this is stored in chunks."""

LEAF_CHARS = 64 * 1024
"""A leaf run longer than this (of more than one item) is split in halves."""

PART_BYTES = 64 * 1024
"""Bytes of a binary part."""

MAX_LEVELS = 16
"""The deepest nesting of interior chunks a reader follows."""

BINARY = b"\x00"
"""The first byte of a binary part (JSON text never starts with it)."""

ChunkSource = Callable[[str], bytes]
"""Returns a chunk's data by its name; raises ``KeyError`` when it has no such chunk."""

_NAME = re.compile(rb"[0-9a-f]{32}")
_NODE = re.compile(
    rb'\{"runs":\[((?:"[0-9a-f]{32}",?)*)\]\}|\{"parts":\[\d+,\[((?:"[0-9a-f]{32}",?)*)\]\]\}'
)


def chunk_hash(*pieces: bytes | memoryview) -> str:
    """The name of the chunk made of ``pieces`` (concatenated; never copied)."""
    digest = hashlib.sha256()
    for piece in pieces:
        digest.update(piece)
    return digest.hexdigest()[:HASH_CHARS]


def text_hash(text: str) -> str:
    """The name of a text chunk (and the digest of a root): its UTF-8 bytes hashed."""
    return chunk_hash(text.encode("utf-8", "surrogatepass"))


def refs(data: bytes | str) -> list[str]:
    """The chunks a chunk or a root refers to, in order (repeats kept); none for a binary part.

    Reads the text for the nodes only the encoder makes (see the module docstring): it never
    parses it, so it neither validates it nor fails on it.
    """
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    if raw[:1] == BINARY or b'":[' not in raw:
        return []
    found: list[str] = []
    for match in _NODE.finditer(raw):
        names = match.group(1) if match.group(1) is not None else match.group(2)
        found.extend(name.decode("ascii") for name in _NAME.findall(names))
    return found


def has_refs(text: str) -> bool:
    """Whether a root (or chunk text) refers to chunks."""
    return bool(refs(text))


def walk(roots: Iterable[str], kids: Callable[[str], Iterable[str]]) -> set[str]:
    """The names of every chunk the given roots reach; ``kids`` is called once for each, level
    by level.

    ``kids(name)`` names a chunk's children (it raises what a missing chunk means to its caller).

    Raises:
        CodecError: The tree is nested deeper than ``MAX_LEVELS``.
    """
    seen: set[str] = set()
    level = [name for root in roots for name in refs(root)]
    depth = 0
    while level:
        depth += 1
        if depth > MAX_LEVELS + 2:
            raise CodecError("a chunked value is nested too deeply")
        following: list[str] = []
        for name in level:
            if name in seen:
                continue
            seen.add(name)
            following.extend(kids(name))
        level = following
    return seen


def closure(roots: Iterable[str], get: ChunkSource) -> dict[str, bytes]:
    """Every chunk the given roots reach, children after parents, each once.

    Raises:
        CodecError: A chunk is missing, or the tree is nested deeper than ``MAX_LEVELS``.
    """
    found: dict[str, bytes] = {}

    def kids(name: str) -> list[str]:
        try:
            found[name] = get(name)
        except KeyError:
            raise CodecError(f"a chunk of this value is missing: {name}") from None
        return refs(found[name])

    walk(roots, kids)
    return found


@dataclass(frozen=True)
class Tree:
    """A value encoded as a tree of chunks.

    Attributes:
        root: The value's top node as codec text (its chunks named by hash).
        digest: The root's hash: equal values have equal digests.
        chunks: The chunks built by this encoding, children before parents. Chunks the caller
            said it already holds (``known``) are named in ``closure`` but not built.
        closure: Every chunk the root reaches.
        size: The encoded size in bytes (the root and every chunk it reaches).
    """

    root: str
    digest: str
    chunks: Mapping[str, bytes] = field(repr=False)
    closure: frozenset[str]
    size: int
