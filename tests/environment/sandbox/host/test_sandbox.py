"""The sandbox on real worker processes: values, definitions, changes, restarts, extensions."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cove import codec
from cove.config import SandboxSettings, Settings
from cove.environment.sandbox.host.client import SandboxClient
from cove.environment.sandbox.host.pool import WorkerPool
from cove.errors import SandboxError
from tests.environment.conftest import CLOCK, Extensions, ok, read_proc, run


async def test_trailing_expression_is_the_block_value(client: SandboxClient) -> None:
    outcome = await ok(client, "x = 20\nx + 22")
    assert outcome.result.result_preview == "42"
    assert (
        outcome.result.result_encoded is not None
        and codec.decode(outcome.result.result_encoded) == 42
    )
    assert (await ok(client, "y = 1")).result.result_preview is None
    assert (await ok(client, "None")).result.result_preview is None


async def test_values_functions_and_classes_survive_across_blocks(client: SandboxClient) -> None:
    await ok(client, "data = {'a': [1, 2]}\ndef double(v, k=2):\n    return v * k")
    await ok(
        client,
        "class Point:\n    def __init__(self, x):\n        self.x = x\n"
        "    def norm(self):\n        return abs(self.x)",
    )
    outcome = await ok(client, "double(len(data['a'])), Point(-3).norm()")
    assert outcome.result.result_preview == "(4, 3)"
    snapshots = client.snapshots()
    assert snapshots["double"].kind == "function"
    assert snapshots["double"].signature == "double(v, k=2)"
    assert snapshots["Point"].kind == "function"
    assert snapshots["data"].kind == "value"


async def test_changes_report_creation_mutation_and_deletion(client: SandboxClient) -> None:
    created = await ok(client, "xs = [1]\nn = 5")
    assert {(c.name, c.kind) for c in created.changes} == {("xs", "value"), ("n", "value")}
    mutated = await ok(client, "xs.append(2)")
    assert [(c.name, codec.decode(c.encoded or "")) for c in mutated.changes] == [("xs", [1, 2])]
    assert (await ok(client, "n = 5")).changes == ()  # same value, no change
    deleted = await ok(client, "del n")
    assert [(c.name, c.kind) for c in deleted.changes] == [("n", "deleted")]
    assert "n" not in client.snapshots()


async def test_a_failing_block_still_reports_what_it_changed(client: SandboxClient) -> None:
    outcome = await run(client, "before = 1\n1 / 0\nafter = 2")
    assert not outcome.result.ok
    assert outcome.result.error == "ZeroDivisionError: division by zero (line 2)"
    assert outcome.error_type == "ZeroDivisionError"
    assert [c.name for c in outcome.changes] == ["before"]


async def test_imports_are_not_variables_and_survive_a_restart(client: SandboxClient) -> None:
    outcome = await ok(client, "import math\nfrom statistics import mean as avg\nm = math")
    assert outcome.changes == ()
    await client.kill()
    assert (await ok(client, "math.floor(avg([1, 2]))")).result.result_preview == "1"


async def test_extension_functions_and_constants_are_not_variables(client: SandboxClient) -> None:
    outcome = await ok(client, "r = REQUEST\nf = add")
    assert [c.name for c in outcome.changes] == ["r"]
    assert (await ok(client, "f(1, 2)")).result.result_preview == "3"


async def test_variables_survive_a_kill_and_restore(client: SandboxClient) -> None:
    await ok(client, "total = 41\ndef inc(v):\n    return v + 1\nalias = inc")
    await ok(client, "class Box:\n    def __init__(self, v):\n        self.v = v")
    old_pid = client.pid
    await client.kill()
    assert client.pid != old_pid
    outcome = await ok(client, "inc(total), alias(1), Box(3).v")
    assert outcome.result.result_preview == "(42, 2, 3)"


async def test_decorated_definitions_are_restored(client: SandboxClient) -> None:
    await ok(
        client,
        "from dataclasses import dataclass\n@dataclass\nclass Item:\n    name: str\n"
        "    qty: int = 1\nsquare = lambda v: v * v",
    )
    await client.kill()
    assert (await ok(client, "Item('x').qty + square(3)")).result.result_preview == "10"


async def test_opaque_values_are_reported_and_lost_after_a_restart(client: SandboxClient) -> None:
    outcome = await ok(client, "gen = (i for i in range(3))\nkeep = 'yes'")
    gen = next(c for c in outcome.changes if c.name == "gen")
    assert gen.kind == "opaque" and gen.encoded is None and gen.type_name == "generator"
    outcome = await run(client, "while True:\n    pass", timeout_s=1.0)
    assert outcome.restart is not None
    assert outcome.restart.lost == ("gen",)
    assert "keep" in outcome.restart.restored
    assert "gen" not in client.snapshots()
    assert (await ok(client, "keep")).result.result_preview == "'yes'"


async def test_values_over_the_value_limit_are_opaque(tmp_path: Path) -> None:
    settings = Settings.load(
        env={}, sandbox_libraries=False, data_dir=tmp_path, value_limit_mb=1
    ).sandbox
    workers = WorkerPool(settings, size=0)
    try:
        sandbox = await workers.acquire(workspace=tmp_path / "w", on_call=Extensions())
        outcome = await ok(sandbox, "big = 'x' * 2_000_000\nsmall = 'x'")
        big = next(c for c in outcome.changes if c.name == "big")
        assert (big.kind, big.encoded, big.size) == ("opaque", None, 2_000_000)
    finally:
        await workers.aclose()


async def test_restore_rebuilds_exactly_the_given_snapshots(
    pool: WorkerPool, client: SandboxClient, extensions: Extensions, tmp_path: Path
) -> None:
    await ok(client, "a = [1, 2]\ndef f(v):\n    return v * 10\ng = (i for i in [])")
    saved = list(client.snapshots().values())
    other = await pool.acquire(workspace=tmp_path / "other", on_call=extensions)
    await ok(other, "stale = 1")
    report = await other.restore(saved)
    assert report.reason == "restore"
    assert set(report.restored) == {"a", "f"} and report.lost == ("g",)
    assert set(other.snapshots()) == {"a", "f"}
    assert (await ok(other, "f(a[1])")).result.result_preview == "20"
    assert not (await run(other, "stale")).result.ok
    # Restored variables are not reported again as changes.
    assert (await ok(other, "b = 1")).changes[0].name == "b"


async def test_extension_calls_sync_and_async(
    client: SandboxClient, extensions: Extensions
) -> None:
    outcome = await ok(client, "s = add(1, 2) + slow_add(3, 4)\necho(1, 'two', k=[3])\n")
    assert codec.decode(outcome.result.result_encoded or "") == {
        "args": [1, "two"],
        "kwargs": {"k": [3]},
    }
    assert [name for name, _, _ in extensions.calls] == ["add", "slow_add", "echo"]
    assert client.snapshots()["s"].preview == "10"


async def test_time_spent_in_extension_calls_does_not_count_against_the_block(
    client: SandboxClient,
) -> None:
    outcome = await ok(client, "waited = wait(0.6) + wait(0.6)\nwaited", timeout_s=1.0)
    assert outcome.result.result_preview == "1.2"
    spinning = await run(client, "x = wait(0.6)\nwhile True:\n    pass", timeout_s=1.0)
    assert spinning.result.timed_out and spinning.restart is not None
    assert spinning.result.duration_ms < 4000


async def test_extension_errors_surface_as_block_errors(client: SandboxClient) -> None:
    outcome = await run(client, "x = 1\nexplode()")
    assert not outcome.result.ok
    assert outcome.result.error == "ExtensionError: ValueError: the gauge is broken (line 2)"
    caught = await ok(client, "try:\n    explode()\nexcept ExtensionError as e:\n    m = str(e)\nm")
    assert caught.result.result_preview == "'ValueError: the gauge is broken'"
    unencodable = await run(client, "blob()")
    assert not unencodable.result.ok and "CodecError" in (unencodable.result.error or "")
    bad_args = await run(client, "echo((i for i in []))")
    assert not bad_args.result.ok and (bad_args.result.error or "").startswith(
        "TypeError: the arguments of echo"
    )


async def test_print_is_captured_and_capped_with_a_marker(client: SandboxClient) -> None:
    outcome = await ok(client, "print('hello', 42)\nfor i in range(1000):\n    print('line', i)")
    assert outcome.result.stdout.startswith("hello 42\nline 0\n")
    assert outcome.result.stdout.endswith("[… output cut at 500 chars]\n")
    assert len(outcome.result.stdout) < 600


async def test_print_inside_functions_goes_to_the_same_output(client: SandboxClient) -> None:
    await ok(client, "def shout(v):\n    print(v.upper())")
    assert (await ok(client, "shout('a')\nshout('b')")).result.stdout == "A\nB\n"


async def test_seeds_make_random_reproducible_across_workers(
    pool: WorkerPool, client: SandboxClient, extensions: Extensions, tmp_path: Path
) -> None:
    code = "import random, uuid\n(random.random(), random.randint(1, 10**9), str(uuid.uuid4()))"
    first = await ok(client, code, seed=123)
    other = await pool.acquire(workspace=tmp_path / "other", on_call=extensions)
    again = await ok(other, code, seed=123)
    assert first.result.result_preview == again.result.result_preview
    assert (await ok(other, code, seed=124)).result.result_preview != first.result.result_preview
    assert (await ok(client, code, seed=123)).result.result_preview == first.result.result_preview


async def test_the_recorded_clock_is_seen(client: SandboxClient) -> None:
    outcome = await ok(
        client,
        "import datetime, time\nfrom datetime import date\n"
        "(datetime.datetime.now().isoformat(), date.today().isoformat(), time.time(),"
        " datetime.datetime(2000, 1, 1).now().year)",
    )
    assert (
        outcome.result.result_preview == "('2023-11-14T22:13:20', '2023-11-14', 1700000000.0, 2023)"
    )
    later = await ok(client, "time.time()", clock=CLOCK + 60)
    assert later.result.result_preview == "1700000060.0"


async def test_errors_carry_line_numbers_and_no_host_paths(client: SandboxClient) -> None:
    await ok(client, "import json\ndef parse(t):\n    return json.loads(t)")
    outcome = await run(client, "a = 1\nparse('{bad')")
    assert outcome.result.error is not None and outcome.result.error.startswith("JSONDecodeError: ")
    assert outcome.result.error.endswith("(line 3)")  # the innermost sandbox line: inside parse()
    assert "/" not in outcome.result.error and ".py" not in outcome.result.error
    syntax = await run(client, "x = (1,\ny = 2")
    assert syntax.error_type == "SyntaxError" and "(line 1)" in (syntax.result.error or "")
    policy = await run(client, "\n\nx = ().__class__")
    assert policy.result.error is not None and policy.result.error.startswith("SyntaxError: ")
    assert policy.result.error.endswith("(line 3)")


async def test_system_exit_and_keyboard_interrupt_are_block_errors(client: SandboxClient) -> None:
    await ok(client, "kept = 1")
    pid = client.pid
    for code in ("raise BaseException('stop')", "exit()", "quit()"):
        assert not (await run(client, code)).result.ok
    assert client.pid == pid
    assert (await ok(client, "kept")).result.result_preview == "1"


async def test_worker_is_isolated_from_the_host(
    monkeypatch: pytest.MonkeyPatch, sandbox_settings: SandboxSettings, tmp_path: Path
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-host-secret")
    workers = WorkerPool(sandbox_settings, size=0)
    try:
        sandbox = await workers.acquire(workspace=tmp_path / "ws", on_call=Extensions())
        pid = sandbox.pid
        assert pid is not None
        environ = read_proc(pid, "environ").split(b"\0")
        assert set(filter(None, environ)) == {
            b"PYTHONHASHSEED=0",
            b"PYTHONUTF8=1",
            b"PYTHONDONTWRITEBYTECODE=1",
        }
        # A confined worker needs no file: it stays in "/" (of a root of its own, if it has one).
        confined = sandbox.confinement is not None and sandbox.confinement.enabled
        expected = "/" if confined else str(tmp_path / "ws")
        assert os.readlink(f"/proc/{pid}/cwd") == expected
        assert os.getpgid(pid) == pid  # its own process group
        assert sorted(int(fd) for fd in os.listdir(f"/proc/{pid}/fd")) == [0, 1, 2, 3, 4]
        assert os.readlink(f"/proc/{pid}/fd/1") == "/dev/null"
        limits = read_proc(pid, "limits").decode()
        assert f"{sandbox_settings.worker_memory_mb * 1024 * 1024}" in limits
    finally:
        await workers.aclose()


async def test_pooled_workers_move_to_the_workspace(pool: WorkerPool, tmp_path: Path) -> None:
    sandbox = await pool.acquire(workspace=tmp_path / "deep" / "ws", on_call=Extensions())
    # A worker that dropped to another user cannot pass pytest's private tmp_path: it goes to /.
    dropped = sandbox.confinement is not None and sandbox.confinement.uid != os.getuid()
    expected = "/" if dropped else str(tmp_path / "deep" / "ws")
    assert os.readlink(f"/proc/{sandbox.pid}/cwd") == expected


async def test_the_host_is_made_non_dumpable(pool: WorkerPool) -> None:
    import ctypes

    assert ctypes.CDLL(None).prctl(3, 0, 0, 0, 0) == 0  # PR_GET_DUMPABLE


async def test_closed_client_and_pool_refuse_use(pool: WorkerPool, client: SandboxClient) -> None:
    await client.aclose()
    assert client.pid is None
    with pytest.raises(SandboxError):
        await run(client, "1")
    await pool.aclose()
    with pytest.raises(SandboxError):
        await pool.acquire(workspace=Path("/tmp"), on_call=Extensions())


async def test_configure_replaces_the_previous_configuration(client: SandboxClient) -> None:
    await client.configure(functions=["echo"], constants={"LIMIT": 3})
    assert (await ok(client, "LIMIT")).result.result_preview == "3"
    assert not (await run(client, "REQUEST")).result.ok
    assert not (await run(client, "add(1, 2)")).result.ok
    await client.kill()  # configuration survives a restart
    assert (await ok(client, "LIMIT")).result.result_preview == "3"
