"""Landlock: the kernel's unprivileged access control, so a worker sees no file but its runtime.

A worker needs no file of the host (the ``files`` extension runs in the host): only the Python
runtime, read-only, for the modules sandbox code imports lazily (and the directories of its
shared libraries, for one loaded late: ``rootfs.readable_paths``). ``prepare`` builds a ruleset
once (in the zygote, or a cold worker before it seals itself) that

- handles every file-system right the kernel knows and grants only reading files and listing
  directories beneath those directories: no write, no execute, nothing anywhere else (the
  database, the project checkout, ``~/.ssh``, ``/proc``, other workspaces);
- (ABI 4+) handles TCP bind and connect with no rule: no TCP at all, loopback included;
- (ABI 6+) scopes signals and abstract Unix sockets: the worker can signal, and connect to, only
  processes of its own Landlock domain — not the host, the zygote nor another worker, even one
  running as the same user (the unprivileged case).

``restrict`` then enforces it on the calling process (a worker right after the fork); every
worker gets a domain of its own. It needs ``no_new_privs`` (or ``CAP_SYS_ADMIN``).
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import os
import sys
from collections.abc import Iterable

from cove.environment.sandbox.worker.libc import libc

_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446  # the same on x86_64 and arm64
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1

_FS_READ_FILE = 1 << 2
_FS_READ_DIR = 1 << 3
_FS_RIGHTS_BY_ABI = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1, 5: (1 << 16) - 1}
_NET_BIND_TCP, _NET_CONNECT_TCP = 1, 2
_SCOPE_ABSTRACT_UNIX, _SCOPE_SIGNAL = 1, 2


class _RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1  # packed in the kernel's header
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def abi_version() -> int:
    """The Landlock ABI this kernel offers; 0 when it has none (or not Linux)."""
    if not sys.platform.startswith("linux") or os.uname().machine not in ("x86_64", "aarch64"):
        return 0
    version = libc().syscall(_CREATE_RULESET, None, ctypes.c_size_t(0), _CREATE_RULESET_VERSION)
    return max(int(version), 0)


def runtime_paths() -> list[str]:
    """The directories of the Python runtime a worker may read: the standard library, its
    compiled modules and the installed packages (never the directories of ``sys.path`` that
    are not package directories, such as a source checkout)."""
    found = [os.path.dirname(os.__file__)]
    with contextlib.suppress(ImportError):
        import _ctypes  # a compiled module: where lib-dynload is

        found.append(os.path.dirname(_ctypes.__file__))
    found += [p for p in sys.path if os.path.basename(p) in ("site-packages", "dist-packages")]
    unique: list[str] = []
    for path in found:
        if os.path.isdir(path) and path not in unique:
            unique.append(path)
    return unique


class Ruleset:
    """A prepared Landlock ruleset (a descriptor), ready to be enforced by ``restrict``."""

    def __init__(self, fd: int, abi: int) -> None:
        self.fd = fd
        self.abi = abi

    @classmethod
    def prepare(cls, readable: Iterable[str]) -> Ruleset:
        """A ruleset that grants reading beneath ``readable`` and nothing else.

        Raises:
            OSError: The kernel has no Landlock, or refused the ruleset.
        """
        abi = abi_version()
        if abi < 1:
            raise OSError("Landlock is not available in this kernel")
        fs = _FS_RIGHTS_BY_ABI[max(v for v in _FS_RIGHTS_BY_ABI if v <= abi)]
        attr = _RulesetAttr(
            handled_access_fs=fs,
            handled_access_net=(_NET_BIND_TCP | _NET_CONNECT_TCP) if abi >= 4 else 0,
            scoped=(_SCOPE_ABSTRACT_UNIX | _SCOPE_SIGNAL) if abi >= 6 else 0,
        )
        size = 8 if abi < 4 else 16 if abi < 6 else 24
        c = libc()
        fd = int(c.syscall(_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), 0))
        if fd < 0:
            raise OSError(ctypes.get_errno(), f"landlock: {os.strerror(ctypes.get_errno())}")
        # Out of the way of the descriptors a forked worker settles its pipes on (3 and 4).
        high = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 64)
        os.close(fd)
        fd = high
        try:
            for path in readable:
                beneath = os.open(path, os.O_PATH | os.O_CLOEXEC)
                try:
                    rule = _PathBeneathAttr(_FS_READ_FILE | _FS_READ_DIR, beneath)
                    if c.syscall(_ADD_RULE, fd, _RULE_PATH_BENEATH, ctypes.byref(rule), 0):
                        error = ctypes.get_errno()
                        raise OSError(error, f"landlock rule for {path}: {os.strerror(error)}")
                finally:
                    os.close(beneath)
        except BaseException:
            os.close(fd)
            raise
        return cls(fd, abi)

    def restrict(self) -> None:
        """Enforce the ruleset on this process (for good) and let go of the descriptor.

        Raises:
            OSError: The kernel refused (e.g. without ``no_new_privs``).
        """
        try:
            if libc().syscall(_RESTRICT_SELF, self.fd, 0):
                error = ctypes.get_errno()
                raise OSError(error, f"landlock: {os.strerror(error)}")
        finally:
            self.close()

    def close(self) -> None:
        """Let go of the descriptor (a zygote keeps it for every fork)."""
        if self.fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = -1

    def describe(self) -> str:
        """What the ruleset stops, for the confinement report."""
        parts = ["files: runtime read-only"]
        if self.abi >= 4:
            parts.append("no TCP")
        if self.abi >= 6:
            parts.append("signals and abstract sockets scoped")
        return f"ABI {self.abi}: " + ", ".join(parts)
