"""What channels read of a conversation's variables: current versions, a variable's history,
a version's value in full and the diff of two versions (real store and workers)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cove.conversation import Conversations
from cove.errors import NotFound
from tests.scripted import settings_for


async def execute(convs: Conversations, cid: str, code: str) -> None:
    async for _ in convs.execute(cid, code):
        pass


async def test_a_version_reads_in_full_and_two_versions_diff(tmp_path: Path) -> None:
    async with Conversations.open(settings_for(tmp_path)) as convs:
        conv = await convs.create()
        await execute(convs, conv.id, "rows = [{'n': i, 'sq': i * i} for i in range(300)]")
        await execute(convs, conv.id, "rows[150]['sq'] = -1")
        await execute(convs, conv.id, "def area(r):\n    return 3.14 * r * r")

        current, text = await convs.var_text(conv.id, "rows")
        assert current.version == 2
        assert "{'n': 299, 'sq': 89401}" in text and len(text) > len(current.preview)
        first, old = await convs.var_text(conv.id[:8], "rows", 1)
        assert first.version == 1 and "{'n': 150, 'sq': 22500}" in old
        _, source = await convs.var_text(conv.id, "area")
        assert source == "def area(r):\n    return 3.14 * r * r"

        diff = await convs.var_diff(conv.id, "rows", 1, 2)
        assert "-{'n': 150, 'sq': 22500}\n+{'n': 150, 'sq': -1}" in diff
        assert [v.version for v in await convs.var_history(conv.id, "rows")] == [1, 2]
        assert set(await convs.variables(conv.id)) == {"rows", "area"}


async def test_unknown_names_and_versions_are_not_found(tmp_path: Path) -> None:
    async with Conversations.open(settings_for(tmp_path)) as convs:
        conv = await convs.create()
        await execute(convs, conv.id, "x = 1")
        with pytest.raises(NotFound, match="has no variable 'nope'"):
            await convs.var_text(conv.id, "nope")
        with pytest.raises(NotFound, match="variable 'x' has no version 7"):
            await convs.var_text(conv.id, "x", 7)
        with pytest.raises(NotFound, match="variable 'x' has no version 3"):
            await convs.var_diff(conv.id, "x", 1, 3)
        with pytest.raises(NotFound):
            await convs.variables("0" * 32)
