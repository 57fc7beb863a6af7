"""Saying why a database location cannot be used, in terms of the files a person can fix.

SQLite reports a read-only location as "attempt to write a readonly database" or "unable to
open database file" (it must create the WAL and SHM files beside the database). The file modes
say which it is: the database file itself, or the folder that holds it.
"""

from __future__ import annotations

import os
from pathlib import Path

from cove.errors import StoreError

_FIX = "point COVE_DB or --db at a writable place"


def unwritable(path: str) -> StoreError | None:
    """The error for a database ``path`` this process cannot write, or None when it can.

    Checked with ``os.access`` (real permissions, a read-only file system included).
    """
    file = Path(path)
    folder = file.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent  # a first run creates the missing folders
    if not folder.is_dir():
        return None  # a file stands where a folder should: not a matter of permissions
    folder_ok = os.access(folder, os.W_OK | os.X_OK)
    if not file.exists():
        if folder_ok:
            return None
        return StoreError(
            f"cannot create the database {path}: the folder {folder} is read-only; {_FIX}"
        )
    readers = "`list`, `show`, `search` and `export` can still read it"
    if not os.access(file, os.W_OK):
        return StoreError(f"the database {path} is read-only; {readers}; to run turns, {_FIX}")
    if not folder_ok:
        return StoreError(
            f"the database {path} is in a read-only folder {folder} (SQLite writes its "
            f"{file.name}-wal and {file.name}-shm files beside it); {readers}; to run turns, "
            f"{_FIX}"
        )
    return None


def unreadable(path: str, exc: OSError) -> StoreError:
    """The error for a database file this process may not read."""
    return StoreError(
        f"cannot read the database {path}: {exc.strerror or exc} (check its owner and mode)"
    )
