"""What the chat view takes from a transcript's rebuilt timeline (``cove.conversation.timeline``).

The sandbox restarts a finished turn showed, placed where they happened, and the seq
the page's event stream resumes after, so that each event is shown exactly once.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from cove.conversation import Transcript, TurnRecord, timeline
from cove.events import (
    BlockFinished,
    Event,
    IterationStarted,
    SandboxRestarted,
    TurnStarted,
)


@dataclass(frozen=True)
class Note:
    """A sandbox restart as the timeline shows it."""

    block: int  # the 1-based block it came after; 0: before the iteration's blocks
    kind: str  # "restart" (its CSS class)
    text: str


def restart_text(reason: str, lost: tuple[str, ...]) -> str:
    """How a sandbox restart reads in the timeline."""
    return f"Sandbox restarted ({reason}); lost: {', '.join(lost) or 'nothing'}"


NotesByIteration = dict[tuple[int, int], list[Note]]


def page_timeline(transcript: Transcript) -> list[Event]:
    """The timeline the page needs: all of each turn with notes, the start and end of the rest.

    The page renders iterations from the records; rebuilding their events (parsing every reply)
    would be most of a long conversation's page time, for seqs that only turn ends need.
    """
    noted = {note.turn_position for note in transcript.notes}
    turns = tuple(
        turn if turn.position in noted else dataclasses.replace(turn, iterations=())
        for turn in transcript.turns
    )
    return timeline(dataclasses.replace(transcript, turns=turns))


def notes_by_iteration(events: list[Event]) -> NotesByIteration:
    """The notes of each iteration, keyed by (turn position, 1-based iteration).

    A restart follows the block that was running; nudges are for the model alone (the
    inspector shows the context messages that carried them).
    """
    notes: NotesByIteration = {}
    position = iteration = block = 0
    for event in events:
        if isinstance(event, TurnStarted):
            position, iteration, block = event.position, 0, 0
        elif isinstance(event, IterationStarted):
            iteration, block = event.iteration, 0
        elif isinstance(event, BlockFinished):
            block = event.index
        elif isinstance(event, SandboxRestarted):
            text = restart_text(event.reason, event.lost)
            notes.setdefault((position, iteration), []).append(Note(block, "restart", text))
    return notes


def resume_after(transcript: Transcript, events: list[Event]) -> tuple[list[TurnRecord], int]:
    """The turns the page renders, and the seq its event stream resumes after.

    A running turn is not rendered: the stream replays it from its start, so the page shows
    every event of it exactly once. Otherwise the stream starts after the last stored event.
    """
    shown: list[TurnRecord] = []
    for turn in transcript.turns:
        if turn.status == "running":
            start = next(
                e for e in events if isinstance(e, TurnStarted) and e.position == turn.position
            )
            return shown, start.seq - 1
        shown.append(turn)
    return shown, events[-1].seq if events else 0
