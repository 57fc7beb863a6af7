"""The turn policy: after each iteration, go on, restart the strategy, or end the turn.

Pure functions of what the iterations reported so far, so each rule is a plain case a test can
state without a sandbox or a model:

- A failed or unreadable iteration extends the error streak; ``error_budget`` of them in a row
  restart the strategy (the model is told, and the streak starts again) up to ``max_restarts``
  times, after which the turn ends with ``error_budget``.
- A strategy restart forgives failing code, not replies that cannot be read: those get one
  restart's worth of chances (``UNUSABLE_BUDGETS`` error budgets in a row), then end the turn.
- While the turn struggles the model is asked to reason harder, unless it asked for an effort.
- What the built-in nudges see next (``NudgeState``) follows from the same observations.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import cast

from cove.engine.iteration import IterationResult
from cove.engine.llm import Reasoning
from cove.engine.nudges import REPEAT_LIMIT, NudgeState
from cove.results import TurnStatus

#: Consecutive failed iterations after which the model is asked to reason harder.
ESCALATE_AFTER_ERRORS = 2
#: Unusable replies in a row that end the turn, in error budgets (a strategy restart between).
UNUSABLE_BUDGETS = 2


@dataclass(frozen=True)
class Streak:
    """How the turn has gone so far: failures in a row, restarts, unreadable replies in a row."""

    errors: int = 0
    restarts: int = 0
    unusable: int = 0


@dataclass(frozen=True)
class Ending:
    """The turn ends: its status, the error recorded with it, and whether a fallback answer
    (where the model got to) is given."""

    status: TurnStatus
    error: str | None = None
    fallback: bool = False


@dataclass(frozen=True)
class Step:
    """What follows an iteration: the new streak, whether the strategy restarts, the next call's
    reasoning effort, or the turn's ending."""

    streak: Streak
    strategy_restart: bool = False
    reasoning: Reasoning = "balanced"
    ending: Ending | None = None


@dataclass(frozen=True)
class TurnPolicy:
    """The rules of one turn's loop (see the module docstring)."""

    error_budget: int
    max_restarts: int

    def before(self, position: int, budget: int, cancelled: bool) -> Ending | None:
        """Whether the turn ends before iteration ``position`` (0-based) runs."""
        if cancelled:
            return Ending("cancelled")
        if position >= budget:
            return Ending("max_iterations", fallback=True)
        return None

    def after(self, streak: Streak, result: IterationResult) -> Step:
        """What follows an iteration that ended as ``result``."""
        if result.status == "failed":
            return Step(streak, ending=Ending("failed", error=result.failure))
        if result.status == "cancelled":
            return Step(streak, ending=Ending("cancelled"))
        if result.answer is not None:
            return Step(streak, ending=Ending("done"))
        failing = result.status in ("error", "parse_error")
        errors = streak.errors + 1 if failing else 0
        unusable = streak.unusable + 1 if result.status == "parse_error" else 0
        restarts = streak.restarts
        if unusable >= UNUSABLE_BUDGETS * self.error_budget:
            error = f"{unusable} replies in a row could not be used; the last: " + (
                result.parse_problem or "unreadable"
            )
            ending = Ending("error_budget", error=error, fallback=True)
            return Step(Streak(errors, restarts, unusable), ending=ending)
        restart = errors >= self.error_budget
        if restart and restarts >= self.max_restarts:
            error = f"{errors} failed iterations in a row after {_restarts(restarts)}"
            ending = Ending("error_budget", error=error, fallback=True)
            return Step(Streak(errors, restarts, unusable), ending=ending)
        if restart:
            errors, restarts = 0, restarts + 1
        return Step(
            Streak(errors, restarts, unusable),
            strategy_restart=restart,
            reasoning=next_reasoning(result.next_reasoning, errors, restarts),
        )


def _restarts(count: int) -> str:
    return f"{count} strategy restart{'' if count == 1 else 's'}"


def next_reasoning(requested: str | None, errors: int, restarts: int) -> Reasoning:
    """The effort of the next call: the model's request, else raised while the turn struggles."""
    if requested in ("quick", "balanced", "deep"):
        return cast(Reasoning, requested)
    return "deep" if errors >= ESCALATE_AFTER_ERRORS or restarts else "balanced"


def observed(
    state: NudgeState, result: IterationResult, step: Step, signatures: Sequence[str]
) -> NudgeState:
    """The nudge state after an iteration: what the built-in nudges look at next.

    Args:
        state: The nudge state before the iteration.
        result: How the iteration ended.
        step: What the policy decided after it.
        signatures: The signatures of the turn's iterations so far, the latest last.
    """
    return replace(
        state,
        repeated=list(signatures[-REPEAT_LIMIT:]).count(result.signature),
        lost_variables=result.restarted_lost,
        sandbox_restarted=result.restart_reason is not None,
        restart_reason=result.restart_reason,
        refusal=result.refusal,
        strategy_restart=step.strategy_restart,
        error_streak=step.streak.errors,
    )
