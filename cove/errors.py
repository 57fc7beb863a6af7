"""The one exception tree of cove.

Every error cove raises on purpose is a ``CoveError``. Foreign exceptions (sqlite3, openai, a dead
worker process, the file system) are translated where they enter, with ``raise X(...) from exc``.
Each channel maps ``CoveError`` to its surface in one place.

::

    CoveError
    ├── ConfigError          bad settings, flags or environment
    ├── NotFound             unknown conversation / turn / variable id
    │   └── AmbiguousId      an id prefix that matches several conversations
    ├── Busy                 the conversation is driven by another turn or process
    ├── DeliveryTaken        a delivery's turn started before, or another process holds it
    ├── QuotaExceeded        files would take a workspace past its quota
    ├── StoreError           the database cannot be opened, migrated or written
    │   ├── NotADatabase     the file is not a SQLite database (it is never modified)
    │   └── SchemaTooNew     the database was written by a newer cove
    ├── CodecError           a value cannot be encoded or decoded
    │   └── ValueTooLarge    too large or too deeply nested for a snapshot
    ├── SandboxError         the sandbox worker failed (start-up, crash, protocol)
    ├── ModelError           the model endpoint failed or answered unusably
    ├── ListenError          a server cannot listen on its address (port in use, …)
    └── MissingExtra         a command needs an install extra that is not installed
"""

from __future__ import annotations

from collections.abc import Sequence


class CoveError(Exception):
    """Base class of every error cove raises on purpose."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class ConfigError(CoveError):
    """Raised when settings, flags or environment variables are invalid.

    ``setting`` is the flat key of the one setting at fault, when there is one: the loader
    adds where its value came from (an environment variable, a config file) to the message.
    """

    def __init__(self, message: str, *, setting: str | None = None) -> None:
        super().__init__(message)
        self.setting = setting


class NotFound(CoveError):
    """Raised when an id (conversation, turn, variable, version) does not exist."""

    def __init__(self, kind: str, key: str, message: str | None = None) -> None:
        super().__init__(message or f"no {kind} matches {key!r}")
        self.kind = kind
        self.key = key


class AmbiguousId(NotFound):
    """Raised when an id prefix matches more than one conversation."""

    def __init__(self, kind: str, key: str, candidates: Sequence[str]) -> None:
        shown = ", ".join(candidates[:10])
        more = f" (and {len(candidates) - 10} more)" if len(candidates) > 10 else ""
        super().__init__(kind, key, f"{kind} prefix {key!r} is ambiguous: it matches {shown}{more}")
        self.candidates = list(candidates)


class Busy(CoveError):
    """Raised when a conversation is already being driven by another turn or process."""

    def __init__(self, conversation_id: str, owner: str | None = None, message: str | None = None):
        super().__init__(
            message
            or f"conversation {conversation_id} is busy: another cove process is running a turn "
            f"in it (lease held by {owner or 'unknown'}); try again when it finishes"
        )
        self.conversation_id = conversation_id
        self.owner = owner


class DeliveryTaken(CoveError):
    """Raised when a turn sent for a delivery from outside (a Telegram update kept in the inbox)
    does not start: the delivery started its turn before (``ran``: the process that started it
    died), or another process holds the delivery now."""

    def __init__(self, key: str, *, ran: bool) -> None:
        super().__init__(
            f"delivery {key} started its turn before"
            if ran
            else f"delivery {key} is held by another process"
        )
        self.key = key
        self.ran = ran


class QuotaExceeded(CoveError):
    """Raised when files would take a conversation's workspace past its quota or entry limit."""


class StoreError(CoveError):
    """Raised when the database cannot be opened, migrated, read or written."""


class NotADatabase(StoreError):
    """Raised when the database path is not a cove database (not SQLite, foreign, a folder)."""

    def __init__(self, path: str, reason: str = "not a SQLite file") -> None:
        super().__init__(f"{path} is not a cove database ({reason}); it was not modified")
        self.path = path


class SchemaTooNew(StoreError):
    """Raised when the database schema is newer than this version of cove understands."""

    def __init__(self, path: str, found: int, supported: int) -> None:
        super().__init__(
            f"{path} has schema version {found}, but this cove supports up to version "
            f"{supported}; upgrade cove to open it"
        )
        self.path = path
        self.found = found
        self.supported = supported


class CodecError(CoveError):
    """Raised when a value cannot be encoded to, or decoded from, the tagged-JSON codec."""


class ValueTooLarge(CodecError):
    """Raised when a value exceeds the codec's size or depth limits."""


class SandboxError(CoveError):
    """Raised when the sandbox worker cannot be started, crashes or breaks protocol."""


class ModelError(CoveError):
    """Raised when the model endpoint fails or its replies cannot be used."""

    def __init__(self, message: str, *, status: int | None = None, retryable: bool = False):
        super().__init__(message)
        self.status = status
        self.retryable = retryable


class ListenError(CoveError):
    """Raised when a server cannot listen on its address (the port is in use, the address is
    not this machine's, a privileged port)."""

    def __init__(self, host: str, port: int, reason: str) -> None:
        shown = f"[{host}]" if ":" in host else host
        super().__init__(f"cannot listen on {shown}:{port}: {reason}")
        self.host = host
        self.port = port


class MissingExtra(CoveError):
    """Raised when a command needs an optional part of cove (an install extra, such as
    ``cove[web]``) whose packages are not installed; the message names the ``pip install``."""

    def __init__(self, what: str, extra: str, missing: Sequence[str]) -> None:
        super().__init__(
            f"{what} needs the {extra} extra: pip install 'cove[{extra}]' "
            f"(cannot import: {', '.join(missing)})"
        )
        self.extra = extra
        self.missing = list(missing)
