"""A seccomp allow list: a worker may make the system calls it needs, and no other.

Built with libseccomp (``pyseccomp``, a ctypes binding of Debian's ``libseccomp2``), which takes
care of the architecture checks (a foreign system-call ABI kills the process) and the x32 quirks.
The filter is compiled to BPF once (``build``, in the zygote) and each worker loads the bytes
with one ``prctl`` (``load``) — cheap enough for every fork.

What a worker needs once it is sealed was found by tracing real workers (the sandbox,
environment and engine test suites, and a numpy/pandas/matplotlib workload): the interpreter's
memory and threads, reading its own runtime (imports happen late), its two pipes, clocks,
randomness, its own limits. ``docs/sandbox-syscalls.md`` gives the reason for each call; a test
keeps it in step with the lists below. Every other call fails with ``EPERM`` — among them
``socket``, ``ptrace``, ``kill``, ``execve``, ``prctl``, every change of a file's mode, owner,
times or attributes, inotify and fanotify, System V and POSIX IPC, namespaces and mounts.

Three refinements:

- calls that name a process (``SELF_ONLY``) are allowed only with the argument that means the
  calling thread itself (``0``): a worker may read or lower its own limits and priority, never
  those of the host, the zygote or another worker — even one running as the same user;
- ``clone`` is allowed only for threads (``CLONE_THREAD``, no namespace flag): a worker cannot
  fork, whatever its limits;
- ``ENOSYS`` (not ``EPERM``) answers the calls the C library retries in an older form
  (``clone3`` then ``clone``), so that the fallback happens.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import tempfile
from typing import Any

from cove.environment.sandbox.worker.libc import libc

ALLOWED = (
    # memory
    "brk", "mmap", "munmap", "mremap", "mprotect", "madvise", "mbind",
    # files already open, and reading the runtime (Landlock and the mount namespace say where)
    "read", "pread64", "write", "lseek", "close", "openat", "newfstatat", "fstat", "statx",
    "getdents64", "ioctl",
    # threads, signals and waiting
    "clone", "futex", "set_robust_list", "rseq", "rt_sigaction", "rt_sigprocmask",
    "rt_sigreturn", "poll", "ppoll", "clock_nanosleep", "restart_syscall",
    # clocks, who it is, randomness
    "clock_gettime", "clock_getres", "gettimeofday", "getpid", "gettid", "geteuid", "getrandom",
    # ending
    "exit", "exit_group",
)  # fmt: skip
"""Calls allowed (``clone`` for threads only, ``ioctl`` for ``TCGETS`` only)."""

_ITSELF = ((0, 0),)  # the first argument, a process or thread id, is 0: the caller
SELF_ONLY: dict[str, tuple[tuple[int, int], ...]] = {
    "prlimit64": _ITSELF,
    "sched_getaffinity": _ITSELF,
    "sched_setaffinity": _ITSELF,
    "sched_getscheduler": _ITSELF,
    "sched_setscheduler": _ITSELF,
    "sched_getparam": _ITSELF,
    "sched_setparam": _ITSELF,
    "sched_getattr": _ITSELF,
    "sched_setattr": _ITSELF,
    "getpriority": ((0, 0), (1, 0)),  # which == PRIO_PROCESS, who == 0
    "setpriority": ((0, 0), (1, 0)),
    "ioprio_get": ((0, 1), (1, 0)),  # which == IOPRIO_WHO_PROCESS, who == 0
    "ioprio_set": ((0, 1), (1, 0)),
}
"""Calls that name a process, allowed only with these ``(argument, value)`` pairs: on itself."""

RETRIED = ("clone3",)
"""Calls refused with ``ENOSYS``: the C library then falls back to an allowed older form."""

_CLONE_THREAD = 0x00010000
_NAMESPACE_FLAGS = 0x7E020000  # CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET
_TCGETS = 0x5401  # isatty(): the only ioctl a worker makes (on the files it opens)
_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2
_OPTIMIZE_BINARY_TREE = 2
_UNKNOWN = -1  # libseccomp's __NR_SCMP_ERROR


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def build() -> bytes:
    """The filter as BPF instructions (8 bytes each) for this machine's architecture.

    Raises:
        OSError: libseccomp is missing or refused a rule.
    """
    try:
        import pyseccomp as seccomp  # type: ignore[import-untyped]
    except (ImportError, OSError, AttributeError, RuntimeError) as exc:  # it loads the C library
        raise OSError(f"libseccomp unavailable: {exc}") from exc
    rules = seccomp.SyscallFilter(seccomp.ERRNO(errno.EPERM))
    with contextlib.suppress(OSError, ValueError):  # a binary search, where libseccomp can
        rules.set_attr(seccomp.Attr.CTL_OPTIMIZE, _OPTIMIZE_BINARY_TREE)
    equal = seccomp.EQ
    for name in ALLOWED:
        if name == "clone":
            mask = _CLONE_THREAD | _NAMESPACE_FLAGS
            threads = seccomp.Arg(0, seccomp.MASKED_EQ, mask, _CLONE_THREAD)
            _add(seccomp, rules, seccomp.ALLOW, name, threads)
        elif name == "ioctl":
            _add(seccomp, rules, seccomp.ALLOW, name, seccomp.Arg(1, equal, _TCGETS))
        else:
            _add(seccomp, rules, seccomp.ALLOW, name)
    for name, pairs in SELF_ONLY.items():
        itself = (seccomp.Arg(index, equal, value) for index, value in pairs)
        _add(seccomp, rules, seccomp.ALLOW, name, *itself)
    for name in RETRIED:
        _add(seccomp, rules, seccomp.ERRNO(errno.ENOSYS), name)
    with tempfile.TemporaryFile() as file:
        rules.export_bpf(file)
        file.seek(0)
        return file.read()


def _add(seccomp: Any, rules: Any, action: int, name: str, *conditions: Any) -> None:
    """Add one rule; a name this libseccomp does not know (a call newer than it) is left out.

    A name it knows but this architecture lacks (``poll`` on arm64) is accepted and ignored.
    """
    number = seccomp.resolve_syscall(seccomp.Arch.NATIVE, name)
    if number != _UNKNOWN:
        rules.add_rule(action, number, *conditions)


def load(program: bytes) -> None:
    """Install ``program`` (from ``build``) on this process; it holds for good.

    Raises:
        OSError: The kernel refused (e.g. without ``no_new_privs``).
    """
    if not program or len(program) % 8:
        raise OSError("an empty or malformed seccomp program")
    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = _SockFprog(len(program) // 8, ctypes.cast(buffer, ctypes.c_void_p))
    if libc().prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"seccomp: {os.strerror(error)}")
