"""Assume the guards are broken: plain, unrestricted Python in a worker confined as in production.

``WorkerPool(assume_breach=True)`` runs every block with ``exec`` in a worker forked from the same
zygote, sealed by the same steps and limited by the same limits as any other. Each attack below
must fail there; and each must succeed with confinement switched off, so that no test can pass
because the attack itself was broken. An attack leaves ``result``: ``"escaped"`` when it got
through, ``"blocked <error>"`` when the system said no.

The targets are made readable to every user (files ``0644`` in a ``0755`` directory, a ``0777``
directory to write into) so that what stops the attacks is the confinement, not a file mode.
"""

from __future__ import annotations

import ast
import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import cove
from cove.config import Settings
from cove.environment.sandbox.host.client import SandboxClient
from cove.environment.sandbox.host.pool import WorkerPool
from cove.environment.sandbox.worker.confine import LAYERS
from cove.persistence.store import Store
from tests.environment.conftest import Extensions

ROOT = os.geteuid() == 0
HOST_SECRET = "cove-host-secret-in-memory-and-environ"

_PROLOGUE = """
import ctypes, errno, os, socket
libc = ctypes.CDLL(None, use_errno=True)

def check(value):
    if value == -1:
        number = ctypes.get_errno()
        raise OSError(number, os.strerror(number))
    return value

class IOVec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]

def read_memory(pid, address):
    buffer = ctypes.create_string_buffer(16)
    local, remote = IOVec(ctypes.addressof(buffer), 16), IOVec(address, 16)
    check(libc.process_vm_readv(pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0))

try:
"""
_EPILOGUE = """
    result = "escaped"
except (OSError, MemoryError) as exc:
    result = f"blocked {type(exc).__name__} {getattr(exc, 'errno', '')}"
"""

ATTACKS = {
    # Files of the host.
    "read the database": "open(DATABASE, 'rb').read(16)",
    "read the project checkout": "open(CHECKOUT, 'rb').read(16)",
    "read an ssh key": "open(SSH_KEY, 'rb').read()",
    "read /etc/shadow": "open('/etc/shadow', 'rb').read()",
    "read another conversation's workspace": "open(VICTIM_FILE, 'rb').read()",
    "list beside its workspace through its cwd": "os.listdir('..')",
    "list the root directory": "os.listdir('/')",
    # The host process.
    "read the host's environment": "open(f'/proc/{HOST}/environ', 'rb').read()",
    "read the host's memory through /proc": (
        "maps = open(f'/proc/{HOST}/maps').readline()\n"
        "    mem = open(f'/proc/{HOST}/mem', 'rb')\n"
        "    mem.seek(int(maps.split('-')[0], 16))\n"
        "    mem.read(16)"
    ),
    "read the host's memory (process_vm_readv)": "read_memory(HOST, HOST_ADDRESS)",
    "read the zygote's memory (process_vm_readv)": "read_memory(ZYGOTE, id(os))",
    # Writes.
    "write outside its workspace": "open(WRITABLE + '/planted', 'w').write('x')",
    "fill the disk from its workspace": "open('filler', 'wb').write(bytes(8 << 20))",
    "write to /dev/shm": "open(f'/dev/shm/cove-breach-{os.getpid()}', 'wb').write(b'x')",
    # Other processes.
    "signal the host": "os.kill(HOST, 0)",
    "signal the zygote": "os.kill(ZYGOTE, 0)",
    "signal another conversation's worker": "os.kill(VICTIM, 0)",
    "ptrace another conversation's worker": "check(libc.ptrace(0x4206, VICTIM, 0, 0))",
    "ptrace the zygote": "check(libc.ptrace(0x4206, ZYGOTE, 0, 0))",
    "read another worker's memory": "read_memory(VICTIM, id(os))",
    # Network.
    "connect to a loopback TCP service": "socket.create_connection(('127.0.0.1', PORT), 5)",
    "connect to an abstract unix socket": (
        "s = socket.socket(socket.AF_UNIX)\n    s.connect(ABSTRACT)"
    ),
    "open a netlink socket": "socket.socket(socket.AF_NETLINK, socket.SOCK_RAW)",
    # Outliving the host, multiplying, growing.
    "clear its death signal": "check(libc.prctl(1, 0, 0, 0, 0))",
    "enter new namespaces": "check(libc.unshare(0x04000000 | 0x08000000))",  # UTS, IPC
    "fork": (
        "child = os.fork()\n    if child == 0:\n        os._exit(0)\n    os.waitpid(child, 0)"
    ),
    "hold memory beyond its limit (memfd)": (
        "held = []\n"
        "    for _ in range(6):\n"
        "        fd = check(libc.memfd_create(b'x', 0))\n"
        "        for _ in range(15):\n"
        "            os.write(fd, bytes(4 << 20))\n"
        "        held.append(fd)"
    ),
}


def attack(body: str) -> str:
    """The block for an attack: its body between the prologue and the verdict."""
    return _PROLOGUE + "    " + body + "\n" + _EPILOGUE


@dataclass
class Scene:
    """A breach pool, an attacker and a victim worker, and the targets they are told about."""

    pool: WorkerPool
    attacker: SandboxClient
    names: dict[str, object]

    async def run(self, body: str) -> str:
        prelude = "".join(f"{name} = {value!r}\n" for name, value in self.names.items())
        outcome = await self.attacker.execute(
            prelude + attack(body), timeout_s=30, seed=0, clock=0.0
        )
        assert outcome.result.ok, outcome.result.error
        assert outcome.result.result_preview is not None
        verdict: str = ast.literal_eval(outcome.result.result_preview)
        return verdict


@contextlib.asynccontextmanager
async def stage(root: Path, *, confined: bool) -> AsyncIterator[Scene]:
    """Targets under ``root``, a breach pool and its attacker and victim workers.

    Every target is readable (and a directory writable) by any user, so that what stops the
    attacks is the confinement, not a file mode. Also run by an unprivileged host (below).
    """
    os.environ["COVE_BREACH_SECRET"] = HOST_SECRET
    secret_in_memory = HOST_SECRET.encode() * 2
    data = root / "data"
    data.mkdir(mode=0o755)
    settings = Settings.load(env={}, data_dir=data, sandbox_confine=confined, worker_memory_mb=320)
    async with Store.open(settings.store.database) as store:
        await store.create_conversation(channel="cli", title="private conversation")
    os.chmod(settings.store.database, 0o644)
    home = root / "home" / ".ssh"
    home.mkdir(parents=True, mode=0o755)
    (home / "id_rsa").write_text("-----BEGIN OPENSSH PRIVATE KEY-----\n")
    writable = root / "writable"
    writable.mkdir()
    writable.chmod(0o777)
    workspaces = {name: root / name for name in ("victim", "attacker")}
    for workspace in workspaces.values():
        workspace.mkdir()
        workspace.chmod(0o777)  # even an open workspace: the worker writes no file at all
    (workspaces["victim"] / "notes.txt").write_text("the victim's notes")
    for path in (home / "id_rsa", workspaces["victim"] / "notes.txt"):
        path.chmod(0o644)
    pool = WorkerPool(settings.sandbox, size=0, assume_breach=True)
    with socket.socket() as tcp, socket.socket(socket.AF_UNIX) as abstract:
        tcp.bind(("127.0.0.1", 0))
        tcp.listen()
        abstract_name = f"\0cove-breach-{os.getpid()}-{id(root)}"
        abstract.bind(abstract_name)
        abstract.listen()
        try:
            victim = await pool.acquire(workspace=workspaces["victim"], on_call=Extensions())
            attacker = await pool.acquire(workspace=workspaces["attacker"], on_call=Extensions())
            zygote = pool._zygote
            assert zygote is not None and attacker.pid is not None
            names: dict[str, object] = {
                "DATABASE": settings.store.database,
                "CHECKOUT": str(Path(cove.__file__).parents[1] / "pyproject.toml"),
                "SSH_KEY": str(home / "id_rsa"),
                "VICTIM_FILE": str(workspaces["victim"] / "notes.txt"),
                "WRITABLE": str(writable),
                "HOST": os.getpid(),
                "HOST_ADDRESS": id(secret_in_memory),
                "ZYGOTE": zygote.pid,
                "VICTIM": victim.pid,
                "PORT": tcp.getsockname()[1],
                "ABSTRACT": abstract_name,
            }
            yield Scene(pool, attacker, names)
        finally:
            await pool.aclose()
            del os.environ["COVE_BREACH_SECRET"]


@pytest.fixture(params=[True, False], ids=["confined", "unconfined"])
async def scene(request: pytest.FixtureRequest) -> AsyncIterator[Scene]:
    with tempfile.TemporaryDirectory(prefix="cove-breach-") as name:
        os.chmod(name, 0o755)
        root = Path(name)
        async with stage(root, confined=request.param) as staged:
            yield staged


@pytest.mark.parametrize("name", list(ATTACKS))
async def test_an_attack_fails_confined_and_succeeds_unconfined(scene: Scene, name: str) -> None:
    verdict = await scene.run(ATTACKS[name])
    confinement = scene.attacker.confinement
    assert confinement is not None
    if confinement.enabled:
        assert verdict.startswith("blocked "), f"{name}: {verdict}"
    else:
        assert verdict == "escaped", f"{name} is no real attack: {verdict}"


@pytest.mark.skipif(not ROOT, reason="a root host shows every layer")
async def test_the_breach_worker_is_confined_as_in_production(scene: Scene) -> None:
    confinement = scene.attacker.confinement
    assert confinement is not None
    if not confinement.enabled:
        pytest.skip("the unconfined scene")
    assert confinement.layers == LAYERS
    pid = scene.attacker.pid
    assert pid is not None
    with open(f"/proc/{pid}/stat") as file:  # noqa: ASYNC230 - a tiny read of /proc
        stat = file.read()
    assert int(stat[stat.rindex(")") + 2 :].split()[1]) == scene.names["ZYGOTE"]


# The laptop case: the host is an ordinary user, and so are its workers (no other user to take).
# The host runs as nobody here; the files it owns are what a worker of its own user could read.
UNPRIVILEGED_HOST = """
import asyncio, json, os, sys, tempfile
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from tests.environment.sandbox.worker.test_breach import ATTACKS, stage

async def main():
    verdicts = {}
    for confined in (True, False):
        with tempfile.TemporaryDirectory() as name:
            async with stage(Path(name), confined=confined) as scene:
                layers = list(scene.attacker.confinement.layers)
                for attack in ATTACKS:
                    verdicts.setdefault(attack, []).append(await scene.run(ATTACKS[attack]))
        verdicts.setdefault("layers", []).append(layers)
    print(json.dumps(verdicts))

asyncio.run(main())
"""

# What an ordinary user cannot do even unconfined: no contrast to show for these.
_OUT_OF_REACH_UNPRIVILEGED = {
    "read /etc/shadow",  # root's file
    "read the host's environment",  # the host is non-dumpable (PR_SET_DUMPABLE 0)
    "read the host's memory through /proc",
    "read the host's memory (process_vm_readv)",
    "fork",  # RLIMIT_NPROC 0 binds every user but root
    "enter new namespaces",  # needs CAP_SYS_ADMIN
}


def interpreter_for_anyone(directory: Path) -> Path | None:
    """A Python every user may run, seeing this checkout's packages: a venv of the system's
    Python (this one may live under ``/root``); None when there is none of this version."""
    system = Path(f"/usr/bin/python{sys.version_info[0]}.{sys.version_info[1]}")
    if not system.exists() or shutil.which("setpriv") is None:
        return None
    subprocess.run([str(system), "-m", "venv", "--without-pip", str(directory)], check=True)
    packages = next(p for p in sys.path if p.endswith("site-packages"))
    site = next((directory / "lib").glob("python*/site-packages"))
    (site / "cove-checkout.pth").write_text(f"import site; site.addsitedir({packages!r})\n")
    for path in (directory, *directory.rglob("*")):
        path.chmod(0o755 if path.is_dir() else path.stat().st_mode | 0o444)
    return directory / "bin" / "python"


@pytest.mark.skipif(not ROOT, reason="the unprivileged host is played by nobody")
def test_every_attack_fails_under_an_unprivileged_host() -> None:
    checkout = str(Path(cove.__file__).parents[1])
    with tempfile.TemporaryDirectory(prefix="cove-python-") as name:
        Path(name).chmod(0o755)
        python = interpreter_for_anyone(Path(name) / "venv")
        if python is None:
            pytest.skip("no system Python of this version or no setpriv")
        done = subprocess.run(
            ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups",
             str(python), "-c", UNPRIVILEGED_HOST, checkout],
            capture_output=True, text=True, timeout=300, cwd="/tmp",
            env={"PATH": "/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1"},
        )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    verdicts = json.loads(done.stdout)
    confined_layers, _ = verdicts.pop("layers")
    assert set(confined_layers) >= {"landlock", "seccomp", "no_new_privs", "pdeathsig"}
    assert "uid" not in confined_layers  # an ordinary user has no other user to give
    for attack, (confined, unconfined) in verdicts.items():
        assert confined.startswith("blocked "), f"{attack}: {confined}"
        if attack not in _OUT_OF_REACH_UNPRIVILEGED:
            assert unconfined == "escaped", f"{attack} is no real attack: {unconfined}"


async def test_a_cold_started_worker_is_sealed_the_same_way(tmp_path: Path) -> None:
    settings = Settings.load(env={}, data_dir=tmp_path, sandbox_fork_server=False)
    pool = WorkerPool(settings.sandbox, size=0, assume_breach=True)
    try:
        attacker = await pool.acquire(workspace=tmp_path / "ws", on_call=Extensions())
        assert pool._zygote is None and attacker.confinement is not None
        if ROOT:
            assert attacker.confinement.layers == LAYERS
        names: dict[str, object] = {
            "CHECKOUT": str(Path(cove.__file__).parents[1] / "pyproject.toml"),
            "HOST": os.getpid(),
        }
        scene = Scene(pool, attacker, names)
        for name in ("read the project checkout", "signal the host", "open a netlink socket"):
            verdict = await scene.run(ATTACKS[name])
            assert verdict.startswith("blocked "), f"{name}: {verdict}"
    finally:
        await pool.aclose()
