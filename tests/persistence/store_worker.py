"""A separate process that writes to a store, for the crash-safety and concurrency tests.

Usage (run with the project's Python)::

    store_worker.py crash-writer DB      write iterations forever, print each committed id
    store_worker.py unit-writer DB       the same, one unit at a time as the engine does (start,
                                         reply, each block, finish), printing each unit
    store_worker.py writer DB COUNT      write COUNT iterations into a new conversation
    store_worker.py lease DB ID OWNER    print "ready", wait for a line on stdin, then try to
                                         take the conversation's lease: print "won" or "busy"

Every committed id is printed and flushed only after ``finish_iteration`` returned, so the
parent knows exactly what was durable when it killed us.
"""

from __future__ import annotations

import asyncio
import os
import sys

from cove.errors import Busy
from cove.persistence.records import IterationWrite, ReplyWrite
from cove.persistence.store import Store
from cove.results import BlockResult, TurnOutcome, VarVersion

SYSTEM_PROMPT = "You answer by writing Python code."


def iteration(n: int) -> IterationWrite:
    """Three blocks and two variable versions; every fifth value is large (a blob)."""
    value = '"' + "v" * 6000 + f'{n}"' if n % 5 == 0 else str(n)
    blocks = tuple(
        BlockResult(position=k, code=f"a = {n}\nb = a * {k}", ok=True, result_encoded=value)
        for k in range(3)
    )
    versions = tuple(
        VarVersion(name, "value", value, "int", str(n), version=n + 1, block_position=2)
        for name in ("a", "b")
    )
    return IterationWrite(
        status="ok", blocks=blocks, var_versions=versions, reply=ReplyWrite(raw_reply="{}")
    )


async def write(store: Store, turn_id: int, n: int) -> int:
    iteration_id = await store.start_iteration(
        turn_id, n, system_prompt=SYSTEM_PROMPT, request_message="r", context_message=f"c{n}"
    )
    await store.finish_iteration(iteration_id, iteration(n))
    return iteration_id


async def write_units(store: Store, turn_id: int, n: int) -> None:
    """One iteration the engine's way, printing "ID reply", "ID block K", "ID done" per unit."""
    iteration_id = await store.start_iteration(
        turn_id, n, system_prompt=SYSTEM_PROMPT, request_message="r", context_message=f"c{n}"
    )
    whole = iteration(n)
    await store.record_reply(
        iteration_id,
        ReplyWrite(raw_reply=f"reply {n}", planned_blocks=tuple(b.code for b in whole.blocks)),
    )
    print(iteration_id, "reply", flush=True)
    for block in whole.blocks:
        versions = [v for v in whole.var_versions if v.block_position == block.position]
        await store.record_block(iteration_id, block, versions)
        print(iteration_id, "block", block.position, flush=True)
    await store.finish_iteration(iteration_id, IterationWrite(status="ok"))
    print(iteration_id, "done", flush=True)


async def unit_writer(path: str) -> None:
    async with Store.open(path) as store:
        conversation = await store.create_conversation(channel="crash")
        turn = await store.start_turn(conversation.id, "write until killed")
        print("conversation", conversation.id, flush=True)
        n = 0
        while True:
            await write_units(store, turn.id, n)
            n += 1


async def crash_writer(path: str) -> None:
    # No lease on purpose: the process is going to be killed, and the next open must treat
    # its running turn as abandoned.
    async with Store.open(path) as store:
        conversation = await store.create_conversation(channel="crash")
        turn = await store.start_turn(conversation.id, "write until killed")
        print("conversation", conversation.id, flush=True)
        n = 0
        while True:
            print(await write(store, turn.id, n), flush=True)
            n += 1


async def writer(path: str, count: int) -> None:
    async with Store.open(path) as store:
        conversation = await store.create_conversation(channel="writer")
        # Hold the lease like a real cove process, so another process opening the file knows
        # this running turn is alive.
        owner = f"writer-{os.getpid()}"
        await store.acquire_lease(conversation.id, owner, ttl_s=60)
        turn = await store.start_turn(conversation.id, "write")
        for n in range(count):
            await write(store, turn.id, n)
        await store.finish_turn(turn.id, TurnOutcome("done", answer="ok"))
        await store.release_lease(conversation.id, owner)
        print(conversation.id, flush=True)


async def lease(path: str, conversation_id: str, owner: str) -> None:
    async with Store.open(path) as store:
        print("ready", flush=True)
        await asyncio.to_thread(sys.stdin.readline)
        try:
            await store.acquire_lease(conversation_id, owner, ttl_s=60)
        except Busy:
            print("busy", flush=True)
        else:
            print("won", flush=True)


def main(argv: list[str]) -> None:
    command, path, *rest = argv
    if command == "crash-writer":
        asyncio.run(crash_writer(path))
    elif command == "unit-writer":
        asyncio.run(unit_writer(path))
    elif command == "writer":
        asyncio.run(writer(path, int(rest[0])))
    elif command == "lease":
        asyncio.run(lease(path, rest[0], rest[1]))
    else:
        raise SystemExit(f"unknown command {command!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
