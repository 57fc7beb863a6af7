"""Variable names from a worker are hostile input: the host checks every one before it believes it.

A name reaches the database, the prompt of the next model call and every channel's display. A
worker taken over by its code could send anything as a name: terminal escapes, 300 KB, the name
of an extension constant the host sets itself. The host accepts only what a well-behaved worker
can send — a public identifier of at most 100 characters that no extension uses — and treats
anything else as a protocol error: the worker is replaced and its variables restored.

The hostile worker here is a real one running unrestricted Python (``assume_breach``), which
writes forged frames straight to its pipe.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from cove.config import SandboxSettings
from cove.environment.sandbox.host.client import SandboxClient
from cove.environment.sandbox.host.pool import WorkerPool
from cove.results import VarVersion
from tests.environment.conftest import Extensions, ok, run

# The runtime was made in the zygote, whose objects are frozen (out of gc.get_objects' sight).
FIND_RUNTIME = (
    "import gc\ngc.unfreeze()\n"
    "runtime = next(o for o in gc.get_objects() if type(o).__name__ == 'Runtime')\n"
)


def forge_reply(changes: list[dict[str, Any]], imports: dict[str, Any] | None = None) -> str:
    """Breach code after which the worker answers the block with a forged ``done`` frame."""
    frame = {
        "op": "done", "ok": True, "error_type": None, "error": None, "stdout": "",
        "fatal": False, "value_preview": None, "value_encoded": None, "changes": changes,
        "imports": imports or {},
    }  # fmt: skip
    # The worker sends what runtime.execute returns: answer this block with the frame, once.
    return FIND_RUNTIME + (
        "def forged(*args):\n"
        "    del runtime.execute\n"
        f"    return {frame!r}\n"
        "runtime.execute = forged\n"
    )


def change(name: str) -> dict[str, Any]:
    return {"name": name, "kind": "value", "encoded": "1", "type_name": "int", "preview": "1"}


FORGED_NAMES = {
    "terminal escape": "x\x1b]52;c;cm0gLXJmIH4=\x07",
    "newline": "x\ny",
    "300 KB": "a" * 300_000,
    "101 characters": "a" * 101,
    "an extension constant": "REQUEST",
    "an extension function": "add",
    "private": "_hidden",
    "not an identifier": "x y",
    "empty": "",
    "a keyword": "class",
}


@pytest.fixture
async def breached(
    sandbox_settings: SandboxSettings, tmp_path: Path, extensions: Extensions
) -> AsyncIterator[SandboxClient]:
    """A configured client whose workers run unrestricted Python."""
    pool = WorkerPool(sandbox_settings, size=0, assume_breach=True)
    try:
        client = await pool.acquire(workspace=tmp_path / "workspace", on_call=extensions)
        await client.configure(functions=Extensions.names, constants={"REQUEST": "a request"})
        yield client
    finally:
        await pool.aclose()


async def test_well_formed_names_pass(breached: SandboxClient) -> None:
    outcome = await run(breached, forge_reply([change("a" * 100), change("plain")]))
    assert outcome.restart is None, outcome.result.error
    assert {"a" * 100, "plain"} <= breached.snapshots().keys()


@pytest.mark.parametrize("case", list(FORGED_NAMES))
async def test_a_forged_variable_name_is_a_protocol_error(
    case: str, breached: SandboxClient
) -> None:
    await run(breached, forge_reply([change("kept")]))
    worker = breached.pid
    outcome = await run(breached, forge_reply([change(FORGED_NAMES[case])]))
    assert not outcome.result.ok
    assert outcome.restart is not None and outcome.restart.reason == "protocol"
    assert breached.pid != worker
    assert set(breached.snapshots()) == {"kept"}
    assert "kept" in outcome.restart.restored


@pytest.mark.parametrize(
    "imports",
    [
        {"x\x1b[2J": ["math", None]},
        {"REQUEST": ["math", None]},
        {"m": ["\x1b]0;title\x07", None]},
        {"m": ["math", "floor\x1b[2J"]},
        {"m": ["math", "_private"]},
        {"m": ["m" * 300_000, None]},
    ],
    ids=["escape in the name", "extension name", "escape in the module", "escape in the member",
         "private member", "300 KB module"],
)  # fmt: skip
async def test_a_forged_import_binding_is_a_protocol_error(
    imports: dict[str, Any], breached: SandboxClient
) -> None:
    outcome = await run(breached, forge_reply([], imports))
    assert outcome.restart is not None and outcome.restart.reason == "protocol"
    assert breached.imports() == {}


async def test_a_forged_restore_reply_is_a_protocol_error(breached: SandboxClient) -> None:
    # The worker's next restore is answered by a forged handler.
    await run(
        breached,
        FIND_RUNTIME
        + "runtime.restore = lambda *args: {'op': 'restored', 'restored': ['x\\x1b[2J', 'n'], "
        "'lost': ['REQUEST']}\n"
        "result = 'patched'\n",
    )
    worker = breached.pid
    snapshots = [VarVersion("n", "value", "1", "int", "1")]
    report = await breached.restore(snapshots)
    assert breached.pid != worker  # replaced, and restored by a worker that kept to protocol
    assert report.restored == ("n",) and report.lost == ()


async def test_the_sandbox_cannot_bind_what_the_host_would_refuse(client: SandboxClient) -> None:
    refused = {
        "an extension constant": "REQUEST = 1",
        "an extension function": "add = 2",
        "a loop variable": "for add in [1]:\n    pass",
        "an import alias": "import math as echo",
        "a definition": "def explode():\n    return 1",
        "a global statement": "def f():\n    global REQUEST\n    REQUEST = 1",
        "a walrus in a comprehension": "[(add := i) for i in [1]]",
        "a long name": "a" * 101 + " = 1",
    }
    for what, code in refused.items():
        outcome = await run(client, code)
        assert not outcome.result.ok, what
        assert outcome.result.error is not None and "name" in outcome.result.error, what
        assert outcome.restart is None and outcome.changes == (), what
    allowed = await ok(
        client, "def f():\n    add = 1\n    return add\n" + "b" * 100 + " = f()\nadd(REQUEST, '!')"
    )
    assert allowed.result.result_preview == "'what is 6*7?!'"
    assert {c.name for c in allowed.changes} == {"f", "b" * 100}


async def test_stored_variables_with_names_the_rule_refuses_are_lost(client: SandboxClient) -> None:
    # A database written before the rule (or edited) may hold them; they never reach the sandbox.
    long = "a" * 101
    snapshots = [VarVersion(name, "value", "1", "int", "1") for name in ("REQUEST", long, "n")]
    report = await client.restore(snapshots, imports={"echo": ("math", None), "m": ("math", None)})
    assert report.restored == ("n",) and set(report.lost) == {"REQUEST", long}
    outcome = await ok(client, "[REQUEST, n, m.floor(2.5), echo(1)]")
    assert outcome.result.result_preview == "['what is 6*7?', 1, 2, {'args': [1], 'kwargs': {}}]"
    assert set(client.imports()) == {"m"}


async def test_the_host_serves_no_extension_call_during_a_restore(
    breached: SandboxClient, extensions: Extensions
) -> None:
    await run(
        breached,
        FIND_RUNTIME + "def restore(*args):\n"
        "    try:\n"
        "        runtime.call_extension('echo', ('during a restore',), {})\n"
        "    except Exception as exc:\n"
        "        refused.append(str(exc))\n"
        "    return {'op': 'restored', 'restored': [], 'lost': []}\n"
        "refused = []\n"
        "runtime.restore = restore\n",
    )
    await breached.restore([])
    assert extensions.calls == []
