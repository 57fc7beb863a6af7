"""What the sandbox reports back to the parent: block outcomes, variable snapshots, restarts."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

SnapshotKind = Literal["value", "function", "module", "opaque", "deleted"]
#: An import binding: (module, member) for ``from module import member``, (module, None) for
#: ``import module``.
ImportBinding = tuple[str, str | None]


@dataclass(frozen=True)
class VarSnapshot:
    """The state of one user variable after a block.

    ``encoded`` is the codec's JSON text (for ``function`` it encodes the definition's source,
    for ``module`` the import binding); it is None for ``deleted`` and for ``opaque`` values,
    which cannot be restored.
    """

    name: str
    kind: SnapshotKind
    encoded: str | None
    type_name: str
    preview: str
    size: int | None = None
    signature: str | None = None


@dataclass(frozen=True)
class RestartReport:
    """A worker was replaced: why, and which variables came back and which were lost."""

    reason: str
    restored: tuple[str, ...] = ()
    lost: tuple[str, ...] = ()


@dataclass(frozen=True)
class BlockOutcome:
    """The result of running one code block.

    ``error`` reads like ``ZeroDivisionError: division by zero (line 3)`` with no host paths.
    ``changes`` lists every variable created, changed (by value fingerprint) or deleted.
    ``restart`` is set when the worker had to be replaced because of this block (timeout, crash,
    memory exhaustion); the variables from before the block were then restored.
    """

    ok: bool
    value_preview: str | None
    value_encoded: str | None
    stdout: str
    stderr: str
    error: str | None
    duration_ms: float
    timed_out: bool
    seed: int
    changes: tuple[VarSnapshot, ...] = ()
    restart: RestartReport | None = None
    error_type: str | None = None
