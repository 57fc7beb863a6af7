"""The user namespace of an unprivileged host's zygote, and the ids its workers may take.

An ordinary user can unshare the network and the mount namespace only inside a user namespace
of its own (``enter``). Its id maps decide who a worker is for the kernel:

- with a subordinate range (``/etc/subuid`` and ``/etc/subgid`` name one for the host's user,
  and the set-uid helpers ``newuidmap``/``newgidmap`` of the ``uidmap`` package are installed),
  the namespace maps ``0`` to the host's user and ``1 … count`` to that range. The zygote is
  ``0`` in there; each worker takes an id of the range (``uids.py``): for the kernel it is then
  another user, who owns none of the host's files or processes.
- without, the namespace can only map the host's user to itself: every worker keeps the host's
  user id for the kernel (what it may do to the host is then up to the mount namespace,
  Landlock and seccomp).

Either way the zygote holds every capability inside the namespace, over the namespaces it
creates; a worker lets them go (``drop_capabilities``) before it serves.
"""

from __future__ import annotations

import ctypes
import os
import shlex
import shutil
import subprocess
from dataclasses import dataclass

from cove.environment.sandbox.worker.libc import libc
from cove.environment.sandbox.worker.uids import IdRange

CLONE_NEWUSER = 0x10000000
_HELPERS_PATH = "/usr/bin:/bin:/usr/sbin:/sbin"
_MAP_TIMEOUT_S = 10.0
_LINUX_CAPABILITY_VERSION_3 = 0x20080522
_PR_SET_DUMPABLE = 4


@dataclass(frozen=True)
class Subordinate:
    """The subordinate ids of the host's user, and the helpers that map them."""

    uids: tuple[int, int]  # (first, count)
    gids: tuple[int, int]
    newuidmap: str
    newgidmap: str


def subordinate(user: str, uid: int, gid: int) -> Subordinate | None:
    """The host's user's subordinate ranges, when it has both and the helpers are installed."""
    newuidmap = shutil.which("newuidmap", path=_HELPERS_PATH)
    newgidmap = shutil.which("newgidmap", path=_HELPERS_PATH)
    uids = _range_of("/etc/subuid", user, uid)
    gids = _range_of("/etc/subgid", user, gid)
    if newuidmap is None or newgidmap is None or uids is None or gids is None:
        return None
    return Subordinate(uids, gids, newuidmap, newgidmap)


def _range_of(path: str, user: str, own: int) -> tuple[int, int] | None:
    """The first range of ``path`` (``name-or-id:first:count`` lines) with at least two ids."""
    try:
        with open(path, encoding="utf-8") as file:
            lines = file.read().splitlines()
    except OSError:
        return None
    for line in lines:
        owner, _, rest = line.strip().partition(":")
        first, _, count = rest.partition(":")
        if owner in (user, str(own)) and first.isdigit() and count.isdigit() and int(count) > 1:
            return int(first), int(count)
    return None


def enter(flags: int, user: str, notes: list[str]) -> IdRange | None:
    """Unshare a user namespace (with ``flags``'s other namespaces) and write its id maps.

    Args:
        flags: The other ``CLONE_NEW*`` namespaces to create in it.
        user: The host's user's name (for ``/etc/subuid``).
        notes: Where to say what was left out and why.

    Returns:
        The ids of the subordinate range workers may take, or None when they keep the host's.

    Raises:
        OSError: The kernel refused the namespace (nothing changed).
    """
    uid, gid = os.getuid(), os.getgid()
    ranges = subordinate(user, uid, gid)
    # /proc/self/*_map belong to the process only while it is dumpable (a change of user clears it).
    if libc().prctl(_PR_SET_DUMPABLE, 1, 0, 0, 0) != 0:
        notes.append(f"uid: cannot become dumpable to map ids: {os.strerror(ctypes.get_errno())}")
    helper = _start_helper(ranges, uid, gid) if ranges is not None else None
    if libc().unshare(CLONE_NEWUSER | flags) != 0:
        error = ctypes.get_errno()
        if helper is not None:
            helper.kill()
            helper.wait()
        raise OSError(error, os.strerror(error))
    if ranges is not None and helper is not None and _mapped_by(helper):
        return IdRange(1, ranges.uids[1], ranges.uids[0])
    if ranges is None:
        notes.append(
            "uid: the host is not root and has no subordinate ids (/etc/subuid and newuidmap): "
            "workers keep the host's user id"
        )
    else:
        notes.append("uid: newuidmap/newgidmap failed: workers keep the host's user id")
    try:
        _map_self(uid, gid)
    except OSError as exc:  # the namespaces exist; without ids nothing can be created in them
        notes.append(f"mount: cannot map ids in the user namespace: {exc.strerror or exc}")
    return None


def _start_helper(ranges: Subordinate, uid: int, gid: int) -> subprocess.Popen[bytes] | None:
    """A shell, started before the namespace exists, that maps it once told (one line).

    The set-uid helpers must run outside the new namespace, where its creator's user is.
    """
    pid = str(os.getpid())
    gid_map = [ranges.newgidmap, pid, "0", str(gid), "1", "1", *map(str, ranges.gids)]
    uid_map = [ranges.newuidmap, pid, "0", str(uid), "1", "1", *map(str, ranges.uids)]
    script = f"read go && {shlex.join(gid_map)} && {shlex.join(uid_map)}"
    try:
        return subprocess.Popen(
            ["/bin/sh", "-c", script],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={"PATH": _HELPERS_PATH},
        )
    except OSError:
        return None


def _mapped_by(helper: subprocess.Popen[bytes]) -> bool:
    """Let the helper map the namespace; whether both maps were written."""
    assert helper.stdin is not None
    try:
        helper.stdin.write(b"go\n")
        helper.stdin.close()
        return helper.wait(_MAP_TIMEOUT_S) == 0 and _uid_mapped()
    except (OSError, subprocess.TimeoutExpired):
        helper.kill()
        helper.wait()
        return False


def _uid_mapped() -> bool:
    return bool(_read("/proc/self/uid_map").strip())


def _map_self(uid: int, gid: int) -> None:
    """Map the host's user and group to themselves (what an ordinary user may always write).

    Raises:
        OSError: The kernel refused.
    """
    if not _uid_mapped():
        _write("/proc/self/uid_map", f"{uid} {uid} 1\n")
    if _read("/proc/self/gid_map").strip():
        return  # mapped by newgidmap already
    _write("/proc/self/setgroups", "deny\n")
    _write("/proc/self/gid_map", f"{gid} {gid} 1\n")


def _read(path: str) -> bytes:
    """A small ``/proc`` file (bytes: no codec needed, some may be out of reach already)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        return os.read(fd, 4096)
    finally:
        os.close(fd)


def _write(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    ]


def drop_capabilities() -> None:
    """Give up every capability (effective, permitted, inheritable), for good.

    Raises:
        OSError: The kernel refused, or some capability is still held afterwards.
    """
    header = _CapHeader(_LINUX_CAPABILITY_VERSION_3, 0)
    empty = (_CapData * 2)()
    if libc().capset(ctypes.byref(header), empty) != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"capset: {os.strerror(error)}")
    held = (_CapData * 2)()
    if libc().capget(ctypes.byref(header), held) != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"capget: {os.strerror(error)}")
    if any(d.effective or d.permitted or d.inheritable for d in held):
        raise OSError("capabilities still held after capset")
