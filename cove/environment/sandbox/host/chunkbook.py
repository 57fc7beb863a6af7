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

from cove.codec.chunks import chunk_hash, refs, walk
from cove.environment.sandbox.frames import ProtocolError
from cove.errors import CodecError
from cove.results import VarVersion

REPORT_LIMIT_BYTES = 640 * 1024 * 1024
"""The most chunk data one block's reply may bring (the worker stops at 512 MiB)."""

_NAME = re.compile(r"[0-9a-f]{32}")


class ChunkBook:
    """The chunks reached by a client's live snapshots, counted per variable."""

    def __init__(self) -> None:
        self._data: dict[str, bytes] = {}
        self._children: dict[str, tuple[str, ...]] = {}
        self._held: dict[str, int] = {}  # how many variables' trees reach each chunk
        self._closures: dict[str, frozenset[str]] = {}  # each variable's tree, as chunk names
        self._incoming: dict[str, bytes] = {}  # what the running block's reply brought
        self._incoming_kids: dict[str, tuple[str, ...]] = {}
        self._incoming_bytes = 0
        self._pending: dict[str, frozenset[str]] = {}  # closures of the reply's changes

    def __len__(self) -> int:
        return len(self._data)

    def begin(self) -> None:
        """A block starts: forget what an earlier reply brought."""
        self._incoming = {}
        self._incoming_kids = {}
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
            ProtocolError: A tree names a chunk that is neither held nor received.
        """
        attached: list[VarVersion] = []
        for change in changes:
            if change.kind == "deleted" or change.encoded is None:
                attached.append(change)
                continue
            reached = self._closure(change.encoded)
            self._pending[change.name] = reached
            new = tuple((n, d) for n, d in self._incoming.items() if n in reached)
            attached.append(replace(change, chunks=new))
        return tuple(attached)

    def apply(self, changes: Sequence[VarVersion]) -> None:
        """The changes were applied: hold their trees' chunks, release the trees they replace."""
        before = {c.name: self._closures.get(c.name, frozenset()) for c in changes}
        for change in changes:
            reached = self._pending.get(change.name, frozenset())
            if change.kind == "deleted" or change.encoded is None:
                reached = frozenset()
            self._hold(reached)
            self._closures[change.name] = reached
        for closure in before.values():
            self._release(closure)
        self._pending = {}

    def reset(
        self, snapshots: Sequence[VarVersion], chunks: Mapping[str, bytes]
    ) -> list[VarVersion]:
        """Hold exactly what ``snapshots`` reach in ``chunks`` (a restore from the store)."""
        self._data.clear()
        self._children.clear()
        self._held.clear()
        self._closures.clear()
        self.begin()
        self._incoming = dict(chunks)
        for snapshot in snapshots:
            reached: frozenset[str] = frozenset()
            if snapshot.encoded is not None:
                try:
                    reached = self._closure(snapshot.encoded)
                except ProtocolError:  # a chunk is missing: the worker reports it lost
                    reached = frozenset(n for n in refs(snapshot.encoded) if n in chunks)
            self._hold(reached)
            self._closures[snapshot.name] = reached
        self.begin()
        return list(snapshots)

    def drop(self, name: str) -> None:
        """Variable ``name`` is gone: release its tree."""
        self._release(self._closures.pop(name, frozenset()))

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
        for name in self._closures.get(snapshot.name, frozenset()):
            data = self._data.get(name, b"")
            if data[:1] != b"\x00":
                pieces.append(data.decode("utf-8", "replace"))
        return "".join(pieces)

    # -- internals ------------------------------------------------------------------------

    def _closure(self, root: str) -> frozenset[str]:
        try:
            return frozenset(walk([root], self._kids))
        except CodecError:
            raise ProtocolError("a value's tree is nested too deeply") from None

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

    def _hold(self, reached: frozenset[str]) -> None:
        for name in reached:
            count = self._held.get(name, 0)
            if count == 0 and name not in self._data:
                self._data[name] = self._incoming[name]
                self._children[name] = self._kids(name)
            self._held[name] = count + 1

    def _release(self, reached: frozenset[str]) -> None:
        for name in reached:
            left = self._held[name] - 1
            if left:
                self._held[name] = left
            else:
                del self._held[name]
                self._data.pop(name, None)
                self._children.pop(name, None)
