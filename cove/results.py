"""What a turn produces: a block's result, the variable versions it wrote, what the model used,
and how the turn ended.

One shape each, shared by every layer: the sandbox reports them, the environment numbers the
versions, the store writes them and reads them back (its records extend them with where they are
stored), the journal shows them and events carry them. Encoded values are the codec's JSON text;
fields marked ``LOCAL`` stay out of the JSON that events send, and the fields of a field marked
``FLAT`` stand in its parent's JSON in its place (see ``cove.events.jsonable``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

#: Field metadata: the field is not sent with events (it can be large; channels read previews).
LOCAL = {"local": True}
#: Field metadata: the field's own fields stand in its parent's JSON (``usage`` spelled flat).
FLAT = {"flat": True}

VarKind = Literal["value", "function", "module", "opaque", "deleted"]
TurnStatus = Literal[
    "running", "done", "max_iterations", "error_budget", "cancelled", "failed", "interrupted"
]


@dataclass(frozen=True)
class Usage:
    """What model calls used: tokens and their cost.

    One model call's usage comes back with its completion (priced by the engine); an iteration,
    a sub-query and a turn carry the sum of theirs. Records and events that carry a usage spell
    it flat in their JSON (``tokens_in``, ``tokens_out``, ``cost_usd``).

    Attributes:
        tokens_in: Prompt tokens.
        tokens_out: Completion tokens.
        cost_usd: What the tokens cost; 0 when the model has no price (see ``cost_known`` on
            the turn).
    """

    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0

    def __add__(self, other: Usage) -> Usage:
        """The usage of both."""
        return Usage(
            self.tokens_in + other.tokens_in,
            self.tokens_out + other.tokens_out,
            self.cost_usd + other.cost_usd,
        )

    def at_cost(self, cost_usd: float) -> Usage:
        """The same tokens, costing ``cost_usd``."""
        return Usage(self.tokens_in, self.tokens_out, cost_usd)


@dataclass(frozen=True)
class TurnOutcome:
    """How a turn ended: built once when it ends, stored by the store's ``finish_turn`` and
    carried by the ``TurnFinished`` event (whose JSON spells it flat).

    Attributes:
        status: One of the final statuses (``done``, ``max_iterations``, ``error_budget``,
            ``cancelled``, ``failed``, ``interrupted``).
        answer: The answer, or for a turn that ended unfinished why it stopped; None when
            there is none.
        confidence: The model's stated confidence in its answer, if it gave one.
        error: What went wrong, for a turn that failed or stopped.
        usage: The tokens and cost of the turn's model calls.
    """

    status: TurnStatus
    answer: str | None = None
    confidence: str | None = None
    error: str | None = None
    usage: Usage = field(default=Usage(), metadata=FLAT)


@dataclass(frozen=True)
class FigureAxes:
    """The labels of one set of axes of a figure."""

    title: str = ""
    xlabel: str = ""
    ylabel: str = ""


@dataclass(frozen=True)
class BlockFigure:
    """A figure a block left open (or showed), rendered to PNG when the block ended.

    Stored with its block (not as a variable); ``digest`` is its id: channels fetch the PNG with
    ``Conversations.figure``. Only a live block's result carries ``png``; records read back from
    the store leave it None.

    Attributes:
        position: The figure's 0-based position among the block's figures.
        digest: The sha256 hex of the PNG.
        width: Width in pixels.
        height: Height in pixels.
        title: The figure's title (its suptitle, else its first axes title).
        axes: The title and axis labels of each set of axes (at most 8).
        png: The PNG bytes (not sent with events, not kept in records).
    """

    position: int
    digest: str
    width: int
    height: int
    title: str = ""
    axes: tuple[FigureAxes, ...] = ()
    png: bytes | None = field(default=None, metadata=LOCAL, repr=False, compare=False)

    def describe(self) -> str:
        """One line for the model and the terminal: size, title and axis labels."""
        parts = [f"figure {self.position + 1}: {self.width}×{self.height} px"]
        if self.title:
            parts.append(f"title {self.title!r}")
        for axes in self.axes:
            labels = [f"{k} {v!r}" for k, v in (("x", axes.xlabel), ("y", axes.ylabel)) if v]
            if axes.title and axes.title != self.title:
                labels.insert(0, f"axes {axes.title!r}")
            if labels:
                parts.append(", ".join(labels))
        return "; ".join(parts)


@dataclass(frozen=True)
class BlockResult:
    """One code block: what ran and what came of it.

    Attributes:
        position: The block's 0-based position in its iteration.
        code: The block's source.
        ok: Whether the block ran without error.
        result_preview: Preview of the trailing expression's value, None when there is none.
        result_encoded: The codec's text of that value (not sent with events).
        stdout: Captured ``print`` output.
        stderr: Captured error output.
        error: The error line of a failed block, like ``ZeroDivisionError: division by zero
            (line 3)``, with no host paths.
        duration_ms: Wall-clock run time.
        timed_out: Whether the block was stopped at its time limit.
        seed: The block's random seed.
        clock: The wall-clock time the block saw (recorded for replay).
        figures: The figures the block left open, rendered when it ended.
    """

    position: int
    code: str
    ok: bool
    result_preview: str | None = None
    result_encoded: str | None = field(default=None, metadata=LOCAL)
    stdout: str = ""
    stderr: str = ""
    error: str | None = None
    duration_ms: float = 0.0
    timed_out: bool = False
    seed: int | None = None
    clock: float | None = None
    figures: tuple[BlockFigure, ...] = ()


@dataclass(frozen=True)
class VarVersion:
    """One version of a named variable, as a block left it.

    The sandbox reports versions unnumbered (``version`` 0); the environment numbers them and
    sets ``block_position`` before they are stored.

    Attributes:
        name: The variable's name.
        kind: ``value``, ``function``, ``module``, ``opaque`` or ``deleted``.
        encoded: The codec's text (for ``function`` the definition's source, for ``module`` the
            import binding); None for ``deleted`` and ``opaque``, which cannot be restored.
        type_name: The value's type name.
        preview: A short text of the value.
        size: The value's length (items, characters or bytes) when it has one, else None.
        signature: How a function or class is shown (its signature).
        version: The version number (1-based per name, deletions included); 0 until numbered.
        block_position: The position of the block that wrote it in its iteration.
        chunks: The chunks of ``encoded``'s tree (``cove.codec.chunks``) that are new to the
            sandbox's host, as ``(name, data)``, children first: what storing it adds (not sent
            with events, not kept in records).
    """

    name: str
    kind: VarKind
    encoded: str | None = field(metadata=LOCAL)
    type_name: str
    preview: str
    size: int | None = None
    signature: str | None = None
    version: int = 0
    block_position: int = 0
    chunks: tuple[tuple[str, bytes], ...] = field(
        default=(), metadata=LOCAL, repr=False, compare=False
    )
