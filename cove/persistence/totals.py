"""A turn's totals summed from what it recorded, for turns that did not finish normally.

Used in an ``UPDATE turn SET ...`` both when a turn is closed (``writes.finish_turn``) and when
crash recovery interrupts it (``leases``), so an interrupted or failed turn reports the tokens
and cost its recorded iterations and sub-queries used, never less.
"""

from __future__ import annotations

from cove.persistence.sql import Dialect

_ITERATIONS = "(SELECT coalesce(sum(i.{col}), 0) FROM iteration i WHERE i.turn_id = turn.id)"
_SUBQUERIES = (
    "(SELECT coalesce(sum(s.{col}), 0) FROM subquery s"
    " JOIN iteration i ON i.id = s.iteration_id WHERE i.turn_id = turn.id)"
)


def recorded_totals(dialect: Dialect, *, given: bool = False) -> str:
    """The SET clause: each total becomes at least the sum of the recorded ones.

    ``given``: the totals the turn reported are parameters (``tokens_in``, ``tokens_out``,
    ``cost_usd``, in that order), set in the same statement; else the row's own.
    """
    return ", ".join(
        f"{col} = "
        + dialect.greatest(
            "?" if given else col,
            f"{_ITERATIONS.format(col=col)} + {_SUBQUERIES.format(col=col)}",
        )
        for col in ("tokens_in", "tokens_out", "cost_usd")
    )
