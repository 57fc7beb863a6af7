"""How many environments a process keeps live: the setting, within its open-file limit (raised
as far as the setting needs), and what one live environment really holds open."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from cove.conversation import Conversations, scripted_factory
from cove.conversation.memory import (
    FILES_PER_ENVIRONMENT,
    FILES_RESERVED,
    environments_within,
)
from tests.scripted import reply, settings_for

ONE_BACKEND = True  # open files are the host process's, whatever the store

INFINITY = resource.RLIM_INFINITY


@pytest.mark.parametrize(
    ("open_files", "wanted", "capacity"),
    [
        (FILES_RESERVED + 256 * FILES_PER_ENVIRONMENT, 256, 256),
        (1024, 256, 192),
        (20_000, 256, 256),
        (300, 32, 11),
        (100, 8, 1),  # always one, or no turn could run
        (INFINITY, 256, 256),
    ],
)
def test_the_open_file_limit_bounds_the_live_environments(
    open_files: int, wanted: int, capacity: int
) -> None:
    assert environments_within(open_files, wanted) == capacity


PROBE = """
import json, logging, resource, sys
from cove.conversation.memory import live_capacity
logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
capacity = live_capacity(int(sys.argv[1]))
print(json.dumps([capacity, *resource.getrlimit(resource.RLIMIT_NOFILE)]))
"""


def capacity_under(soft: int, hard: int, wanted: int) -> tuple[list[int], str]:
    """``live_capacity(wanted)`` in a fresh process started with that open-file limit: the
    capacity and the limits it leaves, and what it logged."""

    def limited() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))

    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(wanted)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
        preexec_fn=limited,
    )
    return json.loads(done.stdout), done.stderr


def test_a_process_raises_its_soft_limit_as_far_as_the_setting_needs() -> None:
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard != INFINITY and hard < 4096:
        pytest.skip(f"the hard open-file limit here is {hard}")
    (capacity, new_soft, new_hard), logged = capacity_under(1024, 4096, 256)
    assert (capacity, new_soft, new_hard) == (256, 1280, 4096)
    assert logged == ""


def test_a_hard_limit_too_low_caps_the_live_environments_and_says_so() -> None:
    (capacity, new_soft, new_hard), logged = capacity_under(300, 300, 256)
    assert (capacity, new_soft, new_hard) == (11, 300, 300)
    assert "at most 11 live environments, not 256" in logged
    assert "open-file limit (300)" in logged


async def test_a_live_environment_holds_no_more_open_files_than_counted(tmp_path: Path) -> None:
    settings = settings_for(tmp_path, max_live_environments=16)
    count = 6
    factory = scripted_factory([reply(["x = 1"], "ok")] * count)
    async with await Conversations.open(settings, llm_factory=factory) as convs:
        first = await convs.create()
        await convs.send(first.id, "go").finished()  # the pool, the store: opened once
        before = len(os.listdir("/proc/self/fd"))
        for _ in range(count - 1):
            conv = await convs.create()
            await convs.send(conv.id, "go").finished()
        assert convs.stats().live_environments == count
        held = len(os.listdir("/proc/self/fd")) - before
    assert held <= (count - 1) * FILES_PER_ENVIRONMENT, f"{held} files for {count - 1}"
