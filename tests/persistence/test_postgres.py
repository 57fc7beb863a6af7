"""What only the PostgreSQL backend has to show: how it is reached, refused and followed.

The behaviour both backends share (every unit, leases, fencing, search, values, history) is
tested on both by the rest of the suite; these tests need a PostgreSQL server of their own.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from urllib.parse import quote

import asyncpg
import pytest

from cove.errors import Busy, NotADatabase, SchemaTooNew, StoreError
from cove.persistence.fence import Fence, fenced
from cove.persistence.migrate import latest_version
from cove.persistence.postgres.url import redacted
from cove.persistence.records import IterationWrite
from cove.persistence.store import Store
from cove.results import BlockResult, TurnOutcome
from tests.persistence.store_helpers import SYSTEM_PROMPT, add_turn
from tests.postgres_server import PostgresServer

SECRET = "s3cret-DO-NOT-LEAK"


@pytest.fixture
def url(postgres_server: PostgresServer) -> str:
    """A new empty database, named with a password in its URL (the server trusts its socket,
    so the password is never checked: it is there to be kept out of messages)."""
    plain = postgres_server.database()
    return plain.replace("postgresql://cove@", f"postgresql://cove:{SECRET}@")


@pytest.fixture
async def conn(url: str) -> AsyncIterator[asyncpg.Connection]:
    connection = await asyncpg.connect(url)
    try:
        yield connection
    finally:
        await connection.close()


def test_a_url_shows_without_its_password() -> None:
    assert redacted("postgresql://ann:pw@db.example:5432/cove") == (
        "postgresql://ann:***@db.example:5432/cove"
    )
    assert redacted("postgresql:///cove?host=/run/pg&password=pw&sslmode=require") == (
        "postgresql:///cove?host=/run/pg&password=***&sslmode=require"
    )
    assert redacted("postgresql://ann@db/cove") == "postgresql://ann@db/cove"


async def test_an_unreachable_server_is_a_clear_error_without_the_password() -> None:
    url = f"postgresql://cove:{SECRET}@/cove?host={quote('/nonexistent/socket')}"
    with pytest.raises(StoreError, match="cannot reach the PostgreSQL database") as refused:
        await Store.open(url)
    assert SECRET not in str(refused.value) and "***" in str(refused.value)


async def test_a_new_database_is_created_migrated_and_named_without_the_password(
    url: str,
) -> None:
    async with Store.open(url) as store:
        assert store.created and store.kind == "postgres"
        assert store.schema_version == latest_version()
        assert SECRET not in store.path
        conversation = await store.create_conversation(channel="cli")
        await add_turn(store, conversation.id, "what is the total")
    async with Store.open(url) as again:
        assert not again.created
        assert [t.request for t in await again.turns(conversation.id)] == ["what is the total"]


async def test_another_applications_database_is_refused_and_untouched(
    url: str, conn: asyncpg.Connection
) -> None:
    await conn.execute("CREATE TABLE invoices (id integer PRIMARY KEY, total numeric)")
    with pytest.raises(NotADatabase, match="another application") as refused:
        await Store.open(url)
    assert SECRET not in str(refused.value)
    tables = {
        r[0]
        for r in await conn.fetch("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
    }
    assert tables == {"invoices"}


async def test_a_database_from_a_newer_cove_is_refused_and_untouched(
    url: str, conn: asyncpg.Connection
) -> None:
    async with Store.open(url):
        pass
    newer = latest_version() + 1
    await conn.execute(
        "INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, 'future', 0)", newer
    )
    with pytest.raises(SchemaTooNew) as refused:
        await Store.open(url)
    assert refused.value.found == newer
    assert await conn.fetchval("SELECT max(version) FROM schema_migrations") == newer


async def test_reading_an_empty_database_creates_nothing(
    url: str, conn: asyncpg.Connection
) -> None:
    async with Store.open(url, read_only=True) as store:
        assert await store.list_conversations() == []
    assert await conn.fetchval("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'") == 0


async def test_a_read_only_store_writes_nothing(url: str) -> None:
    async with Store.open(url) as store:
        conversation = await store.create_conversation(channel="cli")
    async with Store.open(url, read_only=True) as reader:
        with pytest.raises(StoreError, match="read-only"):
            await reader.set_title(conversation.id, "renamed")
        assert (await reader.get_conversation(conversation.id)).title is None


async def test_a_commit_of_another_node_wakes_a_follower(url: str) -> None:
    async with Store.open(url) as here, Store.open(url) as there:
        conversation = await there.create_conversation(channel="cli")
        async with here.commits.use():
            await asyncio.sleep(0)  # the listener connects
            seen = here.commits.version
            version = seen
            while version == seen:  # the listener may have connected after the write
                await there.set_title(conversation.id, f"title {version}")
                version = await here.commits.wait(seen, timeout_s=5)
        assert version > seen


async def test_a_write_notifies_after_its_commit(url: str, conn: asyncpg.Connection) -> None:
    # The notification goes in a transaction of its own once the unit has committed (so
    # notifiers never queue behind one another's WAL flush): whoever it wakes reads the write.
    heard: asyncio.Queue[str] = asyncio.Queue()
    async with Store.open(url) as store:
        conversation = await store.create_conversation(channel="cli")
        # Listening from here on: only the notifications of later commits are heard.
        await conn.add_listener("cove_commit", lambda *args: heard.put_nowait(args[-1]))
        await store.set_title(conversation.id, "after the commit")
        await asyncio.wait_for(heard.get(), timeout=30)
        title = await conn.fetchval("SELECT title FROM conversation WHERE id = $1", conversation.id)
    assert title == "after the commit"


async def test_a_nul_a_block_printed_is_kept_as_a_replacement_character(url: str) -> None:
    async with Store.open(url) as store:
        conversation = await store.create_conversation(channel="cli")
        turn = await store.start_turn(conversation.id, "print a NUL")
        iteration = await store.start_iteration(
            turn.id, 0, system_prompt=SYSTEM_PROMPT, request_message="r", context_message="c"
        )
        block = BlockResult(position=0, code="print('a\\x00b')", ok=True, stdout="a\x00b\n")
        await store.record_block(iteration, block)
        await store.finish_iteration(iteration, IterationWrite(status="ok"))
        await store.finish_turn(turn.id, TurnOutcome("done", answer="printed"))
        [recorded] = (await store.transcript(conversation.id)).turns[0].iterations[0].blocks
    assert recorded.stdout == "a\ufffdb\n"


async def _waiting_on_a_lock(conn: asyncpg.Connection) -> None:
    """Return once some other session of the server waits for a row lock."""
    while not await conn.fetchval(  # noqa: ASYNC110 (the server's state: no event to wait on)
        "SELECT count(*) FROM pg_stat_activity"
        " WHERE wait_event_type = 'Lock' AND pid <> pg_backend_pid()"
    ):
        await asyncio.sleep(0.01)


@pytest.mark.parametrize("takeover", ["commits", "rolls back"])
async def test_a_guarded_iteration_write_waits_for_a_takeover_in_progress(
    url: str, conn: asyncpg.Connection, takeover: str
) -> None:
    # The check rides in the write (INSERT ... SELECT ... FOR UPDATE OF the conversation): a
    # takeover that has updated the lease but not committed holds the row, so the write waits,
    # then lands only if the lease is still the one it was issued under.
    async with Store.open(url) as store:
        conversation = await store.create_conversation(channel="cli")
        fence = Fence(conversation.id, "a", await store.acquire_lease(conversation.id, "a", 30.0))
        with fenced(fence):
            turn = await store.start_turn(conversation.id, "q")
            iteration = await store.start_iteration(
                turn.id, 0, system_prompt=SYSTEM_PROMPT, request_message="r", context_message="c"
            )
        other = conn.transaction()
        await other.start()
        await conn.execute(
            "UPDATE conversation SET lease_owner = 'b', lease_epoch = lease_epoch + 1"
            " WHERE id = $1",
            conversation.id,
        )
        with fenced(fence):
            write = asyncio.ensure_future(
                store.record_block(iteration, BlockResult(position=0, code="x = 1", ok=True))
            )
        watcher = await asyncpg.connect(url)  # a third session sees the write wait
        try:
            waiting = asyncio.ensure_future(_waiting_on_a_lock(watcher))
            await asyncio.wait({write, waiting}, return_when=asyncio.FIRST_COMPLETED)
            waiting.cancel()
            await asyncio.gather(waiting, return_exceptions=True)
        finally:
            await watcher.close()
        assert not write.done(), "the write did not wait for the takeover's row lock"
        await (other.commit() if takeover == "commits" else other.rollback())
        await asyncio.gather(write, return_exceptions=True)
        blocks = await conn.fetchval("SELECT count(*) FROM block")

    if takeover == "commits":
        assert isinstance(write.exception(), Busy)
        assert "epoch 1 was refused" in str(write.exception())
        assert blocks == 0
    else:
        assert write.exception() is None
        assert blocks == 1
