"""The rolling journal: the blocks of the last K iterations, across turns."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Sequence

from cove.engine.context import JournalEntry
from cove.persistence.records import BlockRecord

IterationKey = tuple[int, int]  # (turn position, iteration position)


def block_ref(turn: int, iteration: int, block: int) -> str:
    """The journal reference of a block: ``t2.i3.1`` (all 1-based as the model sees them)."""
    return f"t{turn}.i{iteration + 1}.{block + 1}"


def entry_from_record(turn: int, iteration: int, block: BlockRecord) -> JournalEntry:
    """A journal entry for a stored block."""
    return JournalEntry(block_ref(turn, iteration, block.position), block)


class Journal:
    """The journal entries of the most recent ``keep`` iterations, oldest first."""

    def __init__(self, keep: int) -> None:
        self._keep = keep
        self._iterations: OrderedDict[IterationKey, list[JournalEntry]] = OrderedDict()

    @classmethod
    def from_records(cls, keep: int, rows: Iterable[tuple[int, int, BlockRecord]]) -> Journal:
        """Seed a journal from ``Store.recent_blocks`` rows (oldest first)."""
        journal = cls(keep)
        for turn, iteration, block in rows:
            journal.add((turn, iteration), [entry_from_record(turn, iteration, block)])
        return journal

    def add(self, key: IterationKey, entries: Sequence[JournalEntry]) -> None:
        """Append an iteration's entries (extending the iteration if it is already present)."""
        self._iterations.setdefault(key, []).extend(entries)
        self._iterations.move_to_end(key)
        while len(self._iterations) > self._keep:
            self._iterations.popitem(last=False)

    def entries(self) -> list[JournalEntry]:
        """All kept entries, oldest first."""
        return [entry for entries in self._iterations.values() for entry in entries]
