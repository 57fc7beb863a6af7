"""What a turn sees from outside its code: each block's random seed and clock, and where the
turn is stopped. Fresh for live turns (a live turn stops when someone cancels it); recorded for
replay (which stops a turn where its record was stopped: cancelled, or cut by a crash)."""

from __future__ import annotations

import secrets
import time
from collections.abc import Mapping
from typing import Protocol

SEED_RANGE = 2**31


class BlockInputs(Protocol):
    """Supplies each block's random seed and the wall-clock time it sees, and where a replayed
    turn stops."""

    def iteration_seed(self, turn: int, iteration: int) -> int:
        """The base seed of an iteration (recorded with it)."""
        ...

    def block_seed(self, turn: int, iteration: int, block: int, base: int) -> int:
        """The seed ``random`` gets for one block."""
        ...

    def block_clock(self, turn: int, iteration: int, block: int) -> float:
        """The time ``datetime.now()`` reports inside one block."""
        ...

    def stops(self, turn: int, iteration: int, block: int | None) -> bool:
        """Whether the turn is stopped here, as a cancel arriving now would stop it.

        ``block`` is the position of the block about to run (the number of blocks when they
        have all run), or None before the iteration's model call.
        """
        ...


class LiveInputs:
    """Fresh seeds and the real clock, for live turns."""

    def iteration_seed(self, turn: int, iteration: int) -> int:
        """A fresh random base seed."""
        return secrets.randbelow(SEED_RANGE)

    def block_seed(self, turn: int, iteration: int, block: int, base: int) -> int:
        """The base seed offset by the block position, so blocks differ but derive from one seed."""
        return (base + block) % SEED_RANGE

    def block_clock(self, turn: int, iteration: int, block: int) -> float:
        """The current time."""
        return time.time()

    def stops(self, turn: int, iteration: int, block: int | None) -> bool:
        """Never: a live turn stops when it is cancelled."""
        return False


class RecordedInputs:
    """Seeds and clocks read back from a recorded conversation, for replay."""

    def __init__(
        self,
        iteration_seeds: Mapping[tuple[int, int], int],
        blocks: Mapping[tuple[int, int, int], tuple[int | None, float | None]],
        stop: tuple[int, int, int | None] | None = None,
    ) -> None:
        """Args:
        iteration_seeds: (turn, iteration) -> base seed.
        blocks: (turn, iteration, block) -> (seed, clock).
        stop: (turn, iteration, block or None) where the recorded turn was stopped, if it was.
        """
        self._iteration_seeds = iteration_seeds
        self._blocks = blocks
        self._stop = stop

    def iteration_seed(self, turn: int, iteration: int) -> int:
        """The recorded base seed (0 when the record has none)."""
        return self._iteration_seeds.get((turn, iteration), 0)

    def block_seed(self, turn: int, iteration: int, block: int, base: int) -> int:
        """The recorded seed of the block, falling back to the live derivation."""
        seed, _ = self._blocks.get((turn, iteration, block), (None, None))
        return seed if seed is not None else (base + block) % SEED_RANGE

    def block_clock(self, turn: int, iteration: int, block: int) -> float:
        """The recorded clock of the block (the epoch when the record has none)."""
        _, clock = self._blocks.get((turn, iteration, block), (None, None))
        return clock if clock is not None else 0.0

    def stops(self, turn: int, iteration: int, block: int | None) -> bool:
        """True exactly where the recorded turn was stopped."""
        return self._stop == (turn, iteration, block)
