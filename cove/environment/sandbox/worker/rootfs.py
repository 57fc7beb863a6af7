"""A root of its own: a file system holding only what the Python runtime reads, and read-only.

``build`` runs once in a fresh mount namespace (the zygote's, or a cold worker's: see
``confine.prepare``). It mounts an empty tmpfs, binds into it, each at its own path and
read-only, the directories the runtime reads (``readable_paths``: the standard library, its
compiled modules, the installed packages, and the directories of the shared libraries the
process has loaded) and a few device nodes (``DEVICES``); makes the tmpfs the root
(``pivot_root``), detaches the old root, remounts the new one read-only and moves to ``/``.

A worker then finds the runtime and nothing else: no ``/proc`` (no other process to list, no
owner to learn), no ``/tmp``, no ``/dev/shm``, no home, no database, no checkout, no workspace —
there is no path to ``stat``, ``chmod``, watch or open. The directories above a bound one are
the tmpfs's own (``0755``), so a worker of another user also reaches a runtime installed under
``/root``. Binding needs ``CAP_SYS_ADMIN`` in the namespace's owner: root, or the user namespace
an unprivileged host's zygote creates (``userns.py``).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
from collections.abc import Iterable, Iterator

from cove.environment.sandbox.worker.landlock import runtime_paths
from cove.environment.sandbox.worker.libc import libc

DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")
"""The device nodes a worker's root holds (its standard streams are already ``/dev/null``)."""

_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 1, 2, 4, 8
_MS_REMOUNT, _MS_BIND, _MS_REC, _MS_PRIVATE = 32, 4096, 16384, 1 << 18
_MS_NOATIME, _MS_NODIRATIME, _MS_RELATIME, _MS_STRICTATIME = 1024, 2048, 1 << 21, 1 << 24
_MNT_DETACH = 2
_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}
_BASES = ("/tmp", "/mnt", "/run")  # where the new root is put together (covered, not touched)
_OLD = "/.old-root"


def readable_paths() -> list[str]:
    """The directories a worker may read: the runtime's and those of its shared libraries.

    Must be called while ``/proc`` is still there (before ``build``).
    """
    paths = runtime_paths()
    with contextlib.suppress(OSError), open("/proc/self/maps", encoding="utf-8") as maps:
        for line in maps:
            file = line.rstrip("\n").partition("/")[2]
            if ".so" in os.path.basename(file):
                directory = os.path.dirname("/" + file)
                if directory not in paths and os.path.isdir(directory):
                    paths.append(directory)
    return paths


def build(paths: Iterable[str], devices: Iterable[str] = DEVICES) -> None:
    """Make a new root holding read-only binds of ``paths`` and ``devices``, and enter it.

    The calling process must be alone in a mount namespace of its own. Nothing of the host's
    file system stays reachable: the old root is detached and the working directory is ``/``.

    Raises:
        OSError: The kernel refused a step; before the switch of root everything is undone,
            after it (the old root could not be detached) the process must not trust its root.
    """
    sources = _open_all(_outermost(paths)), _open_all(d for d in devices if os.path.exists(d))
    try:
        _mount(None, "/", None, _MS_REC | _MS_PRIVATE)  # nothing done here reaches the host
        base = next(b for b in _BASES if os.path.isdir(b) and not os.path.islink(b))
        _mount("tmpfs", base, "tmpfs", _MS_NOSUID | _MS_NODEV, "mode=0755")
        try:
            for path, fd in sources[0].items():
                _bind(fd, base + path, directory=True)
            for path, fd in sources[1].items():
                _bind(fd, base + path, directory=False)
            os.mkdir(base + _OLD, 0o700)
            _pivot_root(base, base + _OLD)
        except BaseException:
            with contextlib.suppress(OSError):
                _umount(base)
            raise
    finally:
        for fd in (*sources[0].values(), *sources[1].values()):
            os.close(fd)
    os.chdir("/")
    _umount(_OLD)
    os.rmdir(_OLD)
    _mount(None, "/", None, _MS_REMOUNT | _MS_BIND | _MS_RDONLY | _MS_NOSUID | _MS_NODEV)


def _outermost(paths: Iterable[str]) -> list[str]:
    """``paths`` (absolute, normalised) without those inside another one of them."""
    kept: list[str] = []
    for path in sorted({os.path.normpath(p) for p in paths if os.path.isabs(p)}):
        if not any(path == k or path.startswith(k.rstrip("/") + "/") for k in kept):
            kept.append(path)
    return kept


def _open_all(paths: Iterable[str]) -> dict[str, int]:
    """An ``O_PATH`` descriptor of each path: binds come from them once ``/tmp`` is covered."""
    opened: dict[str, int] = {}
    try:
        for path in paths:
            opened[path] = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except BaseException:
        for fd in opened.values():
            os.close(fd)
        raise
    return opened


def _bind(fd: int, target: str, *, directory: bool) -> None:
    """Bind what ``fd`` is at ``target`` (created in the tmpfs), then make the bind read-only.

    The remount keeps the flags the source's mount has (a user namespace may not clear those
    its owner set); device nodes keep working (no ``nodev``).
    """
    for parent in _parents(os.path.dirname(target)):
        with contextlib.suppress(FileExistsError):
            os.mkdir(parent, 0o755)
    if directory:
        with contextlib.suppress(FileExistsError):
            os.mkdir(target, 0o755)
    else:
        os.close(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644))
    source = f"/proc/self/fd/{fd}"
    try:
        _mount(source, target, None, _MS_BIND)
    except OSError:  # submounts a user namespace may not leave out: take them along
        _mount(source, target, None, _MS_BIND | _MS_REC)
    flags = _MS_REMOUNT | _MS_BIND | _MS_RDONLY | _MS_NOSUID | _source_flags(fd)
    _mount(None, target, None, flags | (_MS_NODEV if directory else 0))


def _parents(directory: str) -> Iterator[str]:
    """``directory`` and the directories above it, outermost first."""
    parts = directory.strip("/").split("/")
    for end in range(1, len(parts) + 1):
        yield "/" + "/".join(parts[:end])


def _source_flags(fd: int) -> int:
    """The mount flags of the mount holding ``fd`` that a bind's remount must repeat."""
    flag = os.fstatvfs(fd).f_flag
    kept = flag & (_MS_NOSUID | _MS_NODEV | _MS_NOEXEC | _MS_NOATIME | _MS_NODIRATIME)
    if flag & os.ST_RELATIME:
        kept |= _MS_RELATIME
    elif not flag & (os.ST_NOATIME | os.ST_RELATIME):
        kept |= _MS_STRICTATIME
    return kept


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str = "") -> None:
    encoded = [None if s is None else s.encode() for s in (source, target, fstype)]
    if libc().mount(*encoded, ctypes.c_ulong(flags), data.encode() if data else None) != 0:
        _fail(f"mount {target}")


def _umount(target: str) -> None:
    if libc().umount2(target.encode(), _MNT_DETACH) != 0:
        _fail(f"umount {target}")


def _pivot_root(new: str, old: str) -> None:
    number = _PIVOT_ROOT.get(os.uname().machine)
    if number is None:
        raise OSError(f"pivot_root: no system call number for {os.uname().machine}")
    if libc().syscall(number, new.encode(), old.encode()) != 0:
        _fail("pivot_root")


def _fail(what: str) -> None:
    error = ctypes.get_errno()
    raise OSError(error, f"{what}: {os.strerror(error)}")
