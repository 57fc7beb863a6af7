"""``Reading`` alone on a store (``open_reading``): what the inspection commands see is what
``Conversations`` sees, nothing is written, and the package's names are imported on first use."""

from __future__ import annotations

import asyncio
import importlib
from pathlib import Path

import pytest

import cove.conversation
from cove.conversation import Conversations, Reading, open_reading
from cove.errors import CoveError, NotFound
from tests.scripted import settings_for


async def test_a_reading_sees_what_the_conversations_wrote(tmp_path: Path) -> None:
    settings = settings_for(tmp_path)
    async with Conversations.open(settings) as convs:
        conv = await convs.create(title="primes")
        async for _ in convs.execute(conv.id, "primes = [2, 3, 5]"):
            pass
        async for _ in convs.execute(conv.id, "primes.append(7)"):
            pass
        written = await convs.inspect(conv.id)
    async with open_reading(settings) as reading:
        assert [r.id for r in await reading.list()] == [conv.id]
        assert (await reading.get(conv.id[:8])).label == "primes"
        transcript = await reading.inspect(conv.id)
        assert [t.position for t in transcript.turns] == [t.position for t in written.turns]
        assert [b.code for t in transcript.turns for it in t.iterations for b in it.blocks] == [
            "primes = [2, 3, 5]",
            "primes.append(7)",
        ]
        assert (await reading.variables(conv.id))["primes"].version == 2
        assert [v.version for v in await reading.var_history(conv.id, "primes")] == [1, 2]
        assert await reading.approvals(conv.id) == []
        assert (await reading.history(conv.id)).versions == 2
        with pytest.raises(NotFound):
            await reading.inspect(conv.id, turn=9)


async def test_a_reading_of_a_missing_database_is_empty_and_creates_nothing(
    tmp_path: Path,
) -> None:
    settings = settings_for(tmp_path)
    async with open_reading(settings) as reading:
        assert await reading.list() == []
        with pytest.raises(NotFound):
            await reading.get("abc")
    if "://" not in settings.store.database:  # a SQLite file: not created
        assert not await asyncio.to_thread(Path(settings.store.database).exists)


async def test_a_closed_reading_refuses_to_read(tmp_path: Path) -> None:
    reading = await open_reading(settings_for(tmp_path))
    await reading.aclose()
    await reading.aclose()  # idempotent
    with pytest.raises(CoveError, match="Reading is closed"):
        await reading.list()


def test_every_public_name_is_imported_from_its_module_on_first_use() -> None:
    for name in cove.conversation.__all__:
        source = cove.conversation._SOURCES[name]
        assert getattr(cove.conversation, name) is getattr(importlib.import_module(source), name)
    assert set(cove.conversation.__all__) == set(cove.conversation._SOURCES)
    assert issubclass(Conversations, Reading)
    with pytest.raises(AttributeError, match="no attribute 'Nothing'"):
        _ = cove.conversation.Nothing
