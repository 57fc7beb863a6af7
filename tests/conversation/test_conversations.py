"""The Conversations API on real parts: store file, worker processes, scripted model."""

from __future__ import annotations

import asyncio
import contextlib
import re
import socket
import sqlite3
import subprocess
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from cove.conversation import Conversations, scripted_factory
from cove.errors import AmbiguousId, Busy, CoveError, NotFound
from cove.events import (
    BlockStarted,
    Event,
    ReplayFinished,
    TurnFinished,
    TurnQueued,
    TurnStarted,
)
from cove.persistence.store import Store
from tests.conversation.watch.watch_helpers import GatedClient
from tests.scripted import reply, settings_for


async def run(convs: Conversations, cid: str, text: str, **kw: Any) -> list[Event]:
    return [event async for event in convs.send(cid, text, **kw)]


async def started(
    convs: Conversations, cid: str, text: str, until: type[Event] = TurnStarted
) -> asyncio.Task[list[Event]]:
    """Start a turn in a task; return once it emitted ``until`` (its lease is held by then)."""
    async with convs.watch(cid) as stream:
        task = asyncio.create_task(run(convs, cid, text))
        async for event in stream:
            if isinstance(event, until):
                break
    return task


def final(events: list[Event]) -> TurnFinished:
    last = events[-1]
    assert isinstance(last, TurnFinished)
    return last


async def test_create_send_inspect(tmp_path: Path) -> None:
    factory = scripted_factory([reply(["x = 20 + 22"], "{{x}}"), reply(["x * 2"], "{{x}} twice")])
    async with await Conversations.open(settings_for(tmp_path), llm_factory=factory) as convs:
        conv = await convs.create(channel="cli")
        assert (tmp_path / "workspaces" / conv.id).is_dir()
        assert final(await run(convs, conv.id, "compute")).answer == "42"
        assert final(await run(convs, conv.id[:10], "again")).answer == "42 twice"
        transcript = await convs.inspect(conv.id)
        assert [t.position for t in transcript.turns] == [1, 2]
        assert (await convs.variables(conv.id))["x"].version == 1
        listed = await convs.list()
        assert [c.id for c in listed] == [conv.id] and listed[0].turn_count == 2
        hits = await convs.search("compute")
        assert hits and hits[0].conversation_id == conv.id


async def test_unknown_and_ambiguous_ids(tmp_path: Path) -> None:
    async with await Conversations.open(
        settings_for(tmp_path), llm_factory=scripted_factory([])
    ) as convs:
        with pytest.raises(NotFound):
            await convs.get("nope")
        with pytest.raises(NotFound):
            await run(convs, "0" * 32, "hello")
        ids = [(await convs.create()).id for _ in range(20)]
        prefix = next(a[:1] for a in ids for b in ids if a != b and a[0] == b[0])
        with pytest.raises(AmbiguousId):
            await convs.get(prefix)


async def test_rename_sets_a_trimmed_title_and_refuses_an_empty_one(tmp_path: Path) -> None:
    async with Conversations.open(
        settings_for(tmp_path), llm_factory=scripted_factory([])
    ) as convs:
        conv = await convs.create(owner="alice")
        renamed = await convs.rename(conv.id[:8], "  Quarterly sales  ")
        assert renamed.title == "Quarterly sales"
        assert (await convs.get(conv.id)).title == "Quarterly sales"
        assert (await convs.rename(conv.id, "x" * 500)).title == "x" * 200
        with pytest.raises(CoveError, match="empty"):
            await convs.rename(conv.id, "   ")
        with pytest.raises(NotFound):
            await convs.rename(conv.id, "not yours", owner="bob")
        assert (await convs.get(conv.id)).title == "x" * 200


async def test_for_external_finds_or_creates(tmp_path: Path) -> None:
    async with await Conversations.open(
        settings_for(tmp_path), llm_factory=scripted_factory([])
    ) as convs:
        first = await convs.for_external("telegram", "1234")
        again = await convs.for_external("telegram", "1234")
        other = await convs.for_external("telegram", "999")
        racing = await asyncio.gather(*(convs.for_external("web", "same") for _ in range(5)))
    assert first.id == again.id != other.id
    assert len({c.id for c in racing}) == 1


async def test_sends_to_one_conversation_run_one_at_a_time_in_order(tmp_path: Path) -> None:
    answers = [reply([f"step = {n}"], f"answer {n}") for n in range(1, 5)]
    model = GatedClient(answers, gates=[0])  # the first turn's model waits for the others
    queued = [asyncio.Event() for _ in range(4)]

    async def send(convs: Conversations, cid: str, n: int) -> list[Event]:
        events = []
        async for event in convs.send(cid, f"send {n}"):
            events.append(event)
            if isinstance(event, TurnQueued):
                queued[n - 1].set()
        return events

    async with await Conversations.open(
        settings_for(tmp_path), llm_factory=model.factory()
    ) as convs:
        conv = await convs.create()
        sending = asyncio.gather(*(send(convs, conv.id, n) for n in range(1, 5)))
        async with asyncio.timeout(60):
            await model.reached[0].wait()
            for event in queued[1:]:
                await event.wait()
        model.release(0)
        results = await sending
        assert [final(events).answer for events in results] == [f"answer {n}" for n in range(1, 5)]
        assert not any(isinstance(e, TurnQueued) for e in results[0])
        assert all(any(isinstance(e, TurnQueued) for e in events) for events in results[1:])
        turns = (await convs.inspect(conv.id)).turns
        assert [(t.position, t.request) for t in turns] == [(n, f"send {n}") for n in range(1, 5)]


def isolated_reply(messages: Sequence[Mapping[str, str]]) -> str:
    match = re.search(r"conv (\d+) turn (\d+)", messages[1]["content"].split("<request>")[-1])
    assert match, messages[1]["content"]
    conv, turn = match.groups()
    setup = "seen = []\n" if turn == "1" else ""
    return reply([f"{setup}seen.append({turn})\nowner = 'c{conv}'"], "{{owner}} {{seen}}")


@pytest.mark.slow
async def test_fifty_conversations_three_turns_concurrently(tmp_path: Path) -> None:
    count = 50
    factory = scripted_factory([isolated_reply] * (count * 3))
    settings = settings_for(tmp_path, max_live_environments=8, worker_pool_size=2)
    async with await Conversations.open(settings, llm_factory=factory) as convs:
        ids = [(await convs.create()).id for _ in range(count)]

        async def three_turns(n: int) -> list[str | None]:
            answers = []
            for turn in (1, 2, 3):
                events = await run(convs, ids[n], f"conv {n} turn {turn}")
                answers.append(final(events).answer)
            return answers

        results = await asyncio.gather(*(three_turns(n) for n in range(count)))
        assert convs._live.peak <= 8
        for n, answers in enumerate(results):
            assert answers[-1] == f"c{n} [1, 2, 3]"
            transcript = await convs.inspect(ids[n])
            assert [t.position for t in transcript.turns] == [1, 2, 3]
            assert all(t.status == "done" for t in transcript.turns)
            for t in transcript.turns:
                assert [it.position for it in t.iterations] == list(range(len(t.iterations)))
            variables = await convs.variables(ids[n])
            assert variables["owner"].preview == f"'c{n}'"
            assert [v.version for v in await convs.var_history(ids[n], "seen")] == [1, 2, 3]


async def test_evicted_environment_is_rebuilt_from_the_database(tmp_path: Path) -> None:
    factory = scripted_factory(
        [
            reply(["def double(v):\n    return v * 2", "kept = [1, 2]"], "ok"),
            reply(["other = 1"], "ok"),
            reply(["double(len(kept))"], "{{kept}}"),
        ]
    )
    settings = settings_for(tmp_path, max_live_environments=1)
    async with await Conversations.open(settings, llm_factory=factory) as convs:
        a, b = await convs.create(), await convs.create()
        await run(convs, a.id, "define")
        await run(convs, b.id, "evicts a")
        assert convs._live.get(a.id) is None
        events = await run(convs, a.id, "use")
        assert final(events).answer == "[1, 2]"
        assert final(events).status == "done"


async def test_live_environments_are_kept_by_their_workers_memory(tmp_path: Path) -> None:
    # A 1 MiB budget is less than any worker takes: after each turn only the environment just
    # used stays live, its worker's PSS is what the process reports, and a conversation whose
    # environment closed continues from the store.
    factory = scripted_factory(
        [reply(["kept = [1, 2]"], "ok"), reply(["other = 1"], "ok"), reply([], "{{kept}}")]
    )
    settings = settings_for(tmp_path, max_live_environments=8, live_memory_mb=1)
    async with await Conversations.open(settings, llm_factory=factory) as convs:
        a, b = await convs.create(), await convs.create()
        await run(convs, a.id, "define")
        used = convs.stats()
        assert used.live_environments == 1 and used.live_memory_budget_bytes == 1024 * 1024
        assert used.live_memory_bytes > 1024 * 1024  # a real worker's PSS, over the budget
        await run(convs, b.id, "evicts a")
        for _ in range(100):  # a's environment closes in the background
            if convs._live.get(a.id) is None:
                break
            await asyncio.sleep(0.05)
        assert convs._live.get(a.id) is None and convs._live.get(b.id) is not None
        assert convs.stats().evicted_for_memory == 1
        events = await run(convs, a.id, "use")
        assert final(events).answer == "[1, 2]"


async def test_fork_starts_from_the_parent_variables_at_that_turn(tmp_path: Path) -> None:
    factory = scripted_factory(
        [
            reply(["n = 1"], "{{n}}"),
            reply(["n = n + 10"], "{{n}}"),
            reply(["n * 100"], "forked {{n}}"),
        ]
    )
    async with await Conversations.open(settings_for(tmp_path), llm_factory=factory) as convs:
        conv = await convs.create(title="base")
        await run(convs, conv.id, "one")
        await run(convs, conv.id, "two")
        fork = await convs.fork(conv.id, at_turn=1)
        assert fork.parent_id == conv.id and fork.fork_turn == 1
        events = await run(convs, fork.id, "three")
        assert final(events).answer == "forked 1"
        assert (await convs.variables(conv.id))["n"].preview == "11"
        transcript = await convs.inspect(fork.id)
        assert [t.position for t in transcript.turns] == [1, 2]
        with pytest.raises(NotFound):
            await convs.fork(conv.id, at_turn=9)


async def test_a_fork_at_turn_zero_is_another_first_turn_that_replays(tmp_path: Path) -> None:
    factory = scripted_factory(
        [
            reply(["n = 1"], "{{n}}"),
            reply(["n = n + 10"], "{{n}}"),
            reply(["m = 5"], "m is {{m}}"),
        ]
    )
    async with await Conversations.open(settings_for(tmp_path), llm_factory=factory) as convs:
        conv = await convs.create(title="base")
        await run(convs, conv.id, "one")
        await run(convs, conv.id, "two")
        fork = await convs.fork(conv.id, at_turn=0)
        assert (fork.parent_id, fork.fork_turn, fork.turn_count) == (conv.id, 0, 0)
        assert await convs.variables(fork.id) == {}
        events = await run(convs, fork.id, "one, asked again")
        assert final(events).answer == "m is 5"
        assert set(await convs.variables(fork.id)) == {"m"}  # none of the parent's variables
        transcript = await convs.inspect(fork.id)
        assert [(t.conversation_id, t.position) for t in transcript.turns] == [(fork.id, 1)]
        assert [f.id for f in await convs.forks(conv.id)] == [fork.id]
        replayed = [event async for event in convs.replay(fork.id)]
        assert isinstance(replayed[-1], ReplayFinished) and replayed[-1].ok
        with pytest.raises(NotFound):
            await convs.fork(conv.id, at_turn=-1)


async def test_delete_removes_everything(tmp_path: Path) -> None:
    factory = scripted_factory([reply(["x = 1"], "ok")])
    async with await Conversations.open(settings_for(tmp_path), llm_factory=factory) as convs:
        conv = await convs.create()
        await run(convs, conv.id, "make x")
        await convs.delete(conv.id)
        with pytest.raises(NotFound):
            await convs.get(conv.id)
        assert not (tmp_path / "workspaces" / conv.id).exists()
        assert await convs.search("make") == []


async def test_delete_right_after_the_turn_finished_event_is_not_busy(tmp_path: Path) -> None:
    # A channel that deletes as soon as it sees the end (the web's SSE, a script) must not be
    # told the conversation is running a turn while that turn lets go of its lease.
    factory = scripted_factory([reply(["x = 1"], "ok") for _ in range(5)])
    async with await Conversations.open(settings_for(tmp_path), llm_factory=factory) as convs:
        for _ in range(5):
            conv = await convs.create()
            async for event in convs.send(conv.id, "make x"):
                if isinstance(event, TurnFinished):
                    await convs.delete(conv.id)  # the turn's clean-up has not run yet
            with pytest.raises(NotFound):
                await convs.get(conv.id)


async def test_attachments_land_in_the_workspace(tmp_path: Path) -> None:
    factory = scripted_factory([reply(["text = read_file('notes.txt')"], "{{text}}")])
    async with await Conversations.open(settings_for(tmp_path), llm_factory=factory) as convs:
        conv = await convs.create()
        events = await run(convs, conv.id, "read it", attachments=[("notes.txt", b"hello")])
    assert final(events).answer == "hello"


async def test_a_refused_attachment_name_writes_none_of_the_files(tmp_path: Path) -> None:
    factory = scripted_factory([reply(["x = 1"], "never")])
    async with await Conversations.open(settings_for(tmp_path), llm_factory=factory) as convs:
        conv = await convs.create()
        files = [("notes.txt", b"hello"), (".profile", b"export X=1")]
        with pytest.raises(CoveError, match="not allowed"):
            await run(convs, conv.id, "read it", attachments=files)
        assert list((tmp_path / "workspaces" / conv.id).iterdir()) == []


async def test_attachments_past_the_workspace_quota_are_refused_whole(tmp_path: Path) -> None:
    factory = scripted_factory([reply(["x = 2"], "small")])  # the refused turn never runs
    settings = settings_for(tmp_path, workspace_quota_mb=1)
    async with await Conversations.open(settings, llm_factory=factory) as convs:
        conv = await convs.create()
        files = [("a.csv", b"a" * 600_000), ("b.csv", b"b" * 600_000)]  # each fits, not both
        with pytest.raises(CoveError, match="quota of 1 MB would be exceeded"):
            await run(convs, conv.id, "read them", attachments=files)
        assert list((tmp_path / "workspaces" / conv.id).iterdir()) == []
        events = await run(convs, conv.id, "one", attachments=files[:1])
        assert final(events).answer == "small"  # the conversation goes on


async def test_a_broken_upload_stream_leaves_nothing(tmp_path: Path) -> None:
    settings = settings_for(tmp_path)
    async with await Conversations.open(settings) as convs:
        conv = await convs.create()

        async def breaks() -> AsyncIterator[bytes]:
            yield b"x" * 1000
            raise ConnectionError("the client went away")

        with pytest.raises(ConnectionError):
            await convs.receive_file(conv.id, "data.csv", breaks())
        with pytest.raises(CoveError, match="not allowed"):
            await convs.receive_file(conv.id, "../escape.csv", breaks())
        with pytest.raises(NotFound):
            await convs.receive_file("nope", "data.csv", breaks())

        async def whole() -> AsyncIterator[bytes]:
            yield b"a,b\n"

        assert await convs.receive_file(conv.id, "data.csv", whole()) == 4
        (tmp_path / "workspaces" / conv.id / "out").mkdir()
        with pytest.raises(CoveError, match="not a regular file"):
            await convs.receive_file(conv.id, "out", whole())
        (tmp_path / "workspaces" / conv.id / "out").rmdir()
    assert [p.name for p in (tmp_path / "workspaces" / conv.id).iterdir()] == ["data.csv"]
    assert list((tmp_path / "workspaces" / ".incoming").iterdir()) == []


async def test_a_live_lease_in_another_process_means_busy(tmp_path: Path) -> None:
    model = GatedClient([reply(["x = 1"], "ok")], gates=[0])  # the turn runs until released
    settings = settings_for(tmp_path)
    async with await Conversations.open(settings, llm_factory=model.factory()) as first:
        conv = await first.create()
        async with await Conversations.open(settings, llm_factory=model.factory()) as second:
            running = await started(first, conv.id, "slow")
            with pytest.raises(Busy, match="busy"):
                await run(second, conv.id, "intrude")
            model.release(0)
            assert final(await running).status == "done"


def dead_owner() -> str:
    """A lease owner id naming a process of this host that has ended."""
    ended = subprocess.Popen(["true"])
    ended.wait()
    return f"{socket.gethostname()}:{ended.pid}:deadbeef"


async def test_running_elsewhere_counts_a_live_lease_of_another_living_process_only(
    tmp_path: Path,
) -> None:
    model = GatedClient([reply(["x = 1"], "ok")], gates=[0])  # the turn runs until released
    settings = settings_for(tmp_path)
    dead = dead_owner()
    async with await Conversations.open(settings, llm_factory=model.factory()) as first:
        conv = await first.create()
        async with await Conversations.open(settings, llm_factory=model.factory()) as second:
            running = await started(first, conv.id, "slow")
            assert await second.running_elsewhere(conv.id)
            assert not await first.running_elsewhere(conv.id)  # its own turn
            model.release(0)
            await running
            assert not await second.running_elsewhere(conv.id)  # handed back
        async with Store.open(settings.store.database) as store:
            await store.acquire_lease(conv.id, dead, 600)
            assert not await first.running_elsewhere(conv.id)  # send takes it over
            await store.release_lease(conv.id, dead)
            await store.acquire_lease(conv.id, "another-host:1:abc", 600)
            assert await first.running_elsewhere(conv.id)  # alive, for all this host knows


async def test_cancel_stops_the_running_turn(tmp_path: Path) -> None:
    factory = scripted_factory([reply(["while True:\n    pass"])])
    settings = settings_for(tmp_path, block_timeout_s=60, block_timeout_max_s=60)
    async with await Conversations.open(settings, llm_factory=factory) as convs:
        conv = await convs.create()
        task = await started(convs, conv.id, "spin", BlockStarted)
        assert await convs.cancel(conv.id)
        assert final(await task).status == "cancelled"
        assert not await convs.cancel(conv.id)


async def test_a_long_turn_keeps_renewing_its_lease(tmp_path: Path) -> None:
    model = GatedClient([reply(["x = 1"], "ok")], gates=[0])  # the turn runs until released
    settings = settings_for(tmp_path, lease_ttl_s=0.6)
    async with await Conversations.open(settings, llm_factory=model.factory()) as first:
        conv = await first.create()
        async with await Conversations.open(settings, llm_factory=model.factory()) as second:
            running = await started(first, conv.id, "slow")
            await lease_renewed(settings.store.database, conv.id, times=9)  # three lifetimes' worth
            with pytest.raises(Busy):
                await run(second, conv.id, "intrude")
            model.release(0)
            assert final(await running).status == "done"


async def lease_renewed(database: str, conversation_id: str, times: int) -> None:
    """Wait (at most 60 s) until the conversation's lease expiry has moved forward ``times``."""

    def expiry() -> float | None:
        with contextlib.closing(sqlite3.connect(database)) as db:
            row = db.execute(
                "SELECT lease_until FROM conversation WHERE id = ?", (conversation_id,)
            ).fetchone()
        return None if row is None or row[0] is None else float(row[0])

    renewals, last = 0, await asyncio.to_thread(expiry)
    async with asyncio.timeout(60):
        while renewals < times:
            await asyncio.sleep(0.05)  # polling the database for the condition
            now = await asyncio.to_thread(expiry)
            if now is not None and last is not None and now > last:
                renewals += 1
            last = now


async def test_delete_is_refused_while_a_turn_runs(tmp_path: Path) -> None:
    model = GatedClient([reply(["x = 1"], "ok")], gates=[0])  # the turn runs until released
    async with await Conversations.open(
        settings_for(tmp_path), llm_factory=model.factory()
    ) as convs:
        conv = await convs.create()
        running = await started(convs, conv.id, "slow")
        with pytest.raises(Busy):
            await convs.delete(conv.id)
        model.release(0)
        assert final(await running).status == "done"
        await convs.delete(conv.id)


async def test_a_turn_whose_lease_is_taken_over_stops_without_writing_again(
    tmp_path: Path,
) -> None:
    # The model never answers: only the lost lease can end the turn.
    model = GatedClient([reply(["x = 1"], "ok")], gates=[0])
    settings = settings_for(tmp_path, lease_ttl_s=0.3)
    async with await Conversations.open(settings, llm_factory=model.factory()) as convs:
        conv = await convs.create()
        running = await started(convs, conv.id, "slow")
        with sqlite3.connect(settings.store.database) as db:  # another process takes the lease over
            db.execute(
                "UPDATE conversation SET lease_owner = 'elsewhere', lease_until = ?,"
                " lease_epoch = lease_epoch + 1",
                (time.time() + 60,),
            )
        # The turn is cancelled, and its last write (recording it cancelled) is refused: the
        # conversation belongs to the other process now.
        with pytest.raises(Busy, match="epoch 1 was refused"):
            await asyncio.wait_for(running, timeout=60)
        turn = (await convs._store.turns(conv.id))[-1]
        assert turn.status == "running" and not (await convs.inspect(conv.id)).turns[0].answer


async def test_an_empty_request_is_refused_and_nothing_is_recorded(tmp_path: Path) -> None:
    async with await Conversations.open(
        settings_for(tmp_path), llm_factory=scripted_factory([])
    ) as convs:
        conv = await convs.create()
        with pytest.raises(CoveError, match="empty"):
            await run(convs, conv.id, "   ")
        assert (await convs.inspect(conv.id)).turns == ()


async def test_a_closed_conversations_object_refuses_work(tmp_path: Path) -> None:
    convs = await Conversations.open(settings_for(tmp_path), llm_factory=scripted_factory([]))
    await convs.aclose()
    await convs.aclose()  # idempotent
    with pytest.raises(CoveError, match="closed"):
        await convs.create()
