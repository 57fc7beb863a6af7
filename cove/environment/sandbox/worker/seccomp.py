"""A seccomp filter: the system calls a worker never needs fail with ``EPERM``.

Built with libseccomp (``pyseccomp``, a ctypes binding of Debian's ``libseccomp2``), which takes
care of the architecture checks (a foreign system-call ABI kills the process) and the x32 quirks.
The filter is compiled to BPF once (``build``, in the zygote) and each worker loads the bytes
with one ``prctl`` (``load``) — cheap enough for every fork.

It is a deny list, not an allow list: CPython's own needs vary with the version and the modules a
block imports, and an allow list that misses one call breaks sandbox code in ways that are hard
to see. What is denied is what gives a way out of the process or into the kernel's rarer
corners: sockets of every family (no network, no Unix socket to the host, no netlink), tracing
and reading other processes' memory, signals to other processes, namespaces and mounts, kernel
keyrings, BPF, perf, io_uring, userfaultfd, module loading, ``execve`` and ``prctl`` (so the
death signal and the non-dumpable flag cannot be undone). ``clone3`` answers ``ENOSYS`` so that
the C library falls back to ``clone``, whose namespace flags are checked.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import tempfile

from cove.environment.sandbox.worker.libc import libc

DENIED = (
    "socket", "socketpair", "ptrace", "process_vm_readv", "process_vm_writev", "kcmp",
    "pidfd_open", "pidfd_getfd", "pidfd_send_signal", "kill", "tkill", "tgkill",
    "rt_sigqueueinfo", "rt_tgsigqueueinfo", "mount", "umount2", "pivot_root", "chroot",
    "unshare", "setns", "fsopen", "fsmount", "fsconfig", "fspick", "open_tree", "move_mount",
    "mount_setattr", "open_by_handle_at", "name_to_handle_at", "keyctl", "add_key",
    "request_key", "bpf", "perf_event_open", "userfaultfd", "io_uring_setup",
    "io_uring_enter", "io_uring_register", "init_module", "finit_module", "delete_module",
    "kexec_load", "kexec_file_load", "reboot", "swapon", "swapoff", "acct", "quotactl",
    "sethostname", "setdomainname", "personality", "iopl", "ioperm", "vhangup", "execve",
    "execveat", "prctl", "memfd_create", "setuid", "setgid", "setreuid", "setregid",
    "setresuid", "setresgid", "setgroups", "setfsuid", "setfsgid", "capset", "setpgid",
    "setsid", "landlock_create_ruleset", "landlock_add_rule", "seccomp",
)  # fmt: skip
"""The system calls every worker is refused."""

_NAMESPACE_FLAGS = (
    0x00020000,  # CLONE_NEWNS
    0x02000000,  # CLONE_NEWCGROUP
    0x04000000,  # CLONE_NEWUTS
    0x08000000,  # CLONE_NEWIPC
    0x10000000,  # CLONE_NEWUSER
    0x20000000,  # CLONE_NEWPID
    0x40000000,  # CLONE_NEWNET
)
_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def build() -> bytes:
    """The filter as BPF instructions (8 bytes each) for this machine's architecture.

    Raises:
        OSError: libseccomp is missing or refused a rule.
    """
    try:
        import pyseccomp as seccomp  # type: ignore[import-untyped]
    except (ImportError, OSError, AttributeError) as exc:  # the binding loads the C library
        raise OSError(f"libseccomp unavailable: {exc}") from exc
    rules = seccomp.SyscallFilter(seccomp.ALLOW)
    for name in DENIED:
        try:
            rules.add_rule(seccomp.ERRNO(errno.EPERM), name)
        except (OSError, ValueError):
            continue  # a call this architecture does not have
    with contextlib.suppress(OSError, ValueError):
        rules.add_rule(seccomp.ERRNO(errno.ENOSYS), "clone3")
    for flag in _NAMESPACE_FLAGS:
        rules.add_rule(
            seccomp.ERRNO(errno.EPERM), "clone", seccomp.Arg(0, seccomp.MASKED_EQ, flag, flag)
        )
    with tempfile.TemporaryFile() as file:
        rules.export_bpf(file)
        file.seek(0)
        return file.read()


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
