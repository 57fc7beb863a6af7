"""Nudges and sandbox restarts are kept, so a turn's rebuilt timeline shows them again."""

from __future__ import annotations

import json
from pathlib import Path

from cove.conversation import Conversations, scripted_factory, timeline
from cove.events import Event, Nudge, SandboxRestarted
from tests.conversation.watch.watch_helpers import durable
from tests.scripted import reply, settings_for

SPIN = json.dumps({"thinking": "t", "code": [{"code": "while True:\n    pass", "timeout_s": 1}]})


def shown(events: list[Event]) -> list[tuple[str, int]]:
    return sorted(((e.type, e.seq) for e in durable(events)), key=lambda pair: pair[1])


async def test_nudges_and_restarts_come_back_in_place_with_their_numbers(tmp_path: Path) -> None:
    settings = settings_for(tmp_path)
    replies = [reply(["keep = [1, 2, 3]"]), SPIN, reply(["len(keep)"], "{{keep}}")]
    async with Conversations.open(settings, llm_factory=scripted_factory(replies)) as convs:
        conv = await convs.create()  # no title: iterations after the first are nudged for one
        events = [e async for e in convs.send(conv.id, "spin")]
        transcript = await convs.inspect(conv.id)
    nudges = [e for e in events if isinstance(e, Nudge)]
    restarts = [e for e in events if isinstance(e, SandboxRestarted)]
    assert len(restarts) == 1 and len(nudges) >= 2
    assert [(n.kind, n.seq, n.text) for n in transcript.notes] == sorted(
        [("nudge", e.seq, e.text) for e in nudges]
        + [("sandbox_restarted", e.seq, e.reason) for e in restarts],
        key=lambda note: note[1],
    )

    rebuilt = timeline(transcript)
    assert [(e.type, e.seq) for e in rebuilt] == shown(events)
    again = next(e for e in rebuilt if isinstance(e, SandboxRestarted))
    assert (again.reason, again.restored, again.lost) == (
        restarts[0].reason,
        restarts[0].restored,
        restarts[0].lost,
    )
    assert [e.text for e in rebuilt if isinstance(e, Nudge)] == [e.text for e in nudges]

    # Another process watching from the start gets them too, numbered the same.
    async with Conversations.open(settings, llm_factory=scripted_factory([])) as convs:
        stream = await convs.watch(conv.id, after=0).start()
        watched: list[Event] = []
        async for event in stream:
            watched.append(event)
            if event.type == "turn_finished":
                break
        await stream.aclose()
        fork = await convs.fork(conv.id, 1)
        forked = await convs.inspect(fork.id)
    assert [(e.type, e.seq) for e in watched] == shown(events)
    assert forked.notes == transcript.notes  # a branch shows its parent's turn as it was
