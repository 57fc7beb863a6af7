"""Pacing model deltas in the hub: fewer events, the same text, the same order."""

from __future__ import annotations

import asyncio
from pathlib import Path

from cove.conversation import Conversations, scripted_factory
from cove.conversation.watch.hub import ConversationHub, Watcher
from cove.events import (
    Event,
    IterationStarted,
    ModelDelta,
    ModelReply,
    TurnFinished,
    TurnStarted,
)
from cove.results import TurnOutcome
from tests.scripted import reply, settings_for


def delta(text: str, iteration: int = 1) -> ModelDelta:
    return ModelDelta(turn_id=1, iteration=iteration, text=text)


def model_reply(iteration: int = 1) -> ModelReply:
    return ModelReply(turn_id=1, iteration=iteration, thinking="", code=())


async def drain(watcher: Watcher) -> list[Event]:
    watcher.close()
    return [event async for event in watcher]


def shown(events: list[Event]) -> list[tuple[str, str]]:
    return [(type(e).__name__, e.text if isinstance(e, ModelDelta) else "") for e in events]


async def test_runs_of_deltas_merge_and_go_out_before_the_next_event() -> None:
    hub = ConversationHub("c", delta_pace_s=60)
    watcher = Watcher()
    hub.attach(watcher)
    hub.publish(TurnStarted(turn_id=1, position=1, request="r"))
    hub.publish(IterationStarted(turn_id=1, iteration=1, budget=5))
    for piece in ["he", "llo", " wor", "ld"]:
        hub.publish(delta(piece))
    hub.publish(model_reply())
    hub.publish(IterationStarted(turn_id=1, iteration=2, budget=5))
    hub.publish(delta("a", iteration=2))
    hub.publish(delta("b", iteration=2))
    hub.publish(TurnFinished(turn_id=1, outcome=TurnOutcome("done"), iterations=2, duration_ms=1))
    events = await drain(watcher)
    assert shown(events) == [
        ("TurnStarted", ""),
        ("IterationStarted", ""),
        ("ModelDelta", "he"),  # the first after a quiet spell goes out at once
        ("ModelDelta", "llo world"),
        ("ModelReply", ""),
        ("IterationStarted", ""),
        ("ModelDelta", "ab"),
        ("TurnFinished", ""),
    ]
    seqs = [e.seq for e in events]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    assert [e.seq for e in hub.ring] == seqs  # the ring keeps what the watchers got


async def test_a_held_delta_goes_out_when_its_pace_is_up_without_another_event() -> None:
    hub = ConversationHub("c", delta_pace_s=0.02)
    watcher = Watcher()
    hub.attach(watcher)
    hub.publish(IterationStarted(turn_id=1, iteration=1, budget=5))
    for piece in "abc":
        hub.publish(delta(piece))
    async with asyncio.timeout(10):
        got = [await anext(watcher) for _ in range(3)]
    assert shown(got) == [("IterationStarted", ""), ("ModelDelta", "a"), ("ModelDelta", "bc")]


async def test_deltas_of_two_iterations_are_never_joined() -> None:
    hub = ConversationHub("c", delta_pace_s=60)
    watcher = Watcher()
    hub.attach(watcher)
    hub.publish(delta("x", iteration=1))
    hub.publish(delta("y", iteration=1))
    hub.publish(delta("z", iteration=2))
    hub.close_watchers()
    assert shown([e async for e in watcher]) == [
        ("ModelDelta", "x"),
        ("ModelDelta", "y"),
        ("ModelDelta", "z"),
    ]


async def test_a_thousand_chunks_reach_a_watcher_as_a_few_events() -> None:
    hub = ConversationHub("c", delta_pace_s=60)
    watcher = Watcher(capacity=8)  # far fewer than the chunks: no Resync is needed
    hub.attach(watcher)
    for k in range(1000):
        hub.publish(delta(f"{k},"))
    hub.publish(model_reply())
    events = await drain(watcher)
    assert [type(e).__name__ for e in events] == ["ModelDelta", "ModelDelta", "ModelReply"]
    assert "".join(e.text for e in events if isinstance(e, ModelDelta)) == "".join(
        f"{k}," for k in range(1000)
    )


async def test_watchers_and_the_sender_see_each_reply_whole_in_fewer_deltas(
    tmp_path: Path,
) -> None:
    replies = [reply([f"x_{k} = {k}"]) for k in range(3)] + [reply(["y = 1"], "{{y}}")]
    async with Conversations.open(
        settings_for(tmp_path), llm_factory=scripted_factory(replies)
    ) as convs:
        conv = await convs.create()
        watcher = await convs.watch(conv.id).start()
        sent = [e async for e in convs.send(conv.id, "go")]
        seen: list[Event] = []
        async for event in watcher:
            seen.append(event)
            if isinstance(event, TurnFinished):
                break
        await watcher.aclose()
    assert seen == sent
    deltas = [e for e in sent if isinstance(e, ModelDelta)]
    for k, raw in enumerate(replies, start=1):
        assert "".join(d.text for d in deltas if d.iteration == k) == raw
    # ScriptedClient streams each reply in several chunks at once: the hub merges them.
    assert len(deltas) <= 2 * len(replies)


async def test_a_pace_of_zero_releases_every_delta() -> None:
    hub = ConversationHub("c", delta_pace_s=0)
    watcher = Watcher()
    hub.attach(watcher)
    for piece in "abc":
        hub.publish(delta(piece))
    assert shown(await drain(watcher)) == [("ModelDelta", p) for p in "abc"]
