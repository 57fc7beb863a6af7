"""A private PostgreSQL server (15 here) for tests and benches: ``initdb`` into a temporary
folder.

The server listens on a Unix socket in its own folder only (no TCP port, nothing to collide
with). PostgreSQL refuses to run as root, so when tests run as root the server runs as
``nobody``: its folder is made in the system temporary directory (which every user may cross)
and handed to that user. Every test gets a database of its own (``database``), dropped by
nothing: the whole folder goes when the server stops.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path
from types import TracebackType
from urllib.parse import quote


def _bin() -> Path:
    """Where ``initdb`` and ``pg_ctl`` are: ``$COVE_PG_BIN``, else Debian's newest PostgreSQL
    (15 on this project's machines)."""
    if "COVE_PG_BIN" in os.environ:
        return Path(os.environ["COVE_PG_BIN"])
    found = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/initdb"),
        key=lambda p: int(p.parent.parent.name) if p.parent.parent.name.isdigit() else 0,
    )
    return found[-1].parent if found else Path("/usr/lib/postgresql/15/bin")


BIN = _bin()
#: Who runs the server when the tests run as root.
SERVER_USER = "nobody"
SUPERUSER = "cove"


def available() -> bool:
    """Whether the PostgreSQL server binaries are installed."""
    return (BIN / "initdb").exists() and (BIN / "pg_ctl").exists()


class PostgresServer:
    """Start with ``with PostgresServer() as server``; ``server.database()`` gives a new URL."""

    def __init__(self, fsync: bool = False) -> None:
        self._fsync = fsync
        self.folder = Path(tempfile.mkdtemp(prefix="cove-pg-"))
        self._user = SERVER_USER if os.geteuid() == 0 else None
        self._started = False

    def _run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(a) for a in args],
            check=True,
            capture_output=True,
            text=True,
            user=self._user,
            cwd=self.folder,
        )

    @property
    def _options(self) -> str:
        options = f"-k {self.socket_dir} -c listen_addresses='' -c max_connections=200"
        if not self._fsync:
            options += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        return options

    @property
    def socket_dir(self) -> Path:
        """The folder holding the server's socket."""
        return self.folder / "socket"

    def start(self) -> PostgresServer:
        """initdb and start the server; returns self."""
        data = self.folder / "data"
        self.socket_dir.mkdir()
        if self._user is not None:
            account = pwd.getpwnam(self._user)
            self.folder.chmod(0o755)
            for path in (self.folder, self.socket_dir):
                os.chown(path, account.pw_uid, account.pw_gid)
        self._run(
            BIN / "initdb", "-D", data, "-U", SUPERUSER, "--auth=trust", "--encoding=UTF8",
            "--locale=C.UTF-8", "--no-sync",
        )  # fmt: skip
        self.resume()
        self._started = True
        return self

    def url(self, database: str = "postgres") -> str:
        """The URL of ``database`` on this server."""
        return f"postgresql://{SUPERUSER}@/{database}?host={quote(str(self.socket_dir))}"

    def database(self) -> str:
        """Create an empty database and return its URL."""
        name = "t" + uuid.uuid4().hex[:16]
        self._run(
            BIN / "psql", "-h", self.socket_dir, "-U", SUPERUSER, "-d", "postgres", "-q",
            "-c", f"CREATE DATABASE {name}",
        )  # fmt: skip
        return self.url(name)

    def halt(self) -> None:
        """Stop the server, keeping its data (``resume`` starts it again): the database
        becomes unreachable. Its clients are disconnected at once; what they committed stays
        (a fast shutdown writes it out, which ``synchronous_commit=off`` may not have yet)."""
        self._run(BIN / "pg_ctl", "-D", self.folder / "data", "-m", "fast", "-w", "stop")

    def resume(self) -> None:
        """Start a server ``halt`` stopped, on the same data and socket."""
        self._run(
            BIN / "pg_ctl", "-D", self.folder / "data", "-l", self.folder / "server.log",
            "-o", self._options, "-w", "-t", "60", "start",
        )  # fmt: skip

    def stop(self) -> None:
        """Stop the server (unless ``halt`` did) and remove its folder."""
        try:
            if self._started:
                with contextlib.suppress(subprocess.CalledProcessError):  # halted already
                    self.halt()
        finally:
            self._started = False
            shutil.rmtree(self.folder, ignore_errors=True)

    def __enter__(self) -> PostgresServer:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
