"""The chunks a sandbox client holds for its live snapshots (``cove.codec.chunks``).

The worker's tracker counts as held every chunk of the trees it reported; the client keeps the
same set, with the data, because a replacement worker is restored from it. So the two sides agree
on what a reply must carry: only the chunks neither holds. What a worker sends is hostile input:
each chunk must hash to its name, a reply may not carry more than ``REPORT_LIMIT_BYTES``, and a
root or chunk naming a chunk that is neither held nor received is a ``ProtocolError``.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any

from cove.codec.chunks import MAX_LEVELS, chunk_hash, refs, walk
from cove.environment.sandbox.frames import ProtocolError
from cove.errors import CodecError
from cove.results import VarVersion

REPORT_LIMIT_BYTES = 640 * 1024 * 1024
"""The most chunk data one block's reply may bring (the worker stops at 512 MiB)."""

_NAME = re.compile(r"[0-9a-f]{32}")
_MAX_HEIGHT = MAX_LEVELS + 2  # the most levels of chunks below a root, as the codec reads them


class ChunkBook:
    """The chunks reached by a client's live snapshots, counted by reference.

    A held chunk counts one reference per variable whose root names it and one per held chunk
    that names it; it is dropped when the count reaches zero, releasing its children in turn.
    Chunks are named by their hash, so the references form no cycle, and a new version costs
    what it changed: the chunks it shares with the version it replaces are counted, not walked.
    """

    def __init__(self) -> None:
        self._data: dict[str, bytes] = {}
        self._children: dict[str, tuple[str, ...]] = {}
        self._heights: dict[
            str, int
        ] = {}  # levels of the tree below each held chunk, itself included
        self._held: dict[str, int] = {}  # references to each held chunk
        self._roots: dict[str, tuple[str, ...]] = {}  # the chunks each variable's root names
        self._incoming: dict[str, bytes] = {}  # what the running block's reply brought
        self._incoming_kids: dict[str, tuple[str, ...]] = {}
        self._incoming_heights: dict[str, int] = {}
        self._incoming_bytes = 0
        self._pending: dict[str, tuple[str, ...]] = {}  # roots of the reply's changes

    def __len__(self) -> int:
        return len(self._data)

    def begin(self) -> None:
        """A block starts: forget what an earlier reply brought."""
        self._incoming = {}
        self._incoming_kids = {}
        self._incoming_heights = {}
        self._incoming_bytes = 0
        self._pending = {}

    def receive(self, pairs: Any) -> None:
        """Take ``[[name, base64], ...]`` from a reply, each checked against its name.

        Raises:
            ProtocolError: A malformed pair, data that does not hash to its name, or more than
                ``REPORT_LIMIT_BYTES`` in all.
        """
        if not isinstance(pairs, list):
            raise ProtocolError("malformed chunks")
        for pair in pairs:
            if not isinstance(pair, list) or len(pair) != 2:
                raise ProtocolError("malformed chunk")
            name, text = pair
            if type(name) is not str or not _NAME.fullmatch(name) or type(text) is not str:
                raise ProtocolError("malformed chunk")
            try:
                data = base64.b64decode(text, validate=True)
            except binascii.Error:
                raise ProtocolError("malformed chunk data") from None
            if chunk_hash(data) != name:
                raise ProtocolError("a chunk does not match its name")
            self._incoming_bytes += len(data)
            if self._incoming_bytes > REPORT_LIMIT_BYTES:
                raise ProtocolError("a reply brought too many chunks")
            self._incoming[name] = data

    def attach(self, changes: Sequence[VarVersion]) -> tuple[VarVersion, ...]:
        """The reply's changes, each with the received chunks its tree reaches (new to the
        client; those it holds are not repeated).

        Raises:
            ProtocolError: A tree names a chunk that is neither held nor received, or is nested
                more deeply than a value may be.
        """
        attached: list[VarVersion] = []
        for change in changes:
            if change.kind == "deleted" or change.encoded is None:
                attached.append(change)
                continue
            new = self._reach_new(change.encoded)
            self._pending[change.name] = tuple(dict.fromkeys(refs(change.encoded)))
            chunks = tuple((n, d) for n, d in self._incoming.items() if n in new)
            attached.append(replace(change, chunks=chunks))
        return tuple(attached)

    def apply(self, changes: Sequence[VarVersion]) -> None:
        """The changes were applied: hold their trees' chunks, release the trees they replace."""
        before = [self._roots.get(c.name, ()) for c in changes]
        for change in changes:
            top = self._pending.get(change.name, ())
            if change.kind == "deleted" or change.encoded is None:
                top = ()
            self._hold(top)
            self._roots[change.name] = top
        for top in before:
            self._release(top)
        self._pending = {}

    def reset(
        self, snapshots: Sequence[VarVersion], chunks: Mapping[str, bytes]
    ) -> list[VarVersion]:
        """Hold exactly what ``snapshots`` reach in ``chunks`` (a restore from the store).

        A snapshot whose tree misses a chunk holds nothing: the worker reports it lost.
        """
        for table in (self._data, self._children, self._heights, self._held, self._roots):
            table.clear()
        self.begin()
        self._incoming = dict(chunks)
        for snapshot in snapshots:
            top: tuple[str, ...] = ()
            if snapshot.encoded is not None:
                try:
                    self._reach_new(snapshot.encoded)
                    top = tuple(dict.fromkeys(refs(snapshot.encoded)))
                except ProtocolError:
                    pass
            self._hold(top)
            self._roots[snapshot.name] = top
        self.begin()
        return list(snapshots)

    def drop(self, name: str) -> None:
        """Variable ``name`` is gone: release its tree."""
        self._release(self._roots.pop(name, ()))

    def frames(self, limit: int) -> Iterator[list[list[str]]]:
        """Every held chunk as ``[name, base64]`` pairs, in batches of about ``limit`` bytes."""
        batch: list[list[str]] = []
        size = 0
        for name, data in self._data.items():
            if batch and size + len(data) > limit:
                yield batch
                batch, size = [], 0
            batch.append([name, base64.b64encode(data).decode("ascii")])
            size += len(data)
        if batch:
            yield batch

    def text_of(self, snapshot: VarVersion) -> str:
        """A snapshot's root and the text of every chunk it reaches (to look for definitions)."""
        pieces = [snapshot.encoded or ""]
        reached: set[str] = set()
        stack = list(self._roots.get(snapshot.name, ()))
        while stack:
            name = stack.pop()
            if name not in reached:
                reached.add(name)
                stack.extend(self._children.get(name, ()))
        for name in reached:
            data = self._data.get(name, b"")
            if data[:1] != b"\x00":
                pieces.append(data.decode("utf-8", "replace"))
        return "".join(pieces)

    # -- internals ------------------------------------------------------------------------

    def _reach_new(self, root: str) -> set[str]:
        """The chunks ``root`` reaches that are not held yet, each measured.

        Raises:
            ProtocolError: One is neither held nor received, or the tree is too deep.
        """
        try:
            reached = walk([root], lambda name: () if name in self._held else self._kids(name))
        except CodecError:
            raise ProtocolError("a value's tree is nested too deeply") from None
        new = {name for name in reached if name not in self._held}
        for name in new:
            self._measure(name)
        return new

    def _measure(self, name: str) -> None:
        """Record the height of the tree below ``name`` (after its children's)."""
        stack = [(name, 1)]
        while stack:
            current, depth = stack[-1]
            if current in self._heights or current in self._incoming_heights:
                stack.pop()
                continue
            kids = self._kids(current)
            todo = [k for k in kids if k not in self._heights and k not in self._incoming_heights]
            if todo:
                if depth >= _MAX_HEIGHT:
                    raise ProtocolError("a value's tree is nested too deeply")
                stack.extend((k, depth + 1) for k in todo)
                continue
            self._incoming_heights[current] = 1 + max(map(self._height, kids), default=0)
            if self._incoming_heights[current] > _MAX_HEIGHT:
                raise ProtocolError("a value's tree is nested too deeply")
            stack.pop()

    def _height(self, name: str) -> int:
        known = self._heights.get(name)
        return self._incoming_heights[name] if known is None else known

    def _kids(self, name: str) -> tuple[str, ...]:
        known = self._children.get(name)
        if known is None:
            known = self._incoming_kids.get(name)
        if known is not None:
            return known
        data = self._incoming.get(name)
        if data is None:
            raise ProtocolError("a value's tree names a chunk the worker never sent")
        kids = tuple(dict.fromkeys(refs(data)))
        self._incoming_kids[name] = kids
        return kids

    def _hold(self, top: tuple[str, ...]) -> None:
        stack = list(top)
        while stack:
            name = stack.pop()
            count = self._held.get(name, 0)
            self._held[name] = count + 1
            if count == 0:
                self._data[name] = self._incoming[name]
                self._children[name] = kids = self._kids(name)
                self._heights[name] = self._incoming_heights[name]
                stack.extend(kids)

    def _release(self, top: tuple[str, ...]) -> None:
        stack = list(top)
        while stack:
            name = stack.pop()
            left = self._held[name] - 1
            if left:
                self._held[name] = left
                continue
            del self._held[name]
            del self._data[name], self._heights[name]
            stack.extend(self._children.pop(name))
