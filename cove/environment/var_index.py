"""The variable index: a cached list of a conversation's current variables.

It also keeps the numbering: the latest version number of every name ever written (deleted ones
included), so a new version continues where the store's numbering left off.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from itertools import islice

from cove.results import VarVersion


@dataclass(frozen=True)
class VarEntry:
    """One current variable as the model sees it in ``<var_index>``.

    Attributes:
        var: Its latest version, as the environment numbered it, without its value (the index
            shows name, version, kind, type, size, preview and signature; the value lives in
            the sandbox and the store).
        updated_seq: Orders entries: larger means written more recently.
    """

    var: VarVersion
    updated_seq: int = 0


class VarIndex:
    """The current variables of one environment, most recently written first."""

    def __init__(self) -> None:
        # Kept in write order (a rewritten name moves to the end), so the most recent few are
        # read from the end without sorting every variable.
        self._entries: dict[str, VarEntry] = {}
        self._latest: dict[str, int] = {}
        self._seq = 0

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def entries(self) -> list[VarEntry]:
        """The current variables, most recently written first."""
        return list(reversed(self._entries.values()))

    def recent(self, limit: int) -> list[VarEntry]:
        """The ``limit`` most recently written variables, most recent first (costs ``limit``)."""
        return list(islice(reversed(self._entries.values()), max(0, limit)))

    def get(self, name: str) -> VarEntry | None:
        """The current entry of ``name``, or None when it does not exist (or was deleted)."""
        return self._entries.get(name)

    def latest_version(self, name: str) -> int:
        """The highest version number ever given to ``name`` (0 when never written)."""
        return self._latest.get(name, 0)

    def next_version(self, name: str) -> int:
        """The version number the next write of ``name`` gets."""
        return self.latest_version(name) + 1

    def add(self, version: VarVersion) -> None:
        """Take note of a written version; a ``deleted`` one removes the entry.

        Versions older than the latest known one only advance the numbering, never the entry.
        """
        name = version.name
        if version.version < self._latest.get(name, 0):
            return
        self._latest[name] = version.version
        self._entries.pop(name, None)
        if version.kind == "deleted":
            return
        self._seq += 1
        self._entries[name] = VarEntry(replace(version, encoded=None, chunks=()), self._seq)

    def reserve(self, name: str, version: int) -> None:
        """Advance the numbering of ``name`` to at least ``version`` without touching entries."""
        if version > self._latest.get(name, 0):
            self._latest[name] = version
