"""Captured ``print`` output, bounded while it is produced.

RestrictedPython compiles ``print(...)`` into ``_print._call_print(...)`` where ``_print`` is
made by ``_print_`` once per function scope; every scope of a block writes into the block's one
``BlockOutput``, which stops storing at its limit and appends a visible marker, so a flood of
output costs time (bounded by the block timeout) but never memory.
"""

from __future__ import annotations

import builtins
from typing import Any


class BlockOutput:
    """The text printed by one block, cut at ``limit`` characters."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._parts: list[str] = []
        self._size = 0
        self.cut = False

    def write(self, text: str) -> int:
        """Store ``text`` while under the limit; past it, store the marker once, drop the rest."""
        if self.cut:
            return 0
        text = str(text)
        room = self.limit - self._size
        if len(text) <= room:
            self._parts.append(text)
            self._size += len(text)
        else:
            self._parts.append(text[:room])
            self._parts.append(f"\n[… output cut at {self.limit:,} chars]\n")
            self._size = self.limit
            self.cut = True
        return len(text)

    def text(self) -> str:
        """Everything stored so far."""
        return "".join(self._parts)


class PrintScope:
    """What ``_print_`` returns: a file-like object writing into the block's output."""

    def __init__(self, output: BlockOutput) -> None:
        self._output = output

    def write(self, text: str) -> int:
        """File protocol for the built-in ``print``."""
        return self._output.write(text)

    def flush(self) -> None:
        """File protocol; nothing is buffered."""

    def __call__(self) -> str:
        """The ``printed`` name of RestrictedPython: the text printed so far."""
        return self._output.text()

    def _call_print(
        self, *objects: Any, sep: str | None = " ", end: str | None = "\n", **_: Any
    ) -> None:
        # ``file=`` and ``flush=`` are ignored: sandbox output always goes to the block's capture.
        builtins.print(*objects, sep=sep, end=end, file=self)
