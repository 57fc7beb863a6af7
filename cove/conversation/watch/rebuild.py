"""Events rebuilt from committed rows, numbered exactly as the live ones were.

Used for watchers that resume past the ring buffer and for following a turn that another
process runs. Only what the store keeps can come back: turn started and finished, iteration
started, the model's reply, each finished block, the block running now (its code is among the
reply's planned blocks), the variables an iteration changed, a refused answer, and the nudges,
sandbox restarts and endpoint retries kept as turn notes under the seq they were published
with. Model deltas are never stored and are not rebuilt.
"""

from __future__ import annotations

import dataclasses
import re
from collections import defaultdict

from cove.conversation.watch.sequence import durable_seq, slot_of, steer_seq
from cove.engine.protocol import ReplyParseError, parse_reply
from cove.events import (
    FINAL_STATUSES,
    AnswerRefused,
    BlockFinished,
    BlockStarted,
    Event,
    IterationStarted,
    ModelReply,
    ModelRetry,
    Nudge,
    SandboxRestarted,
    SteerReceived,
    TurnFinished,
    TurnStarted,
    VarsChanged,
)
from cove.persistence.records import (
    IterationRecord,
    Transcript,
    TurnNote,
    TurnRecord,
    VarVersionRecord,
)
from cove.persistence.store import Store

#: The context message starts with ``[iteration i/budget]``: the budget the iteration saw.
_HEADER = re.compile(r"\[iteration \d+/(\d+)\]")
#: Blocks the engine records but never ran (after a failed block or a cancellation).
NOT_RUN_PREFIX = "not run:"


def rebuild(transcript: Transcript, after: int) -> list[Event]:
    """The durable events of ``transcript``'s turns with a seq above ``after``, in order."""
    cid = transcript.conversation.id
    versions: defaultdict[tuple[int, int], list[VarVersionRecord]] = defaultdict(list)
    for version in transcript.var_versions:
        versions[(version.turn_position, version.iteration_position)].append(version)
    events: list[Event] = []
    for turn in transcript.turns:
        steered = 0  # notes so far in the current iteration
        for event in _turn_events(turn, versions):
            if isinstance(event, IterationStarted):
                steered = 0
            if isinstance(event, SteerReceived):
                seq: int | None = steer_seq(turn.position, event.iteration, steered)
                steered += 1
            else:
                seq = durable_seq(event, turn.position)
            assert seq is not None
            if seq > after:
                events.append(_stamp(event, cid, seq))
    notes = [_stamp(_note_event(n), cid, n.seq) for n in transcript.notes if n.seq > after]
    if notes:
        events = sorted([*events, *notes], key=lambda event: event.seq)
    return events


def timeline(transcript: Transcript) -> list[Event]:
    """Every event of ``transcript``'s turns the store can rebuild, numbered as they ran.

    What a channel renders a finished turn from: its iterations, blocks, variable changes,
    nudges and sandbox restarts in the order they happened (only model deltas are missing).
    """
    return rebuild(transcript, -1)


def _note_event(note: TurnNote) -> Event:
    if note.kind == "nudge":
        return Nudge(turn_id=note.turn_id, text=note.text, kind=note.nudge_kind or "extension")
    if note.kind == "model_retry":
        attempt, budget = note.retry or (0, 0)
        return ModelRetry(
            turn_id=note.turn_id,
            iteration=slot_of(note.seq),  # a retry is numbered inside its iteration's slot
            attempt=attempt,
            of=budget,
            reason=note.text,
        )
    return SandboxRestarted(
        turn_id=note.turn_id, reason=note.text, restored=note.restored, lost=note.lost
    )


async def keep_note(store: Store, event: Event) -> None:
    """Store a published nudge, sandbox restart or endpoint retry, so a rebuilt timeline (and
    a process following the turn) shows it too."""
    if isinstance(event, Nudge):
        await store.add_note(event.turn_id, event.seq, "nudge", event.text, nudge_kind=event.kind)
    elif isinstance(event, SandboxRestarted):
        await store.add_note(
            event.turn_id, event.seq, "sandbox_restarted", event.reason, event.restored, event.lost
        )
    elif isinstance(event, ModelRetry):
        retry = (event.attempt, event.of)
        await store.add_note(event.turn_id, event.seq, "model_retry", event.reason, retry=retry)


def _stamp(event: Event, conversation_id: str, seq: int) -> Event:
    return dataclasses.replace(event, conversation_id=conversation_id, seq=seq)


def _turn_events(
    turn: TurnRecord,
    versions: defaultdict[tuple[int, int], list[VarVersionRecord]],
) -> list[Event]:
    events: list[Event] = [
        TurnStarted(turn_id=turn.id, position=turn.position, request=turn.request)
    ]
    for iteration in turn.iterations:
        events.extend(
            _iteration_events(turn, iteration, versions[(turn.position, iteration.position)])
        )
    if turn.status in FINAL_STATUSES:
        finished = turn.finished_at if turn.finished_at is not None else turn.started_at
        events.append(
            TurnFinished(
                turn_id=turn.id,
                outcome=turn.outcome,
                iterations=len(turn.iterations),
                duration_ms=max(0.0, (finished - turn.started_at) * 1000),
                cost_known=turn.cost_known,
            )
        )
    return events


def _iteration_events(
    turn: TurnRecord, iteration: IterationRecord, versions: list[VarVersionRecord]
) -> list[Event]:
    number = iteration.position + 1
    budget = iteration_budget(iteration) or 0
    events: list[Event] = [IterationStarted(turn_id=turn.id, iteration=number, budget=budget)]
    events += [SteerReceived(turn_id=turn.id, iteration=number, text=t) for t in iteration.steering]
    reply = _reply(turn, iteration)
    if reply is not None:
        events.append(reply)
    for block in iteration.blocks:
        if not block.ok and (block.error or "").startswith(NOT_RUN_PREFIX):
            continue
        index = block.position + 1
        events.append(BlockStarted(turn_id=turn.id, iteration=number, index=index, code=block.code))
        events.append(
            BlockFinished(turn_id=turn.id, iteration=number, index=index, block=block.result())
        )
    running = _running_block(iteration)
    if running is not None:
        events.append(
            BlockStarted(
                turn_id=turn.id,
                iteration=number,
                index=running + 1,
                code=iteration.planned_blocks[running],
            )
        )
    if versions and iteration.status != "running":
        changes = tuple(v.var_version() for v in versions)
        events.append(VarsChanged(turn_id=turn.id, iteration=number, changes=changes))
    if iteration.refusal:
        events.append(AnswerRefused(turn_id=turn.id, iteration=number, reason=iteration.refusal))
    return events


def iteration_budget(iteration: IterationRecord) -> int | None:
    """The turn's iteration budget as the iteration saw it (its ``IterationStarted.budget``),
    read from the header of its context message (a turn with no model sent none: its one
    iteration had a budget of 1); None when the header is missing."""
    if not iteration.context_message and not iteration.request_message:
        return 1
    header = _HEADER.match(iteration.context_message)
    return int(header[1]) if header else None


def _running_block(iteration: IterationRecord) -> int | None:
    """The planned block running now (or when the process stopped), if it has started: the
    blocks before it all succeeded, so nothing stopped the iteration short of it."""
    running = iteration.running_block
    if running is None or not all(block.ok for block in iteration.blocks):
        return None
    return running


def _reply(turn: TurnRecord, iteration: IterationRecord) -> ModelReply | None:
    number = iteration.position + 1
    if iteration.status == "parse_error" or (iteration.parse_error and iteration.raw_reply):
        return ModelReply(
            turn_id=turn.id,
            iteration=number,
            thinking="",
            code=(),
            parse_error=iteration.parse_error,
            model=iteration.model,
        )
    if iteration.raw_reply is None:
        return None
    try:
        parsed = parse_reply(iteration.raw_reply)
    except ReplyParseError as exc:
        return ModelReply(
            turn_id=turn.id,
            iteration=number,
            thinking="",
            code=(),
            parse_error=str(exc),
            model=iteration.model,
        )
    return ModelReply(
        turn_id=turn.id,
        iteration=number,
        thinking=parsed.thinking,
        code=tuple(block.code for block in parsed.blocks),
        answer=parsed.answer,
        model=iteration.model,
    )


def latest_seq(transcript: Transcript) -> int:
    """The seq of the newest durable event of ``transcript`` (0 when it has no turns)."""
    events = rebuild(transcript, -1)
    return events[-1].seq if events else 0
