"""Worker confinement on real processes: another user and no network where the host allows it,
nothing of the sort when switched off, and blocks running as before either way."""

from __future__ import annotations

import ctypes
import errno
import json
import os
import pwd
import socket
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cove.config import SandboxSettings, Settings
from cove.environment.sandbox.frames import ProtocolError
from cove.environment.sandbox.host.client import SandboxClient
from cove.environment.sandbox.host.pool import WorkerPool
from cove.environment.sandbox.worker import userns
from cove.environment.sandbox.worker.confine import LAYERS, Confinement
from cove.environment.sandbox.worker.modules import ALLOWED_MODULES
from cove.environment.sandbox.worker.uids import in_range
from cove.errors import ConfigError
from tests.environment.conftest import Extensions, ok, read_proc

ROOT = os.geteuid() == 0
root_only = pytest.mark.skipif(not ROOT, reason="taking another user's ids needs a root host")
NOBODY = pwd.getpwnam("nobody").pw_uid


def status_ids(pid: int) -> dict[str, list[int]]:
    """The ``Uid``, ``Gid`` and ``Groups`` lines of ``/proc/<pid>/status``."""
    ids: dict[str, list[int]] = {}
    for line in read_proc(pid, "status").decode().splitlines():
        key, _, value = line.partition(":")
        if key in ("Uid", "Gid", "Groups"):
            ids[key] = [int(v) for v in value.split()]
    return ids


def network_namespace(pid: int | str) -> str:
    """The network namespace of a process, or skip when this host may not look at it."""
    return namespace(pid, "net")


def namespace(pid: int | str, kind: str) -> str:
    """A namespace of a process, or skip when this host may not look at it."""
    try:
        return os.readlink(f"/proc/{pid}/ns/{kind}")
    except PermissionError:
        pytest.skip("this host may not inspect a non-dumpable worker's namespaces")


def confinement_of(client: SandboxClient) -> Confinement:
    confinement = client.confinement
    assert confinement is not None
    return confinement


@root_only
async def test_a_root_host_gives_each_worker_a_user_of_its_own(
    client: SandboxClient, pool: WorkerPool, tmp_path: Path
) -> None:
    other = await pool.acquire(workspace=tmp_path / "other", on_call=Extensions())
    seen = set()
    for sandbox in (client, other):
        assert sandbox.pid is not None
        ids = status_ids(sandbox.pid)
        uid = ids["Uid"][0]
        assert in_range(uid) and ids["Uid"] == [uid] * 4  # real, effective, saved, filesystem
        assert ids["Gid"] == [uid] * 4 and ids["Groups"] == []
        confinement = confinement_of(sandbox)
        assert (confinement.enabled, confinement.uid) == (True, uid)
        assert confinement.layers == LAYERS  # every layer in force as root on this kernel
        assert not any("root" in note for note in confinement.notes)
        seen.add(uid)
    assert len(seen) == 2


async def test_the_worker_has_a_network_namespace_of_its_own(client: SandboxClient) -> None:
    confinement = confinement_of(client)
    if confinement.network == "host":
        pytest.skip(f"this host allows no network namespace: {'; '.join(confinement.notes)}")
    assert client.pid is not None
    assert network_namespace(client.pid) != network_namespace("self")
    interfaces = read_proc(client.pid, "net/dev").decode().splitlines()[2:]
    assert [line.split(":")[0].strip() for line in interfaces] == ["lo"]  # and it is down


async def test_the_report_matches_what_the_host_sees(client: SandboxClient) -> None:
    assert client.pid is not None
    confinement = confinement_of(client)
    assert status_ids(client.pid)["Uid"][0] == confinement.uid
    separate = network_namespace(client.pid) != network_namespace("self")
    assert confinement.network == ("isolated" if separate else "host")
    if ROOT and confinement.network == "isolated":
        assert confinement.notes == ()  # nothing failed on the way


@pytest.mark.slow
async def test_confinement_can_be_switched_off(tmp_path: Path) -> None:
    settings = Settings.load(env={}, data_dir=tmp_path, sandbox_confine=False).sandbox
    workers = WorkerPool(settings, size=0)
    try:
        sandbox = await workers.acquire(workspace=tmp_path / "ws", on_call=Extensions())
        assert sandbox.pid is not None
        confinement = confinement_of(sandbox)
        assert not confinement.enabled and confinement.network == "host"
        assert confinement.uid == os.getuid() == status_ids(sandbox.pid)["Uid"][1]
        assert confinement.notes == ("switched off (sandbox_confine)",)
        assert network_namespace(sandbox.pid) == network_namespace("self")
        assert os.readlink(f"/proc/{sandbox.pid}/cwd") == str(tmp_path / "ws")
        assert (
            await ok(sandbox, "import decimal\ndecimal.Decimal('1.5') * 2")
        ).result.result_preview == ("Decimal('3.0')")
    finally:
        await workers.aclose()


async def test_blocks_run_normally_in_a_confined_worker(client: SandboxClient) -> None:
    # Everything a block may reach lazily must still load once the worker lost its ids.
    await ok(client, f"import {', '.join(ALLOWED_MODULES)}")
    code = (
        "import decimal, csv, datetime\n"
        "total = decimal.Decimal('1.10') + 2\n"
        "rows = list(csv.reader(['a,b', '1,\"2,3\"']))\n"
        "day = datetime.datetime.strptime('2024-02-29', '%Y-%m-%d').date()\n"
        "(total, rows, day)"
    )
    outcome = await ok(client, code)
    assert outcome.result.result_preview == (
        "(Decimal('3.10'), [['a', 'b'], ['1', '2,3']], datetime.date(2024, 2, 29))"
    )
    codecs = await ok(client, "'é'.encode('cp1252'), 'mü.de'.encode('idna'), 'x'.encode('utf-16')")
    assert codecs.result.result_preview == "(b'\\xe9', b'xn--m-eha.de', b'\\xff\\xfex\\x00')"
    before = confinement_of(client)
    old_pid = client.pid
    await client.kill()
    after = confinement_of(client)
    assert client.pid != old_pid and (after.layers, after.network) == (
        before.layers,
        before.network,
    )
    again = await ok(client, "import statistics\n(total * 2, rows[1][1], statistics.mean([1, 2]))")
    assert again.result.result_preview == "(Decimal('6.20'), '2,3', 1.5)"


async def test_each_worker_has_an_ipc_namespace_of_its_own(
    client: SandboxClient, pool: WorkerPool, tmp_path: Path
) -> None:
    other = await pool.acquire(workspace=tmp_path / "other", on_call=Extensions())
    if "ipc" not in confinement_of(client).layers:
        pytest.skip(f"no IPC namespace here: {confinement_of(client).layer('ipc')}")
    assert client.pid is not None and other.pid is not None
    seen = {namespace(client.pid, "ipc"), namespace(other.pid, "ipc"), namespace("self", "ipc")}
    assert len(seen) == 3


# A worker's own steps with the seccomp program left out, so that System V calls reach the IPC
# namespace: with ``make`` it creates a segment (0666) and holds it until its input closes; with
# ``look`` it looks for that segment.
IPC_PROBE = """
import ctypes, json, os, sys
from cove.environment.sandbox.worker.confine import prepare, seal
preparation = prepare(True)
preparation.program = None
confinement = seal(preparation, parent=os.getppid(), uid=None)
libc = ctypes.CDLL(None, use_errno=True)
key, action = int(sys.argv[1]), sys.argv[2]
if action == "make":
    segment = libc.shmget(key, 1 << 20, 0o1000 | 0o666)
    print(json.dumps({"layers": list(confinement.layers), "segment": segment}), flush=True)
    sys.stdin.read()
else:
    print(json.dumps({"segment": libc.shmget(key, 0, 0), "errno": ctypes.get_errno()}))
"""


def host_segment_keys() -> set[int]:
    """The keys of the System V segments in this (the host's) IPC namespace."""
    lines = Path("/proc/sysvipc/shm").read_text().splitlines()[1:]
    return {int(line.split()[0]) for line in lines}


def test_a_segment_neither_reaches_another_worker_nor_outlives_its_own() -> None:
    key = 0x636F7600 + os.getpid() % 256
    command = [sys.executable, "-P", "-s", "-c", IPC_PROBE, str(key)]
    environment = {"PYTHONDONTWRITEBYTECODE": "1"}
    try:
        with subprocess.Popen(
            [*command, "make"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=environment
        ) as maker:
            assert maker.stdout is not None and maker.stdin is not None
            made = json.loads(maker.stdout.readline())
            assert made["segment"] >= 0  # made, while its worker lives
            if "ipc" not in made["layers"]:
                pytest.skip("no IPC namespace on this host")
            assert key not in host_segment_keys()
            looked = subprocess.run(
                [*command, "look"], capture_output=True, text=True, timeout=60, env=environment
            )
            assert json.loads(looked.stdout) == {"segment": -1, "errno": errno.ENOENT}
            maker.stdin.close()
            assert maker.wait(timeout=60) == 0
        assert key not in host_segment_keys()
    finally:  # a segment that reached the host's namespace is the test's failure, not a leak
        libc = ctypes.CDLL(None, use_errno=True)
        if (segment := libc.shmget(key, 0, 0)) != -1:
            libc.shmctl(segment, 0, None)  # IPC_RMID


@pytest.fixture
def open_directory() -> Iterator[Path]:
    """A directory every user may pass through (unlike pytest's private ``tmp_path``)."""
    with tempfile.TemporaryDirectory(prefix="cove-open-") as name:
        os.chmod(name, 0o755)
        yield Path(name)


async def test_a_pooled_worker_stays_in_a_root_of_its_own(
    pool: WorkerPool, open_directory: Path
) -> None:
    workspace = open_directory / "ws"
    workspace.mkdir(mode=0o755)
    sandbox = await pool.acquire(workspace=workspace, on_call=Extensions())
    assert sandbox.pid is not None
    if "mount" not in confinement_of(sandbox).layers:
        pytest.skip(f"no mount namespace here: {confinement_of(sandbox).layer('mount')}")
    assert os.readlink(f"/proc/{sandbox.pid}/cwd") == "/"  # not the workspace, open as it is
    theirs, ours = os.stat(f"/proc/{sandbox.pid}/root"), os.stat("/")
    assert (theirs.st_dev, theirs.st_ino) != (ours.st_dev, ours.st_ino)
    assert (await ok(sandbox, "6 * 7")).result.result_preview == "42"


@root_only
async def test_a_workspace_the_pool_creates_is_private_to_the_host(
    pool: WorkerPool, open_directory: Path
) -> None:
    workspace = open_directory / "new"
    sandbox = await pool.acquire(workspace=workspace, on_call=Extensions())
    assert stat.S_IMODE(workspace.stat().st_mode) == 0o700
    assert os.readlink(f"/proc/{sandbox.pid}/cwd") == "/"  # which Landlock keeps it from reading


@root_only
async def test_a_workspace_closed_to_the_worker_leaves_it_in_the_root(
    pool: WorkerPool, tmp_path: Path
) -> None:
    idle_pid = pool._idle[0].pid  # the pre-started worker: not replaced by a cold start
    sandbox = await pool.acquire(workspace=tmp_path / "private", on_call=Extensions())
    assert sandbox.pid == idle_pid
    assert os.readlink(f"/proc/{sandbox.pid}/cwd") == "/"
    assert (await ok(sandbox, "6 * 7")).result.result_preview == "42"


@root_only
async def test_a_cold_start_in_a_closed_workspace_moves_to_the_root(
    sandbox_settings: SandboxSettings, tmp_path: Path
) -> None:
    closed = tmp_path / "closed"
    closed.mkdir(mode=0o700)
    workers = WorkerPool(sandbox_settings, size=0)
    try:
        sandbox = await workers.acquire(workspace=closed, on_call=Extensions())
        assert os.readlink(f"/proc/{sandbox.pid}/cwd") == "/"
        if "mount" not in confinement_of(sandbox).layers:  # else in a root of its own: no note
            assert confinement_of(sandbox).notes[-1:] == (
                "working directory not accessible: moved to /",
            )
        assert (await ok(sandbox, "6 * 7")).result.result_preview == "42"
    finally:
        await workers.aclose()


# What sandbox code cannot try (it has no os or socket): the worker's own start-up steps, run in a
# real child process, then a fork, a connection to a loopback service of the host, a way back to
# root and a root-only file. ``become`` first takes the ids of nobody, as an unprivileged host.
PROBE = """
import ctypes, encodings.idna, json, os, socket, sys
import pyseccomp  # an unprivileged host can read its own Python; this one lives under /root
from cove.environment.sandbox.worker.confine import confine
from cove.environment.sandbox.worker.main import apply_limits

port, secret, become = int(sys.argv[1]), sys.argv[2], sys.argv[3]
if become != "-":
    os.setgroups([])
    os.setresgid(int(become), int(become), int(become))
    os.setresuid(int(become), int(become), int(become))
report = confine(True, parent=os.getppid()).as_frame()
apply_limits({"memory_mb": 512, "cpu_s": 10, "file_size_mb": 1, "open_files": 64})

def attempt(action):
    try:
        action()
    except OSError as exc:
        return type(exc).__name__
    return "done"

def fork():
    if os.fork() == 0:
        os._exit(0)

report["fork"] = attempt(fork)
report["connect"] = attempt(lambda: socket.create_connection(("127.0.0.1", port), timeout=5))
report["setuid"] = attempt(lambda: os.setuid(0))
report["secret"] = attempt(lambda: open(secret).read())
report["prctl"] = ctypes.CDLL(None).prctl(3, 0, 0, 0, 0)  # PR_GET_DUMPABLE: refused
print(json.dumps(report))
"""


def probe(tmp_path: Path, *, become: int | None = None) -> dict[str, Any]:
    secret = tmp_path / "secret"
    secret.write_text("sk-host-secret")
    secret.chmod(0o600)
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        args = [str(port), str(secret), "-" if become is None else str(become)]
        done = subprocess.run(
            [sys.executable, "-P", "-s", "-c", PROBE, *args],
            capture_output=True, text=True, timeout=60, env={"PYTHONDONTWRITEBYTECODE": "1"},
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def test_a_confined_process_can_neither_fork_nor_connect_nor_regain_root(tmp_path: Path) -> None:
    report = probe(tmp_path)
    assert report["fork"] == "PermissionError"  # seccomp: clone for threads only
    assert report["setuid"] == "PermissionError"
    assert report["connect"] == "PermissionError"  # seccomp: no socket at all
    # The mount namespace: no such file in its root; else Landlock: no file outside the runtime.
    assert report["secret"] == (
        "FileNotFoundError" if "mount" in report["layers"] else "PermissionError"
    )
    assert report["prctl"] == -1  # seccomp: the death signal and dumpable flag stay as set
    assert set(report["layers"]) >= {"landlock", "seccomp", "no_new_privs", "pdeathsig"}
    if ROOT:
        assert in_range(report["uid"]) and "uid" in report["layers"]


@root_only
def test_an_unprivileged_process_gets_a_user_and_network_namespace(tmp_path: Path) -> None:
    report = probe(tmp_path, become=NOBODY)
    assert report["fork"] == "PermissionError"
    assert report["setuid"] in {"PermissionError", "OSError"}  # EINVAL: 0 is unmapped in there
    assert report["connect"] == "PermissionError"
    assert report["secret"] in {"FileNotFoundError", "PermissionError"}
    assert set(report["layers"]) >= {"ipc", "landlock", "seccomp", "no_new_privs", "pdeathsig"}
    if report["network"] != "isolated":  # a kernel without unprivileged user namespaces
        assert any("no user namespace" in note for note in report["notes"])
        return
    assert "mount" in report["layers"]
    ranges = userns.subordinate("nobody", NOBODY, NOBODY)
    if ranges is None:  # the common case: the worker stays the host's user for the kernel
        assert (report["user"], report["uid"]) == ("nobody", NOBODY)
        assert "uid" not in report["layers"]
        assert any("no subordinate ids" in note for note in report["notes"])
    else:  # an id of nobody's subordinate range: another user for the kernel
        first, count = ranges.uids
        assert first <= report["uid"] < first + count and "uid" in report["layers"]
        assert report["user"] == f"uid {report['uid']}" and report["notes"] == []


@pytest.mark.parametrize(
    "report",
    [
        None,
        [],
        {"enabled": 1, "user": "nobody", "uid": 1, "network": "host"},
        {"enabled": True, "user": 7, "uid": 1, "network": "host"},
        {"enabled": True, "user": "nobody", "uid": "1", "network": "host"},
        {"enabled": True, "user": "nobody", "uid": 1, "network": "open"},
        {"enabled": True, "user": "nobody", "uid": 1, "network": "host", "notes": "x"},
        {"enabled": True, "user": "nobody", "uid": 1, "network": "host", "notes": [1]},
        {"enabled": True, "user": "nobody", "uid": 1, "network": "host", "layers": ["x"]},
        {"enabled": True, "user": "nobody", "uid": 1, "network": "host", "layers": "uid"},
    ],
)
def test_a_malformed_confinement_report_is_a_protocol_error(report: object) -> None:
    with pytest.raises(ProtocolError, match="malformed confinement report"):
        Confinement.from_frame(report)


def test_a_report_survives_the_wire() -> None:
    confinement = Confinement(
        True, "nobody", NOBODY, "isolated", ("landlock: ENOSYS",), ("network", "seccomp")
    )
    assert Confinement.from_frame(json.loads(json.dumps(confinement.as_frame()))) == confinement
    assert confinement.layer("seccomp") == "active"
    assert confinement.layer("landlock") == "ENOSYS"
    assert confinement.layer("uid") == "not in force"


def test_the_setting_reads_from_the_environment_and_is_checked() -> None:
    assert Settings.load(env={}).sandbox.sandbox_confine is True
    assert Settings.load(env={"COVE_SANDBOX_CONFINE": "off"}).sandbox.sandbox_confine is False
    with pytest.raises(ConfigError, match="sandbox_confine"):
        Settings.load(env={"COVE_SANDBOX_CONFINE": "perhaps"})
    with pytest.raises(ConfigError, match="sandbox_confine"):
        Settings().replace(sandbox_confine=1)
