"""Confining a worker: another user, no network — defence in depth behind RestrictedPython.

The worker calls ``confine`` once, after its imports and before it serves the first frame. Every
step is best effort: a step the host does not allow is recorded in the returned ``Confinement``
(which the worker reports in its ``ready`` frame) and the worker carries on.

- As root: a new, empty network namespace (``unshare(CLONE_NEWNET)``; not even the host's loopback
  services are reachable from it), then the ids of ``nobody`` with no supplementary groups. The
  drop is then checked: ``setuid(0)`` must fail.
- Otherwise (or when the root-only namespace was refused): a new user namespace holding a new
  network namespace, where the kernel allows unprivileged ones.
- Always ``no_new_privs``. Once it is nobody, the worker is also made non-dumpable: every worker
  is nobody, and none may trace another or read its memory through ``/proc``.

Once the ids are dropped the interpreter's own files may be out of reach (a Python installed under
``/root``), so the worker imports what it could need lazily beforehand (``preload_codecs``).
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
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal, get_args

from cove.environment.sandbox.frames import ProtocolError

Network = Literal["isolated", "host"]

UNPRIVILEGED_USER = "nobody"
_NOBODY_ID = 65534  # the conventional id of nobody, when the user database has no entry
_CLONE_NEWUSER = 0x10000000
_CLONE_NEWNET = 0x40000000
_PR_SET_DUMPABLE = 4
_PR_SET_NO_NEW_PRIVS = 38
_NET_NAMESPACE = "/proc/self/ns/net"


@dataclass(frozen=True)
class Confinement:
    """What confinement a worker achieved, as it reported it.

    Attributes:
        enabled: Whether confinement was asked for (``Settings.sandbox_confine``).
        user: The name of the user the worker runs as (``"nobody"`` once root dropped its ids).
        uid: That user's id as the host sees it.
        network: ``"isolated"`` in a network namespace of its own, else ``"host"``.
        notes: The steps that did not happen and why, and fallbacks taken.
    """

    enabled: bool
    user: str
    uid: int
    network: Network
    notes: tuple[str, ...] = ()

    def as_frame(self) -> dict[str, Any]:
        """The wire form, for the worker's ``ready`` frame."""
        frame = asdict(self)
        frame["notes"] = list(self.notes)
        return frame

    @classmethod
    def from_frame(cls, data: Any) -> Confinement:
        """Check and rebuild a worker's report.

        Raises:
            ProtocolError: The report is malformed.
        """
        if not isinstance(data, dict):
            raise ProtocolError("malformed confinement report")
        enabled, user, uid = data.get("enabled"), data.get("user"), data.get("uid")
        network, notes = data.get("network"), data.get("notes", [])
        if (
            type(enabled) is not bool
            or not isinstance(user, str)
            or type(uid) is not int
            or network not in get_args(Network)
            or not isinstance(notes, list)
            or not all(isinstance(note, str) for note in notes)
        ):
            raise ProtocolError("malformed confinement report")
        checked: Network = "isolated" if network == "isolated" else "host"
        return cls(enabled, user[:200], uid, checked, tuple(note[:500] for note in notes[:20]))


NOT_REPORTED = Confinement(False, "unknown", -1, "host", ("the worker did not report",))
"""The confinement of a worker that has not said yet."""


def confine(enabled: bool) -> Confinement:
    """Confine the calling process as far as the host allows (see the module docstring).

    Args:
        enabled: False leaves the process as it is and reports that.
    """
    user, uid = _current_user()
    if not enabled:
        return Confinement(False, user, uid, "host", ("switched off (sandbox_confine)",))
    if not sys.platform.startswith("linux"):
        return Confinement(True, user, uid, "host", (f"not available on {sys.platform}",))
    notes: list[str] = []
    libc = _libc(notes)
    host_network = _network_namespace()
    isolated = False
    if os.geteuid() == 0:
        isolated = _unshare(libc, _CLONE_NEWNET, "network namespace", notes)
        dropped = _drop_to_nobody(notes)
        if dropped is not None:
            user, uid = dropped
            # Whatever fs.suid_dumpable says: every worker is nobody, none may trace another.
            _prctl(libc, _PR_SET_DUMPABLE, 0, "non-dumpable", notes)
    if not isolated:
        isolated = _unshare(libc, _CLONE_NEWUSER | _CLONE_NEWNET, "user+network namespace", notes)
    _prctl(libc, _PR_SET_NO_NEW_PRIVS, 1, "no_new_privs", notes)
    if _can_become_root():
        notes.append("the worker can still become root")
        user, uid = "root", 0
    if not os.access(".", os.X_OK):
        os.chdir("/")
        notes.append("working directory not accessible: moved to /")
    if isolated and _network_namespace() == host_network:
        isolated = False
        notes.append("network namespace unchanged after unshare")
    return Confinement(True, user, uid, "isolated" if isolated else "host", tuple(notes))


def enter_directory(path: str) -> str:
    """Change to ``path``, or to ``/`` when this (dropped) process may not enter it.

    The worker needs no file access (files are handled by the host), so a workspace closed to
    ``nobody`` is no reason to fail.

    Returns:
        The directory entered.

    Raises:
        OSError: ``path`` does not exist or is not a directory.
    """
    try:
        os.chdir(path)
    except PermissionError:
        os.chdir("/")
        return "/"
    return path


def will_drop_user(enabled: bool) -> bool:
    """Whether ``confine(enabled)`` is going to change the user of this process."""
    return enabled and sys.platform.startswith("linux") and os.geteuid() == 0


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
        return ctypes.CDLL(None, use_errno=True)
    except OSError as exc:
        notes.append(f"no C library to call: {exc}")
        return None


def _unshare(libc: ctypes.CDLL | None, flags: int, what: str, notes: list[str]) -> bool:
    if libc is None:
        return False
    if libc.unshare(flags) == 0:
        return True
    notes.append(f"no {what}: {os.strerror(ctypes.get_errno())}")
    return False


def _drop_to_nobody(notes: list[str]) -> tuple[str, int] | None:
    """Take the ids of ``nobody``, with no supplementary groups; None when refused."""
    try:
        entry = pwd.getpwnam(UNPRIVILEGED_USER)
        uid, gid = entry.pw_uid, entry.pw_gid
    except KeyError:
        uid = gid = _NOBODY_ID
    try:
        os.setgroups([])
        os.setresgid(gid, gid, gid)
        os.setresuid(uid, uid, uid)  # real, effective and saved: no way back
    except OSError as exc:
        notes.append(f"still root: cannot take the ids of {UNPRIVILEGED_USER}: {exc}")
        return None
    return UNPRIVILEGED_USER, uid


def _prctl(libc: ctypes.CDLL | None, option: int, value: int, what: str, notes: list[str]) -> None:
    if libc is not None and libc.prctl(option, value, 0, 0, 0) != 0:
        notes.append(f"no {what}: {os.strerror(ctypes.get_errno())}")


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
