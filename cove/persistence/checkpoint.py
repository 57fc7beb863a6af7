"""Folding the WAL back into the database file on a thread and connection of its own.

A checkpoint copies pages and fsyncs the file: milliseconds. Run by the store's own connection it
would hold up the next write unit (and, for a unit running on the event loop's thread, the loop).
A PASSIVE checkpoint on a second connection runs alongside writers instead, so the store's
connection never checkpoints (``wal_autocheckpoint = 0``) and asks this thread to, now and then.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading


class Checkpointer:
    """A daemon thread that runs ``PRAGMA wal_checkpoint(PASSIVE)`` when asked.

    Requests made while one runs coalesce into one more run.
    """

    def __init__(self, path: str) -> None:
        self._path = path
        self._wake = threading.Event()
        self._stopping = False
        self._thread = threading.Thread(target=self._serve, name="cove-db checkpoint", daemon=True)
        self._thread.start()

    def request(self) -> None:
        """Ask for a checkpoint soon; returns at once."""
        self._wake.set()

    def _serve(self) -> None:
        conn: sqlite3.Connection | None = None
        try:
            while True:
                self._wake.wait()
                self._wake.clear()
                if self._stopping:
                    return
                # A checkpoint that cannot finish now (a reader holds old pages, the file went
                # away) is simply tried again at the next request.
                with contextlib.suppress(sqlite3.Error):
                    if conn is None:
                        conn = sqlite3.connect(self._path, isolation_level=None)
                    conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
        finally:
            if conn is not None:
                conn.close()

    def close(self) -> None:
        """Stop the thread and close its connection (blocks until it has)."""
        self._stopping = True
        self._wake.set()
        self._thread.join()
