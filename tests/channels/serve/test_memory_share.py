"""Several processes share the live environments' memory budget instead of each taking it."""

from __future__ import annotations

from pathlib import Path

from cove.channels.serve.service import memory_shared
from cove.conversation.memory import live_memory_budget
from tests.scripted import settings_for


def test_the_budget_is_divided_among_the_processes(tmp_path: Path) -> None:
    given = settings_for(tmp_path, live_memory_mb=1000)
    assert memory_shared(given, 2).sandbox.live_memory_mb == 500
    assert memory_shared(given, 3).sandbox.live_memory_mb == 333
    assert memory_shared(given, 2).sandbox.block_timeout_s == given.sandbox.block_timeout_s

    default = settings_for(tmp_path)  # 0: a share of the machine's memory
    machine_share_mb = live_memory_budget(0) // (1024 * 1024)
    assert memory_shared(default, 4).sandbox.live_memory_mb == machine_share_mb // 4
