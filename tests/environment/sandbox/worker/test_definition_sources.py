"""The source recorded for a function or class is the one of the statement that made it.

A block may hold several statements binding the same name (branches, handlers, loops that never
run, a name re-bound to another function); only the one that ran made the live object. After a
restart or a restore from snapshots (what reopening a conversation does), every name must behave
exactly as it did live.
"""

from __future__ import annotations

import pytest

from cove.environment.sandbox.host.client import SandboxClient
from tests.environment.conftest import ok

SHAPES = {
    "if/else": (
        "if True:\n    def f():\n        return 'good'\nelse:\n    def f():\n        return 'evil'"
    ),
    "try/except": (
        "try:\n    def f():\n        return 'good'\nexcept Exception:\n"
        "    def f():\n        return 'evil'"
    ),
    "try/except/else": (
        "try:\n    pass\nexcept Exception:\n    def f():\n        return 'evil'\n"
        "else:\n    def f():\n        return 'good'"
    ),
    "loop that never runs": (
        "def f():\n    return 'good'\nwhile False:\n    def f():\n        return 'evil'"
    ),
    "name re-bound to another function": (
        "def f():\n    return 'good'\ndef h():\n    return 'evil'\nh = f"
    ),
    "class in a branch": (
        "if False:\n    class K:\n        v = 'evil'\nelse:\n    class K:\n        v = 'good'\n"
        "def f():\n    return K.v"
    ),
    "lambda in a branch": ("if 1 > 2:\n    f = lambda: 'evil'\nelse:\n    f = lambda: 'good'"),
    "decorated, then re-bound": (
        "def deco(fn):\n    return fn\n@deco\ndef g():\n    return 'evil'\n"
        "@deco\ndef f():\n    return 'good'\ng = f"
    ),
}


async def _calls(client: SandboxClient, names: list[str]) -> str | None:
    probe = "[" + ", ".join(f"{name}()" for name in names) + "]"
    return (await ok(client, probe)).value_preview


def _names(shape: str) -> list[str]:
    return ["f", "h"] if "h = f" in SHAPES[shape] else ["f"]


@pytest.mark.parametrize("shape", list(SHAPES))
async def test_a_restarted_worker_runs_the_definition_that_ran(
    shape: str, client: SandboxClient
) -> None:
    await ok(client, SHAPES[shape])
    live = await _calls(client, _names(shape))
    assert live is not None and "evil" not in live
    await client.kill()
    assert await _calls(client, _names(shape)) == live


@pytest.mark.parametrize("shape", list(SHAPES))
async def test_a_restore_from_snapshots_runs_the_definition_that_ran(
    shape: str, client: SandboxClient
) -> None:
    await ok(client, SHAPES[shape])
    live = await _calls(client, _names(shape))
    snapshots = list(client.snapshots().values())
    for snapshot in snapshots:
        assert "evil" not in (snapshot.encoded or ""), snapshot.name
    report = await client.restore(snapshots, imports=client.imports())
    assert report.lost == ()
    assert await _calls(client, _names(shape)) == live
