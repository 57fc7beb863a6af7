"""The C library, opened once per process (a zygote opens it, every forked worker reuses it)."""

from __future__ import annotations

import ctypes
import functools


@functools.cache
def libc() -> ctypes.CDLL:
    """The process's C library, with ``errno`` kept for ``ctypes.get_errno``.

    Raises:
        OSError: There is none to open.
    """
    handle = ctypes.CDLL(None, use_errno=True)
    handle.syscall.restype = ctypes.c_long
    return handle
