"""``Conversations.execute``: code the caller wrote runs as a turn of its own, with no model,
recorded, watched, cancelled, forked and replayed like any turn (real store, real workers)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from cove.config import ModelSettings
from cove.conversation import Conversations, TurnHandle, scripted_factory
from cove.engine.llm import ScriptedClient
from cove.errors import CoveError
from cove.events import (
    BlockFinished,
    BlockStarted,
    Event,
    IterationStarted,
    ModelReply,
    ReplayFinished,
    ReplayTurnChecked,
    TurnFinished,
    TurnStarted,
    VarsChanged,
)
from tests.scripted import reply, settings_for


async def events_of(handle: TurnHandle) -> list[Event]:
    return [event async for event in handle]


def finished(events: list[Event]) -> TurnFinished:
    assert isinstance(events[-1], TurnFinished)
    return events[-1]


def block_of(events: list[Event]) -> BlockFinished:
    (block,) = [e for e in events if isinstance(e, BlockFinished)]
    return block


async def test_code_runs_as_a_recorded_turn_with_no_model_and_keeps_its_state(
    tmp_path: Path,
) -> None:
    # No endpoint is configured: building a model client would raise ConfigError.
    async with Conversations.open(settings_for(tmp_path)) as convs:
        conv = await convs.create(channel="mcp")
        events = await events_of(convs.execute(conv.id, "x = 6 * 7\nprint('set')\nx"))
        kinds = [type(e) for e in events]
        assert kinds == [
            TurnStarted,
            IterationStarted,
            ModelReply,
            BlockStarted,
            BlockFinished,
            VarsChanged,
            TurnFinished,
        ]
        done = finished(events)
        assert (done.status, done.answer, done.cost_known) == ("done", None, True)
        block = block_of(events).block
        assert (block.ok, block.stdout, block.result_preview) == (True, "set\n", "42")

        later = await events_of(convs.execute(conv.id[:8], "x + 1"))
        assert block_of(later).block.result_preview == "43"

        transcript = await convs.inspect(conv.id)
        first = transcript.turns[0]
        assert (first.request, first.model, first.status) == (
            "x = 6 * 7\nprint('set')\nx",
            None,
            "done",
        )
        (iteration,) = first.iterations
        assert (iteration.request_message, iteration.context_message) == ("", "")
        assert json.loads(iteration.raw_reply or "")["code"] == ["x = 6 * 7\nprint('set')\nx"]
        assert [v.name for v in transcript.var_versions] == ["x"]
        assert (await convs.search("print"))[0].conversation_id == conv.id


async def test_a_failing_block_fails_the_turn_and_the_sandbox_stays_usable(
    tmp_path: Path,
) -> None:
    async with Conversations.open(settings_for(tmp_path)) as convs:
        conv = await convs.create()
        await events_of(convs.execute(conv.id, "rows = [1, 2, 3]"))
        failed = finished(await events_of(convs.execute(conv.id, "rows[10]")))
        assert failed.status == "failed" and "IndexError" in (failed.error or "")
        after = await events_of(convs.execute(conv.id, "sum(rows)"))
        assert finished(after).status == "done"
        assert block_of(after).block.result_preview == "6"
        refused = await events_of(convs.execute(conv.id, "llm_query('hello?')"))
        assert "no model to ask" in (finished(refused).error or "")
        with pytest.raises(CoveError, match="the code is empty"):
            convs.execute(conv.id, "  \n")


async def test_cancelling_stops_the_running_block_and_records_the_turn_cancelled(
    tmp_path: Path,
) -> None:
    async with Conversations.open(settings_for(tmp_path, block_timeout_s=120)) as convs:
        conv = await convs.create()
        await events_of(convs.execute(conv.id, "n = 1"))
        async with convs.watch(conv.id) as watched:
            handle = convs.execute(conv.id, "while True:\n    n += 1", timeout_s=120)
            async for event in watched:  # another channel sees the block start
                if isinstance(event, BlockStarted):
                    break
            assert await handle.cancel()
            ended = finished(await events_of(handle))
        assert ended.status == "cancelled"
        transcript = await convs.inspect(conv.id, turn=2)
        (block,) = transcript.turns[0].iterations[0].blocks
        assert not block.ok and (block.error or "").startswith("CancelledError")
        again = await events_of(convs.execute(conv.id, "n"))
        assert finished(again).status == "done"


async def test_a_model_turn_sees_the_blocks_run_without_a_model(tmp_path: Path) -> None:
    client = ScriptedClient([reply(["total * 2"], "{{total}} doubled")])

    def llm(settings: ModelSettings, model: str) -> ScriptedClient:
        return client

    async with Conversations.open(settings_for(tmp_path), llm_factory=llm) as convs:
        conv = await convs.create()
        await events_of(convs.execute(conv.id, "total = sum(range(10))"))
        answered = finished(await events_of(convs.send(conv.id, "double it")))
        assert answered.answer == "45 doubled"
        context = client.calls[0][2][2]["content"]
        assert "total = sum(range(10))" in context


async def test_a_fork_at_a_turn_with_no_model_starts_from_its_variables(tmp_path: Path) -> None:
    async with Conversations.open(settings_for(tmp_path)) as convs:
        conv = await convs.create()
        await events_of(convs.execute(conv.id, "v = 'first'"))
        await events_of(convs.execute(conv.id, "v = 'second'"))
        fork = await convs.fork(conv.id, 1)
        seen = await events_of(convs.execute(fork.id, "v"))
        assert block_of(seen).block.result_preview == "'first'"


async def test_turns_with_no_model_replay_exactly_among_model_turns(tmp_path: Path) -> None:
    settings = settings_for(tmp_path)
    factory = scripted_factory([reply(["import random\nroll = random.randint(1, 6)"], "{{roll}}")])
    async with Conversations.open(settings, llm_factory=factory) as convs:
        conv = await convs.create()
        await events_of(convs.execute(conv.id, "import random\nseq = [random.random()]"))
        await events_of(convs.send(conv.id, "roll a die"))
        await events_of(convs.execute(conv.id, "seq.append(roll)\nseq[5]", timeout_s=30))
        await events_of(convs.execute(conv.id, "seq.append(len(seq))\nseq"))
    async with Conversations.open(settings, llm_factory=scripted_factory([])) as convs:
        checked = [event async for event in convs.replay(conv.id)]
    turns = [e for e in checked if isinstance(e, ReplayTurnChecked)]
    assert [(t.recorded_status, t.replayed_status) for t in turns] == [
        ("done", "done"),
        ("done", "done"),
        ("failed", "failed"),
        ("done", "done"),
    ]
    assert all(t.mismatches == () for t in turns), [t.mismatches for t in turns]
    end = checked[-1]
    assert isinstance(end, ReplayFinished) and end.ok and end.blocks == 4


async def test_a_second_call_waits_for_the_running_turn(tmp_path: Path) -> None:
    async with Conversations.open(settings_for(tmp_path)) as convs:
        conv = await convs.create()
        first = convs.execute(conv.id, "k = 1")
        second = convs.execute(conv.id, "k + 1")
        one, two = await asyncio.gather(events_of(first), events_of(second))
        assert [e.position for e in one + two if isinstance(e, TurnStarted)] == [1, 2]
        assert block_of(two).block.result_preview == "2"


async def test_another_process_rebuilds_the_turn_as_it_ran(tmp_path: Path) -> None:
    settings = settings_for(tmp_path)
    async with Conversations.open(settings) as convs:
        conv = await convs.create()
        live = await events_of(convs.execute(conv.id, "a = 1\na + 1"))
    async with (
        Conversations.open(settings, read_only=True) as other,
        other.watch(conv.id, after=0) as watched,
    ):
        rebuilt: list[Event] = []
        async for event in watched:
            rebuilt.append(event)
            if isinstance(event, TurnFinished):
                break
    started = [e for e in rebuilt if isinstance(e, IterationStarted)]
    assert [e.budget for e in started] == [1]  # as the live turn said: one iteration, no model
    assert [e.budget for e in live if isinstance(e, IterationStarted)] == [1]
    replied = [e for e in rebuilt if isinstance(e, ModelReply)]
    assert [e.code for e in replied] == [("a = 1\na + 1",)]
    assert block_of(rebuilt).block.result_preview == "2"
