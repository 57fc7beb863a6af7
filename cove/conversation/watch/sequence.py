"""Per-conversation event sequence numbers, derived from where an event sits in the history.

A ``seq`` is a position, not a counter: ``turn position · slot · step`` packed into one integer
(below 2**53, so JavaScript reads it exactly). The slot is 0 for the turn's start, ``i`` for
iteration ``i`` and ``LAST_SLOT`` for its end; the step orders the events inside a slot. Because
the durable events (turn started, iteration started, model reply, blocks, variable changes, a
refused answer, turn finished) get their seq from stored positions, a process that rebuilds
them from committed rows numbers them exactly as the process that ran the turn did, across
restarts: "everything after N" means the same thing everywhere. Transient events (model deltas,
nudges, steering, titles) take the next free step after the event before them.
"""

from __future__ import annotations

from cove.events import (
    AnswerRefused,
    BlockFinished,
    BlockStarted,
    Event,
    IterationStarted,
    ModelDelta,
    ModelReply,
    Nudge,
    SandboxRestarted,
    SteerReceived,
    TurnFinished,
    TurnStarted,
    VarsChanged,
)

TURN_SHIFT = 32
SLOT_SHIFT = 22
STEP_LIMIT = 1 << SLOT_SHIFT
LAST_SLOT = (1 << (TURN_SHIFT - SLOT_SHIFT)) - 1
MAX_TURN_POSITION = (1 << 21) - 1  # keeps every seq below 2**53

#: Steps inside an iteration's slot.
NUDGE = 1
ITERATION_STARTED = 64
STEER = 65  # the person's notes the iteration shows (up to 64)
DELTA = 129
DELTA_LIMIT = 1 << 20  # deltas past this many in one iteration are not streamed
REPLY = DELTA + DELTA_LIMIT
BLOCKS = 1 << 21
BLOCK_SPAN = 1024
BLOCK_FINISHED = 1000
SANDBOX_RESTARTED = 1001
VARS_CHANGED = STEP_LIMIT - 256
ANSWER_REFUSED = VARS_CHANGED + 1
TURN_FINISHED = STEP_LIMIT - 1


def make_seq(turn_position: int, slot: int, step: int) -> int:
    """Pack a position into a seq (slot and step are clamped into their ranges)."""
    slot = min(max(slot, 0), LAST_SLOT)
    step = min(max(step, 0), STEP_LIMIT - 1)
    return (turn_position << TURN_SHIFT) | (slot << SLOT_SHIFT) | step


def turn_of(seq: int) -> int:
    """The turn position a seq belongs to."""
    return seq >> TURN_SHIFT


def slot_of(seq: int) -> int:
    """The slot of a seq: 0 for the turn's start, ``i`` for iteration ``i``."""
    return (seq >> SLOT_SHIFT) & LAST_SLOT


def iteration_slot(iteration: int) -> int:
    """The slot of 1-based iteration ``iteration`` (the last slot is reserved for the end)."""
    return min(iteration, LAST_SLOT - 1)


def block_step(index: int, offset: int = 0) -> int:
    """The step of 1-based block ``index`` (``offset`` 0 starts it, ``BLOCK_FINISHED`` ends it)."""
    return BLOCKS + index * BLOCK_SPAN + offset


def steer_seq(turn_position: int, iteration: int, index: int) -> int:
    """The seq of the ``index``-th (0-based) note shown by 1-based ``iteration``."""
    return make_seq(turn_position, iteration_slot(iteration), STEER + min(index, DELTA - STEER - 1))


def durable_seq(event: Event, turn_position: int) -> int | None:
    """The seq an event of turn ``turn_position`` has by its position, or None if it has none."""
    if isinstance(event, TurnStarted):
        return make_seq(turn_position, 0, 0)
    if isinstance(event, TurnFinished):
        return make_seq(turn_position, LAST_SLOT, TURN_FINISHED)
    if isinstance(event, IterationStarted):
        return make_seq(turn_position, iteration_slot(event.iteration), ITERATION_STARTED)
    if isinstance(event, ModelReply):
        return make_seq(turn_position, iteration_slot(event.iteration), REPLY)
    if isinstance(event, BlockStarted):
        return make_seq(turn_position, iteration_slot(event.iteration), block_step(event.index))
    if isinstance(event, BlockFinished):
        step = block_step(event.index, BLOCK_FINISHED)
        return make_seq(turn_position, iteration_slot(event.iteration), step)
    if isinstance(event, VarsChanged):
        return make_seq(turn_position, iteration_slot(event.iteration), VARS_CHANGED)
    if isinstance(event, AnswerRefused):
        return make_seq(turn_position, iteration_slot(event.iteration), ANSWER_REFUSED)
    return None


class Sequencer:
    """Numbers the live events of one conversation as they are published, in order.

    ``last`` is shared with whoever else publishes into the same stream (the database follower),
    so numbers only grow. A live event gets its positional seq, or the next free one when an
    event published before it already took that number.
    """

    def __init__(self) -> None:
        self.last = 0
        self._turn = 0
        self._iteration = 0
        self._block = 0
        self._deltas = 0
        self._steers = 0

    def stamp(self, event: Event) -> int | None:
        """The seq of ``event``; None when it is not streamed (a delta past the limit)."""
        if isinstance(event, TurnStarted):
            self._turn, self._iteration, self._block = event.position, 0, 0
        elif isinstance(event, IterationStarted):
            self._iteration, self._block, self._deltas, self._steers = event.iteration, 0, 0, 0
        elif isinstance(event, BlockStarted):
            self._block = event.index
        seq = durable_seq(event, self._turn)
        if seq is None:
            seq = self._transient(event)
            if seq is None:
                return None
        seq = max(seq, self.last + 1)
        self.last = seq
        return seq

    def _transient(self, event: Event) -> int | None:
        slot = iteration_slot(self._iteration)
        if isinstance(event, ModelDelta):
            if self._deltas >= DELTA_LIMIT:
                return None
            self._deltas += 1
            return make_seq(self._turn, slot, DELTA + self._deltas - 1)
        if isinstance(event, SteerReceived):
            self._steers += 1
            return steer_seq(self._turn, event.iteration, self._steers - 1)
        if isinstance(event, Nudge):  # shown with the next iteration's context message
            return make_seq(self._turn, iteration_slot(self._iteration + 1), NUDGE)
        if isinstance(event, SandboxRestarted):
            return make_seq(self._turn, slot, block_step(self._block, SANDBOX_RESTARTED))
        return self.last + 1
