"""Confining a worker: the operating-system boundary behind RestrictedPython.

Every layer is best effort: a layer the host does not allow is left out, recorded in the returned
``Confinement`` (which the worker reports in its ``ready`` frame, and ``cove doctor`` shows) and
the worker carries on. Confinement comes in two steps, so that a zygote does the costly part once
and each forked worker only the part that must be its own:

``prepare`` (the zygote, or a cold worker, before any sandbox code exists):
    - a new mount and network namespace: as root directly; otherwise, or when refused, inside a
      user namespace (``userns.py``: with the host user's subordinate ids when it has some);
    - in the mount namespace, a root of its own (``rootfs.py``): read-only binds of the runtime,
      its shared libraries and a few device nodes, nothing else (no ``/proc``, no host file);
    - in the network namespace, nothing: not even the host's loopback is reachable;
    - ``no_new_privs`` and non-dumpable (no one of the same user reads its memory or environ);
    - a Landlock ruleset (``landlock.py``) and a seccomp allow list (``seccomp.py``), built once.

``seal`` (each worker, after the fork):
    - an IPC namespace of its own (no System V object or message queue shared with anyone, none
      outliving it), while it may still create one;
    - ids of its own when the host has some to give (``uids.py``: a reserved range as root, a
      subordinate range otherwise) with no supplementary groups, then no capability left; checked
      (``setuid(0)`` must fail) — a root zygote stays root to do this, but never runs sandbox code;
    - non-dumpable again (a change of user resets it), the death signal (``lifeline.py``);
    - the Landlock ruleset enforced (no file but the runtime, read-only; no TCP; no signal or
      abstract socket out of its own domain), then the seccomp filter (only the system calls a
      worker needs; those naming a process only on itself).

A worker of its own root sees its runtime's directories open to it whoever it runs as; without
that root, once the ids are dropped the interpreter's own files may be out of reach (a Python
installed under ``/root``), so the zygote imports every codec beforehand (``preload_codecs``).
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import os
import pkgutil
import pwd
import stat
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

from cove.environment.sandbox.frames import ProtocolError
from cove.environment.sandbox.worker import rootfs, seccomp, userns
from cove.environment.sandbox.worker.landlock import Ruleset
from cove.environment.sandbox.worker.libc import libc
from cove.environment.sandbox.worker.lifeline import die_with_parent
from cove.environment.sandbox.worker.uids import ROOT_RANGE, IdRange, UidPool

Network = Literal["isolated", "host"]

LAYERS = ("uid", "mount", "network", "ipc", "landlock", "seccomp", "no_new_privs", "pdeathsig")
"""Every layer of confinement, in the order ``cove doctor`` lists them."""

_CLONE_NEWNS = 0x00020000
_CLONE_NEWIPC = 0x08000000
_CLONE_NEWNET = 0x40000000
_NAMESPACES = _CLONE_NEWNS | _CLONE_NEWNET
_PR_SET_DUMPABLE = 4
_PR_SET_NO_NEW_PRIVS = 38
_NET_NAMESPACE = "/proc/self/ns/net"


@dataclass(frozen=True)
class Confinement:
    """What confinement a worker achieved, as it reported it.

    Attributes:
        enabled: Whether confinement was asked for (``sandbox_confine``).
        user: The name of the user the worker runs as (``uid N`` for an id of no account).
        uid: That user's id as the host sees it.
        network: ``"isolated"`` in a network namespace of its own, else ``"host"``.
        notes: The steps that did not happen and why (each starts with its layer's name), and
            fallbacks taken.
        layers: The layers (of ``LAYERS``) in force.
    """

    enabled: bool
    user: str
    uid: int
    network: Network
    notes: tuple[str, ...] = ()
    layers: tuple[str, ...] = ()

    def as_frame(self) -> dict[str, Any]:
        """The wire form, for the worker's ``ready`` frame."""
        frame = asdict(self)
        frame["notes"] = list(self.notes)
        frame["layers"] = list(self.layers)
        return frame

    @classmethod
    def from_frame(cls, data: Any) -> Confinement:
        """Check and rebuild a worker's report.

        Raises:
            ProtocolError: The report is malformed.
        """
        if not isinstance(data, dict):
            raise ProtocolError("malformed confinement report")
        enabled: Any = data.get("enabled")
        user: Any = data.get("user")
        uid: Any = data.get("uid")
        network, notes = data.get("network"), data.get("notes", [])
        layers = data.get("layers", [])
        if not _well_formed(enabled, user, uid, network, notes, layers):
            raise ProtocolError("malformed confinement report")
        checked: Network = "isolated" if network == "isolated" else "host"
        return cls(
            enabled,
            user[:200],
            uid,
            checked,
            tuple(note[:500] for note in notes[:20]),
            tuple(layer for layer in LAYERS if layer in layers),
        )

    def layer(self, name: str) -> str:
        """``"active"``, or why the layer ``name`` is not in force."""
        if name in self.layers:
            return "active"
        if not self.enabled:
            return "switched off (sandbox_confine)"
        reasons = [note.partition(": ")[2] for note in self.notes if note.startswith(f"{name}: ")]
        return "; ".join(reasons) or "not in force"


def _well_formed(enabled: Any, user: Any, uid: Any, network: Any, notes: Any, layers: Any) -> bool:
    """Whether a worker's confinement report has the fields and types of one."""
    return (
        type(enabled) is bool
        and isinstance(user, str)
        and type(uid) is int
        and network in get_args(Network)
        and _strings(notes)
        and _strings(layers)
        and all(layer in LAYERS for layer in layers)
    )


def _strings(items: Any) -> bool:
    return isinstance(items, list) and all(isinstance(item, str) for item in items)


NOT_REPORTED = Confinement(False, "unknown", -1, "host", ("the worker did not report",))
"""The confinement of a worker that has not said yet."""


@dataclass
class Preparation:
    """What ``prepare`` achieved, for ``seal`` to finish in each worker.

    Attributes:
        enabled: Whether confinement was asked for.
        user: The name and id of the host's user (read while ``/etc/passwd`` was in reach).
        ids: The ids workers take, one each (``uids.py``): the reserved range on a root host,
            a subordinate range on an unprivileged one; None when workers keep the host's.
        network: Whether the process entered a network namespace of its own.
        ruleset: The Landlock ruleset, built once.
        program: The seccomp program, built once.
        layers: The layers in force already (each worker adds its own).
        notes: What was left out and why.
    """

    enabled: bool
    user: tuple[str, int] = ("unknown", -1)
    ids: IdRange | None = None
    network: Network = "host"
    ruleset: Ruleset | None = None
    program: bytes | None = None
    layers: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def keep_fds(self) -> set[int]:
        """The descriptors ``seal`` still needs (closing every other one is safe)."""
        return {self.ruleset.fd} if self.ruleset is not None else set()

    def needs_codecs(self) -> bool:
        """Whether workers will lose sight of the standard library's codecs when they take their
        own ids (no root of their own, whose directories are open to every user)."""
        return self.ids is not None and "mount" not in self.layers


def prepare(enabled: bool) -> Preparation:
    """The first step of confinement, shared by all workers of a zygote (module docstring).

    Args:
        enabled: False leaves the process as it is.
    """
    if not enabled:
        return Preparation(False)
    if not sys.platform.startswith("linux"):
        return Preparation(True, notes=[f"confinement: not available on {sys.platform}"])
    done = Preparation(True, user=_current_user())
    os.chdir("/")  # a confined worker needs no file: it works from the root, its own or not
    libc = _libc(done.notes)
    try:  # first: libseccomp is found through ldconfig, which is out of reach in the new root
        done.program = seccomp.build()
    except OSError as exc:
        done.notes.append(f"seccomp: {exc.strerror or exc}")
    readable = rootfs.readable_paths()  # while /proc is in reach
    if libc is not None and _enter_namespaces(libc, done):
        try:
            rootfs.build(readable)
            done.layers.append("mount")
        except OSError as exc:
            done.notes.append(f"mount: {exc.strerror or exc}")
    if _prctl(libc, _PR_SET_NO_NEW_PRIVS, 1, "no_new_privs", done.notes):
        done.layers.append("no_new_privs")
    _prctl(libc, _PR_SET_DUMPABLE, 0, "non-dumpable", done.notes)
    try:
        done.ruleset = Ruleset.prepare(readable)
    except OSError as exc:
        done.notes.append(f"landlock: {exc.strerror or exc}")
    return done


def _enter_namespaces(libc: ctypes.CDLL, done: Preparation) -> bool:
    """Enter a new mount and network namespace: as root directly, else (or when refused) inside
    a user namespace (``userns.py``). Records the network layer and the workers' ids.

    Returns:
        Whether the process is in a mount namespace of its own.
    """
    host_network = _network_namespace()
    root = os.geteuid() == 0
    entered = root and _unshare(libc, _NAMESPACES, "mount+network namespace", done.notes)
    if root:
        done.ids = ROOT_RANGE
    if not entered:
        try:
            subordinate = userns.enter(_NAMESPACES, done.user[0], done.notes)
            entered = True
        except OSError as exc:
            for layer in ("network", "mount"):
                done.notes.append(f"{layer}: no user namespace: {exc.strerror or exc}")
            subordinate = None
        if not root:
            done.ids = subordinate
    if not root and not entered:
        done.notes.append("uid: the host is not root: workers run as the host's user")
    if entered and _network_namespace() != host_network:
        done.network = "isolated"
        done.layers.append("network")
    elif entered:
        done.notes.append("network: namespace unchanged after unshare")
    return entered


def seal(preparation: Preparation, *, parent: int, uid: int | None) -> Confinement:
    """The second step, in each worker: its own IPC namespace and user, no capability, the death
    signal, Landlock, seccomp.

    Args:
        preparation: What ``prepare`` achieved in this process or the zygote it was forked from.
        parent: The process this one must not outlive (armed even when confinement is off).
        uid: The worker's own id, from ``preparation.ids`` (None: it keeps its ids).
    """
    notes = list(preparation.notes)
    layers = list(preparation.layers)
    if not preparation.enabled:
        die_with_parent(parent)
        user, current = _current_user()
        return Confinement(False, user, current, "host", ("switched off (sandbox_confine)",))
    libc = _libc(notes)
    if _unshare(libc, _CLONE_NEWIPC, "IPC namespace", notes, layer="ipc"):
        layers.append("ipc")
    user, current = _own_user(preparation, uid, notes, layers)
    try:
        userns.drop_capabilities()
    except OSError as exc:
        notes.append(f"uid: capabilities kept: {exc.strerror or exc}")
    # A change of user resets both of these: set them (again) after it.
    _prctl(libc, _PR_SET_DUMPABLE, 0, "non-dumpable", notes)
    armed = die_with_parent(parent)
    if armed is None:
        layers.append("pdeathsig")
    else:
        notes.append(f"pdeathsig: {armed}")
    _restrict(preparation, notes, layers)
    if _can_become_root():
        notes.append("uid: the worker can still become root")
        user, current = "root", 0
        if "uid" in layers:
            layers.remove("uid")
    return Confinement(
        True,
        user,
        current,
        preparation.network,
        tuple(notes),
        tuple(layer for layer in LAYERS if layer in layers),
    )


def _own_user(
    preparation: Preparation, uid: int | None, notes: list[str], layers: list[str]
) -> tuple[str, int]:
    """Take the worker's own ids when it has some: its user's name and id (as the host sees it)."""
    ids = preparation.ids
    if ids is not None and uid is not None and _drop_to(uid, notes):
        layers.append("uid")
        return f"uid {ids.host_id(uid)}", ids.host_id(uid)
    return preparation.user


def _restrict(preparation: Preparation, notes: list[str], layers: list[str]) -> None:
    """Put the prepared Landlock ruleset and seccomp filter in force."""
    if preparation.ruleset is not None:
        try:
            preparation.ruleset.restrict()
            layers.append("landlock")
        except OSError as exc:
            notes.append(f"landlock: {exc.strerror or exc}")
    if preparation.program is not None:
        try:
            seccomp.load(preparation.program)
            layers.append("seccomp")
        except OSError as exc:
            notes.append(f"seccomp: {exc.strerror or exc}")


def confine(enabled: bool, *, parent: int) -> Confinement:
    """Both steps at once, for a cold-started worker (module docstring)."""
    preparation = prepare(enabled)
    if preparation.needs_codecs():
        preload_codecs()
    uid = UidPool(preparation.ids).pick() if preparation.ids is not None else None
    return seal(preparation, parent=parent, uid=uid)


def preload_codecs() -> None:
    """Import every text codec now, if the standard library will be out of reach after the drop.

    Sandbox code reaches codec modules lazily (``s.encode("cp1252")``); a dropped worker whose
    interpreter lives under an unreadable directory could then no longer load them.
    """
    import encodings

    directory = Path(encodings.__path__[0])
    if _open_to_everyone(directory):
        return
    for module in pkgutil.iter_modules(encodings.__path__):
        # A few codecs exist only on Windows (mbcs, oem) and fail to import elsewhere.
        with contextlib.suppress(ImportError, LookupError):
            importlib.import_module(f"encodings.{module.name}")


# -- steps ------------------------------------------------------------------------------------


def _current_user() -> tuple[str, int]:
    uid = os.getuid()
    try:
        return pwd.getpwuid(uid).pw_name, uid
    except KeyError:
        return f"uid {uid}", uid


def _libc(notes: list[str]) -> ctypes.CDLL | None:
    try:
        return libc()
    except OSError as exc:
        notes.append(f"confinement: no C library to call: {exc}")
        return None


def _unshare(
    libc: ctypes.CDLL | None, flags: int, what: str, notes: list[str], *, layer: str = "network"
) -> bool:
    if libc is None:
        return False
    if libc.unshare(flags) == 0:
        return True
    notes.append(f"{layer}: no {what}: {os.strerror(ctypes.get_errno())}")
    return False


def _drop_to(uid: int, notes: list[str]) -> bool:
    """Take ``uid`` as every user id and group id, with no supplementary groups."""
    try:
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)  # real, effective and saved: no way back
    except OSError as exc:
        notes.append(f"uid: still root: cannot take the ids {uid}: {exc}")
        return False
    return True


def _prctl(libc: ctypes.CDLL | None, option: int, value: int, what: str, notes: list[str]) -> bool:
    if libc is not None and libc.prctl(option, value, 0, 0, 0) == 0:
        return True
    if libc is not None:
        notes.append(f"{what}: {os.strerror(ctypes.get_errno())}")
    return False


def _can_become_root() -> bool:
    if os.geteuid() == 0:
        return True
    try:
        os.setuid(0)
    except OSError:
        return False
    return True


def _network_namespace() -> str:
    try:
        return os.readlink(_NET_NAMESPACE)
    except OSError:
        return ""


def _open_to_everyone(directory: Path) -> bool:
    """Whether any user may list ``directory`` and pass through every directory above it."""
    try:
        if not os.stat(directory).st_mode & stat.S_IROTH:
            return False
        return all(os.stat(d).st_mode & stat.S_IXOTH for d in (directory, *directory.parents))
    except OSError:
        return False
