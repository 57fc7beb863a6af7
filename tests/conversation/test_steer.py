"""Steering: a message folded into the running turn reaches the model's next context."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from cove.conversation import Conversations
from cove.events import Event, IterationStarted, ReplayFinished, SteerReceived
from tests.conversation.watch.watch_helpers import GatedClient, durable
from tests.scripted import reply, settings_for

NOTE = "use base 7 please"


async def test_a_steered_message_reaches_the_next_iteration_and_is_recorded(
    tmp_path: Path,
) -> None:
    settings = settings_for(tmp_path)
    model = GatedClient([reply(["n = 6 * 7"]), reply([], "{{n}}")], gates=[0])
    async with Conversations.open(settings, llm_factory=model.factory()) as convs:
        conv = await convs.create()
        handle = convs.send(conv.id, "compute")
        await model.reached[0].wait()  # iteration 1 is at the model: its context is built
        assert await convs.steer(conv.id[:10], NOTE) is None
        model.release(0)
        events = [e async for e in handle]
        transcript = await convs.inspect(conv.id)
        replayed = [e async for e in convs.replay(conv.id)]
    contexts = [call[2][-1]["content"] for call in model.inner.calls]
    assert NOTE not in contexts[0] and NOTE in contexts[1]
    assert "<from_the_user>" in contexts[1]
    iterations = transcript.turns[0].iterations
    assert [it.steering for it in iterations] == [(), (NOTE,)]
    steered = [e for e in events if isinstance(e, SteerReceived)]
    assert [(e.iteration, e.text) for e in steered] == [(2, NOTE)]
    second = next(e for e in events if isinstance(e, IterationStarted) and e.iteration == 2)
    assert events.index(steered[0]) == events.index(second) + 1
    finished = replayed[-1]
    assert isinstance(finished, ReplayFinished) and finished.ok, replayed

    # Another process rebuilds the same events, the note included, with the same numbers.
    async with Conversations.open(settings, llm_factory=model.factory()) as convs:
        stream = await convs.watch(conv.id, after=0).start()
        rebuilt: list[Event] = []
        async for event in stream:
            rebuilt.append(event)
            if event.type == "turn_finished":
                break
        await stream.aclose()
    live = [(e.type, e.seq) for e in durable(events) + steered]
    assert sorted(live, key=lambda k: k[1]) == [(e.type, e.seq) for e in rebuilt]

    # And `cove show` prints it.
    env = {
        **os.environ,
        "COVE_DATA_DIR": str(tmp_path),
        "COVE_SANDBOX_LIBRARIES": "0",
        "COVE_DB": settings.store.database,
    }
    shown = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "cove", "show", conv.id, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await shown.communicate()
    assert shown.returncode == 0, err.decode()
    assert NOTE in out.decode()


async def test_without_a_running_turn_a_steer_is_a_turn(tmp_path: Path) -> None:
    model = GatedClient([reply([], "as a turn")])
    async with Conversations.open(settings_for(tmp_path), llm_factory=model.factory()) as convs:
        conv = await convs.create()
        handle = await convs.steer(conv.id, NOTE)
        assert handle is not None
        assert (await handle.finished()).answer == "as a turn"
        turns = await convs._store.turns(conv.id)
    assert [t.request for t in turns] == [NOTE]


async def test_a_steer_too_late_for_the_turn_becomes_the_next_turn(tmp_path: Path) -> None:
    model = GatedClient([reply([], "first"), reply([], "second")], gates=[0])
    async with Conversations.open(settings_for(tmp_path), llm_factory=model.factory()) as convs:
        conv = await convs.create()
        stream = await convs.watch(conv.id).start()
        handle = convs.send(conv.id, "one")
        await model.reached[0].wait()  # the only iteration: it answers, no later context
        assert await convs.steer(conv.id, NOTE) is None
        model.release(0)
        assert (await handle.finished()).answer == "first"
        answers = []
        async for event in stream:
            if event.type == "turn_finished":
                answers.append(getattr(event, "answer", None))
                if len(answers) == 2:
                    break
        await stream.aclose()
        turns = await convs._store.turns(conv.id)
    assert answers == ["first", "second"]
    assert [t.request for t in turns] == ["one", NOTE]
