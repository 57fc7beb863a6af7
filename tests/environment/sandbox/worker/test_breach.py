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
import ctypes
import json
import os
import platform
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import cove
from cove.config import Settings
from cove.environment.sandbox.host.client import SandboxClient
from cove.environment.sandbox.host.pool import WorkerPool
from cove.environment.sandbox.worker import userns
from cove.environment.sandbox.worker.confine import LAYERS
from cove.persistence.store import Store
from tests.environment.conftest import Extensions

pytestmark = pytest.mark.slow  # sandbox workers started per test

ROOT = os.geteuid() == 0
CHECKOUT = Path(cove.__file__).parents[1]
HOST_SECRET = "cove-host-secret-in-memory-and-environ"

_PROLOGUE = """
import ctypes, errno, os, resource, socket
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
IPC_CREAT, IPC_RMID = 0o1000, 0

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
    # The host and the zygote through calls that name a process. Each sets what it read (or puts
    # it back): the contrast needs the permission, not the damage.
    "lower the host's open-files limit (prlimit)": (
        "files = resource.RLIMIT_NOFILE\n"
        "    resource.prlimit(HOST, files, resource.prlimit(HOST, files))"
    ),
    "lower the zygote's address-space limit (prlimit)": (
        "memory = resource.RLIMIT_AS\n"
        "    resource.prlimit(ZYGOTE, memory, resource.prlimit(ZYGOTE, memory))"
    ),
    "renice the host (setpriority)": (
        "os.setpriority(os.PRIO_PROCESS, HOST, os.getpriority(os.PRIO_PROCESS, HOST))"
    ),
    "pin the host's CPUs (sched_setaffinity)": (
        "os.sched_setaffinity(HOST, os.sched_getaffinity(HOST))"
    ),
    # A thread of the host that only waits: an ordinary user could not take SCHED_IDLE back.
    "put a thread of the host in SCHED_IDLE (sched_setscheduler)": (
        "os.sched_setscheduler(HOST_THREAD, os.SCHED_IDLE, os.sched_param(0))"
    ),
    "set the host's I/O priority (ioprio_set)": (
        "check(libc.syscall(IOPRIO[1], 1, HOST, check(libc.syscall(IOPRIO[0], 1, HOST))))"
    ),
    # Files of the host beyond their contents: Landlock does not mediate these.
    "open the database to every user (chmod)": "os.chmod(DATABASE, 0o666)",
    "change the database's times (utime)": "os.utime(DATABASE, (0, 0))",
    "tag the database (setxattr)": "os.setxattr(DATABASE, 'user.cove-breach', b'x')",
    "open another conversation's workspace (chmod)": "os.chmod(VICTIM_WORKSPACE, 0o777)",
    "watch the data directory (inotify)": (
        "watcher = check(libc.inotify_init1(0))\n"
        "    check(libc.inotify_add_watch(watcher, DATA.encode(), 0xFFF))"
    ),
    "stat a file of the host": "os.stat(DATABASE)",
    "learn who runs every process (/proc)": (
        "try:\n"
        "        pids = [int(p) for p in os.listdir('/proc') if p.isdigit()]\n"
        "    except OSError:  # no listing: probe every pid up to the host's\n"
        "        pids = [p for p in range(1, HOST + 1) if os.path.exists(f'/proc/{p}')]\n"
        "    owners = {pid: os.stat(f'/proc/{pid}').st_uid for pid in pids}\n"
        "    if HOST not in owners:\n"
        "        raise OSError(errno.ENOENT, 'the host is out of sight')"
    ),
    # System V and POSIX IPC: objects outside every limit that outlive the worker.
    "create a System V message queue": (
        "queue = check(libc.msgget(0, IPC_CREAT | 0o600))\n    libc.msgctl(queue, IPC_RMID, None)"
    ),
    "create a System V semaphore set": (
        "semaphores = check(libc.semget(0, 1, IPC_CREAT | 0o600))\n"
        "    libc.semctl(semaphores, 0, IPC_RMID)"
    ),
    "open a POSIX message queue": (
        "name = f'/cove-breach-{os.getpid()}'.encode()\n"
        "    check(libc.mq_open(name, os.O_CREAT | os.O_RDWR, 0o600, None))\n"
        "    libc.mq_unlink(name)"
    ),
}

# A System V segment one worker leaves behind (0666) and a later worker of another conversation
# reads: two blocks, the first worker killed in between (``Scene.run_across_workers``).
SEGMENT_KEY = 0x636F0000  # "co", and the host's pid below: scenes running at once keep apart
LEAVE_SEGMENT = (
    "segment = check(libc.shmget(SEGMENT_KEY, 1 << 20, IPC_CREAT | 0o666))\n"
    "    address = libc.shmat(segment, None, 0)\n"
    "    if address in (None, ctypes.c_void_p(-1).value):\n"
    "        raise OSError(ctypes.get_errno(), 'shmat')\n"
    "    ctypes.memmove(address, b'left by a worker', 16)\n"
    "    libc.shmdt(ctypes.c_void_p(address))"
)
READ_SEGMENT = (
    "segment = check(libc.shmget(SEGMENT_KEY, 0, 0))\n"
    "    address = libc.shmat(segment, None, 0)\n"
    "    if address in (None, ctypes.c_void_p(-1).value):\n"
    "        raise OSError(ctypes.get_errno(), 'shmat')\n"
    "    found = ctypes.string_at(address, 16)\n"
    "    libc.shmdt(ctypes.c_void_p(address))\n"
    "    libc.shmctl(segment, IPC_RMID, None)\n"
    "    if found != b'left by a worker':\n"
    "        raise OSError(errno.ENOENT, 'another segment')"
)
SHARED_SEGMENT = "share a System V segment with a later worker (shmget, shmat)"
IOPRIO_CALLS = {"x86_64": (252, 251), "aarch64": (31, 30)}  # ioprio_get, ioprio_set


def attack(body: str) -> str:
    """The block for an attack: its body between the prologue and the verdict."""
    return _PROLOGUE + "    " + body + "\n" + _EPILOGUE


@dataclass
class Scene:
    """A breach pool, an attacker and a victim worker, and the targets they are told about."""

    pool: WorkerPool
    attacker: SandboxClient
    names: dict[str, object]
    victim: SandboxClient | None = None

    async def run(self, body: str, *, by: SandboxClient | None = None) -> str:
        """The verdict of the attack ``body``, run by the attacker (or ``by``)."""
        prelude = "".join(f"{name} = {value!r}\n" for name, value in self.names.items())
        outcome = await (by or self.attacker).execute(
            prelude + attack(body), timeout_s=30, seed=0, clock=0.0
        )
        assert outcome.result.ok, outcome.result.error
        assert outcome.result.result_preview is not None
        verdict: str = ast.literal_eval(outcome.result.result_preview)
        return verdict

    async def run_across_workers(self, first: str, then: str) -> str:
        """``first`` by the attacker, whose worker is then killed, ``then`` by the victim."""
        verdict = await self.run(first)
        if verdict != "escaped":
            return verdict
        await self.attacker.kill()
        return await self.run(then, by=self.victim)


async def run_attack(scene: Scene, name: str) -> str:
    """The verdict of the attack ``name`` (of ``ATTACKS``, or the shared segment)."""
    if name == SHARED_SEGMENT:
        return await scene.run_across_workers(LEAVE_SEGMENT, READ_SEGMENT)
    return await scene.run(ATTACKS[name])


def segment_key() -> int:
    """The key of the System V segment of this host's scenes (unique among running hosts)."""
    return SEGMENT_KEY | (os.getpid() & 0xFFFF)


def remove_segment(key: int) -> None:
    """Remove the System V segment ``key`` of the host's IPC namespace, if an attack left one."""
    libc = ctypes.CDLL(None, use_errno=True)
    segment = libc.shmget(key, 0, 0)
    if segment != -1:
        libc.shmctl(segment, 0, None)  # IPC_RMID


@contextlib.asynccontextmanager
async def stage(root: Path, *, confined: bool, checkout: Path = CHECKOUT) -> AsyncIterator[Scene]:
    """Targets under ``root``, a breach pool and its attacker and victim workers.

    Every target is readable (and a directory writable) by any user, so that what stops the
    attacks is the confinement, not a file mode. Also run by an unprivileged host (below).
    """
    os.environ["COVE_BREACH_SECRET"] = HOST_SECRET
    secret_in_memory = HOST_SECRET.encode() * 2
    data = root / "data"
    data.mkdir(mode=0o755)
    # Without the data libraries: they change nothing of what confines a worker, and loading
    # them costs every zygote a second or more.
    settings = Settings.load(
        env={},
        data_dir=data,
        sandbox_confine=confined,
        worker_memory_mb=320,
        sandbox_libraries=False,
    )
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
    done = threading.Event()
    idle = threading.Thread(target=done.wait, name="cove-breach-target")
    idle.start()
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
                "DATA": str(data),
                "DATABASE": str(settings.store.database),
                "VICTIM_WORKSPACE": str(workspaces["victim"]),
                "SEGMENT_KEY": segment_key(),
                "IOPRIO": IOPRIO_CALLS[platform.machine()],  # (get, set): uname is refused
                "CHECKOUT": str(checkout / "pyproject.toml"),
                "SSH_KEY": str(home / "id_rsa"),
                "VICTIM_FILE": str(workspaces["victim"] / "notes.txt"),
                "WRITABLE": str(writable),
                "HOST": os.getpid(),
                "HOST_THREAD": idle.native_id,
                "HOST_ADDRESS": id(secret_in_memory),
                "ZYGOTE": zygote.pid,
                "VICTIM": victim.pid,
                "PORT": tcp.getsockname()[1],
                "ABSTRACT": abstract_name,
            }
            yield Scene(pool, attacker, names, victim)
        finally:
            await pool.aclose()
            done.set()
            idle.join()
            remove_segment(segment_key())
            del os.environ["COVE_BREACH_SECRET"]


@pytest.fixture(params=[True, False], ids=["confined", "unconfined"])
async def scene(request: pytest.FixtureRequest) -> AsyncIterator[Scene]:
    with tempfile.TemporaryDirectory(prefix="cove-breach-") as name:
        os.chmod(name, 0o755)
        root = Path(name)
        async with stage(root, confined=request.param) as staged:
            yield staged


@pytest.mark.parametrize("name", [*ATTACKS, SHARED_SEGMENT])
async def test_an_attack_fails_confined_and_succeeds_unconfined(scene: Scene, name: str) -> None:
    verdict = await run_attack(scene, name)
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
import asyncio, json, sys, tempfile
from pathlib import Path
from tests.environment.sandbox.worker.test_breach import ATTACKS, SHARED_SEGMENT, run_attack, stage

async def main():
    verdicts = {}
    for confined in (True, False):
        with tempfile.TemporaryDirectory() as name:
            async with stage(Path(name), confined=confined, checkout=Path(sys.argv[1])) as scene:
                layers = list(scene.attacker.confinement.layers)
                for attack in [*ATTACKS, SHARED_SEGMENT]:
                    verdicts.setdefault(attack, []).append(await run_attack(scene, attack))
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

# What only the mount namespace stops when the worker is the host's user: a path it may stat
# (Landlock does not mediate stat, and seccomp must let the runtime stat its own files).
_NEED_MOUNT_NAMESPACE = {"stat a file of the host", "learn who runs every process (/proc)"}

# What the unprivileged host imports, and what its zygote and workers import: copied for it.
_DISCOVER = """
import json, sys
import tests.environment.sandbox.worker.test_breach
import cove.environment.sandbox.worker.zygote, cove.environment.sandbox.worker.main
import cove.environment.sandbox.worker.runtime, pyseccomp
print(json.dumps([getattr(module, "__file__", None) for module in list(sys.modules.values())]))
"""


def readable_copy(site: Path) -> None:
    """Copy into ``site`` every package of this checkout and its virtualenv that the
    unprivileged host needs: cove whole (its migrations too), the tests, the third-party
    packages they import. The checkout may sit in a private directory (a clone in root's home
    does), where nobody could read it."""
    checkout = CHECKOUT
    found = subprocess.run(
        [sys.executable, "-c", _DISCOVER],  # the checkout, its cwd, on sys.path
        capture_output=True, text=True, check=True, cwd=checkout,
    )  # fmt: skip
    roots = [Path(p) for p in sys.path if p.endswith("site-packages")] + [checkout]
    tops: set[Path] = {checkout / "cove", checkout / "tests"}
    for file in json.loads(found.stdout):
        root = next((r for r in roots if file and file.startswith(f"{r}/")), None)
        if root is not None:
            top = root / Path(file).relative_to(root).parts[0]
            if not top.name.startswith(("_distutils_hack", "__editable__", ".")):
                tops.add(top)
    skip = shutil.ignore_patterns("__pycache__")
    for top in tops:
        if top.is_dir():
            shutil.copytree(top, site / top.name, ignore=skip, dirs_exist_ok=True)
        else:
            shutil.copy2(top, site / top.name)


def interpreter_for_anyone(directory: Path) -> Path | None:
    """A Python every user may run, with its own readable copy of what the suite needs (see
    ``readable_copy``): a venv of the system's Python (this one may live under ``/root``) in
    ``directory / "venv"``, and the checkout's ``pyproject.toml`` in ``directory / "checkout"``
    (a file of the host's user outside the runtime); None when there is no such Python."""
    system = Path(f"/usr/bin/python{sys.version_info[0]}.{sys.version_info[1]}")
    if not system.exists() or shutil.which("setpriv") is None:
        return None
    venv = directory / "venv"
    subprocess.run([str(system), "-m", "venv", "--without-pip", str(venv)], check=True)
    readable_copy(next((venv / "lib").glob("python*/site-packages")))
    (directory / "checkout").mkdir()
    shutil.copy2(CHECKOUT / "pyproject.toml", directory / "checkout" / "pyproject.toml")
    for path in (directory, *directory.rglob("*")):
        if not path.is_symlink():
            path.chmod(0o755 if path.is_dir() else path.stat().st_mode | 0o444)
    return venv / "bin" / "python"


@pytest.mark.skipif(not ROOT, reason="the unprivileged host is played by nobody")
def test_every_attack_fails_under_an_unprivileged_host() -> None:
    with tempfile.TemporaryDirectory(prefix="cove-python-") as name:
        Path(name).chmod(0o755)
        python = interpreter_for_anyone(Path(name))
        if python is None:
            pytest.skip("no system Python of this version or no setpriv")
        done = subprocess.run(
            ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups",
             str(python), "-P", "-c", UNPRIVILEGED_HOST, str(Path(name) / "checkout")],
            capture_output=True, text=True, timeout=600, cwd="/tmp",
            env={"PATH": "/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1"},
        )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    verdicts = json.loads(done.stdout)
    confined_layers, _ = verdicts.pop("layers")
    assert set(confined_layers) >= {"ipc", "landlock", "seccomp", "no_new_privs", "pdeathsig"}
    # Another user for the kernel only where nobody has subordinate ids (/etc/subuid, newuidmap).
    nobody = pwd.getpwnam("nobody")
    subordinate = userns.subordinate("nobody", nobody.pw_uid, nobody.pw_gid) is not None
    assert ("uid" in confined_layers) == subordinate
    for attack, (confined, unconfined) in verdicts.items():
        if attack in _NEED_MOUNT_NAMESPACE and "mount" not in confined_layers:
            continue  # a kernel without user namespaces for ordinary users: said in the docs
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
            "CHECKOUT": str(CHECKOUT / "pyproject.toml"),
            "HOST": os.getpid(),
        }
        scene = Scene(pool, attacker, names)
        for name in ("read the project checkout", "signal the host", "open a netlink socket"):
            verdict = await scene.run(ATTACKS[name])
            assert verdict.startswith("blocked "), f"{name}: {verdict}"
    finally:
        await pool.aclose()
