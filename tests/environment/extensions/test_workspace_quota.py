"""The per-conversation workspace quota: every entry counts, and a write costs O(1).

Each file, directory and link costs its blocks on disk (at least its size) plus a fixed cost per
entry; the number of entries and the depth of paths are capped. The usage is measured once, then
kept up to date by every write cove makes, and measured again when the workspace's directory shows
that something else changed it (an upload, an attachment).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from cove import codec
from cove.config import Settings
from cove.conversation.workspaces import Workspaces
from cove.environment.extensions.files import write_file
from cove.environment.extensions.quota import ENTRY_BYTES, MAX_DEPTH, WorkspaceQuota, measure
from tests.environment.extensions.test_files import make_ctx, workspace
from tests.environment.test_environment import Harness

__all__ = ["workspace"]

KB = 1024
MB = 1024 * KB


def entries_under(root: Path) -> int:
    return sum(1 for _ in root.rglob("*"))


@pytest.fixture
async def small(tmp_path: Path) -> AsyncIterator[Harness]:
    """An environment harness whose workspaces hold at most 1 MB."""
    async with Harness.running(tmp_path, workspace_quota_mb=1) as h:
        yield h


FLOOD = """
made = 0
refusal = None
try:
    for i in range({count}):
        write_file({path}, "")
        made += 1
except ExtensionError as exc:
    refusal = str(exc)
[made, refusal]
"""


@pytest.mark.slow
@pytest.mark.parametrize(
    ("what", "path"),
    [("directories", "'d' + str(i) + '/x'"), ("empty files", "'e' + str(i)")],
)
async def test_a_flood_of_small_entries_stops_at_the_quota(
    small: Harness, what: str, path: str
) -> None:
    env = await small.open()
    count = 6003 if what == "directories" else 3000
    # Thousands of host round trips: given time to spare on a loaded machine.
    ran = await small.turn(env, FLOOD.format(count=count, path=path), timeout_s=60)
    outcome = ran[0][0]
    assert outcome.result.ok, outcome.result.error
    made, refusal = codec.decode(outcome.result.result_encoded or "")
    assert refusal is not None and "workspace quota of 1 MB would be exceeded" in refusal
    per_write = (2 if what == "directories" else 1) * ENTRY_BYTES
    assert made <= MB // per_write  # each write made at least that much
    assert entries_under(small.workspace) <= MB // ENTRY_BYTES
    assert env.quota.measurements == 1  # measured once; every write after that was counted
    await env.aclose()


@pytest.mark.slow
async def test_a_deep_path_is_refused_before_anything_is_made(small: Harness) -> None:
    env = await small.open()
    ran = await small.turn(
        env, "try:\n    write_file('a/' * 6003 + 'x', '')\nexcept ExtensionError as exc:\n"
        "    refusal = str(exc)\nrefusal",
    )  # fmt: skip
    assert f"at most {MAX_DEPTH} parts" in codec.decode(ran[0][0].result.result_encoded or "")
    assert entries_under(small.workspace) == 0
    await env.aclose()


async def test_writes_stop_at_the_workspace_quota(workspace: Path) -> None:
    ctx = make_ctx(workspace, workspace_quota_mb=2, worker_file_size_mb=1)
    assert await write_file(ctx, "a.bin", b"x" * MB) == MB
    assert await write_file(ctx, "sub/b.bin", b"x" * (MB - 20 * KB)) == MB - 20 * KB
    with pytest.raises(OSError, match="workspace quota of 2 MB would be exceeded"):
        await write_file(ctx, "c.bin", b"x" * 20 * KB)
    assert not (workspace / "c.bin").exists()
    # Overwriting a file counts only the difference; small writes still fit.
    assert await write_file(ctx, "a.bin", b"y" * (MB - 20 * KB)) == MB - 20 * KB
    assert await write_file(ctx, "d.txt", "0123456789") == 10
    assert ctx.quota is not None
    assert ctx.quota.usage() == measure(workspace, limit=1000)
    assert ctx.quota.measurements == 1


async def test_every_kind_of_entry_counts(workspace: Path) -> None:
    (workspace / "empty").touch()
    (workspace / "dir").mkdir()
    (workspace / "link").symlink_to("empty")
    usage = measure(workspace, limit=1000)
    assert usage.entries == 3
    assert usage.bytes >= 3 * ENTRY_BYTES + 4 * KB  # the directory holds at least a block


async def test_the_number_of_entries_is_capped(workspace: Path) -> None:
    ctx = make_ctx(workspace, workspace_max_entries=10)
    for i in range(5):
        await write_file(ctx, f"d{i}/f", "x")
    with pytest.raises(OSError, match="at most 10 files and directories"):
        await write_file(ctx, "one/more", "x")
    assert entries_under(workspace) == 10
    await write_file(ctx, "d0/f", "overwriting adds no entry")


async def test_changes_made_by_others_are_noticed(workspace: Path, tmp_path: Path) -> None:
    ctx = make_ctx(workspace, workspace_quota_mb=1)
    quota = ctx.quota
    assert quota is not None
    await write_file(ctx, "notes.txt", "x")
    before = quota.usage()
    # An attachment lands in the workspace, as a channel saves it.
    workspaces = Workspaces(workspace.parent, ctx.settings)
    await workspaces.save_attachments(workspace.name, [("data.csv", b"x" * 600 * KB)])
    assert quota.usage().bytes >= before.bytes + 600 * KB
    with pytest.raises(OSError, match="quota"):
        await write_file(ctx, "more.bin", b"x" * 500 * KB)
    # Saved again under the same name (bigger, in place): noticed too.
    await workspaces.save_attachments(workspace.name, [("data.csv", b"x" * 900 * KB)])
    assert quota.usage().bytes >= before.bytes + 900 * KB
    assert quota.measurements == 3


def test_a_quota_measures_lazily(workspace: Path) -> None:
    settings = Settings.load(
        env={}, sandbox_libraries=False, data_dir=workspace.parent / "data"
    ).sandbox
    quota = WorkspaceQuota(workspace, settings)
    assert quota.measurements == 0
    assert quota.usage().entries == 0
    assert quota.usage().entries == 0
    assert quota.measurements == 1
