"""SQLite units run whole on aiosqlite's thread: never on the event loop's, one hop each, and a
unit that would wait on anything but its statements is refused with its transaction undone."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from cove.persistence.database import Transactions
from cove.persistence.sqlite import open_sqlite
from cove.persistence.sqlite_units import UnitSuspended
from cove.persistence.store import Store


async def test_every_statement_of_a_unit_runs_off_the_event_loops_thread(tmp_path: Path) -> None:
    db = await open_sqlite(str(tmp_path / "cove.db"), read_only=False)
    loop_thread = threading.get_ident()

    async def unit(on: Transactions) -> list[int]:
        seen = [threading.get_ident()]
        async with on.writing() as sql:
            await sql.run("CREATE TABLE t (x INTEGER)")
            seen.append(threading.get_ident())
            await sql.run_many("INSERT INTO t VALUES (?)", [(1,), (2,)])
        async with on.reading() as sql:
            seen.append(int(await sql.value("SELECT sum(x) FROM t")))
        return seen

    try:
        first, second, total = await db.run(unit)
    finally:
        await db.aclose()
    assert first == second != loop_thread
    assert total == 3


async def test_a_unit_that_waits_on_something_else_is_refused_and_rolled_back(
    tmp_path: Path,
) -> None:
    path = tmp_path / "cove.db"
    async with Store.open(path) as store:
        conversation = await store.create_conversation(channel="cli")
        db = store._db

        async def waits(on: Transactions) -> None:
            async with on.writing() as sql:
                await sql.run("UPDATE conversation SET title = 'half-done'")
                await asyncio.sleep(0)  # not a statement: cannot run on the connection's thread

        with pytest.raises(UnitSuspended, match="other than its SQLite statements"):
            await db.run(waits)
        # The connection is usable again and nothing of the refused unit landed.
        assert (await store.get_conversation(conversation.id)).title is None
        await store.set_title(conversation.id, "after")
        assert (await store.get_conversation(conversation.id)).title == "after"


async def test_a_unit_that_raises_rolls_back_and_the_error_reaches_the_caller(
    tmp_path: Path,
) -> None:
    async with Store.open(tmp_path / "cove.db") as store:
        conversation = await store.create_conversation(channel="cli")

        async def fails(on: Transactions) -> None:
            async with on.writing() as sql:
                await sql.run("UPDATE conversation SET title = 'never'")
                raise LookupError("the unit's own error")

        with pytest.raises(LookupError, match="the unit's own error"):
            await store._db.run(fails)
        assert (await store.get_conversation(conversation.id)).title is None
