"""What the sandbox reports back to the parent: block outcomes, restarts.

A block's result and the variable versions it left are the shared ``cove.results`` shapes.
"""

from __future__ import annotations

from dataclasses import dataclass

from cove.results import BlockResult, VarVersion

#: An import binding: (module, member) for ``from module import member``, (module, None) for
#: ``import module``.
ImportBinding = tuple[str, str | None]


@dataclass(frozen=True)
class RestartReport:
    """A worker was replaced: why, and which variables came back and which were lost."""

    reason: str
    restored: tuple[str, ...] = ()
    lost: tuple[str, ...] = ()


@dataclass(frozen=True)
class BlockOutcome:
    """What the sandbox reports after running one code block.

    ``result`` is the block's result. ``changes`` lists every variable created, changed (by
    value fingerprint) or deleted, unnumbered as the sandbox sees them (the environment numbers
    them). ``restart`` is set when the worker had to be replaced because of this block (timeout,
    crash, memory exhaustion); the variables from before the block were then restored.
    ``error_type`` names the exception of a failed block (``ZeroDivisionError``).
    """

    result: BlockResult
    changes: tuple[VarVersion, ...] = ()
    restart: RestartReport | None = None
    error_type: str | None = None
