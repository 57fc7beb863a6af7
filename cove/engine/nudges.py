"""Built-in nudges: short, actionable notes cove adds to the context message.

The engine keeps a ``NudgeState`` up to date between iterations; ``builtin_nudges`` is a pure
function of it, so each nudge is a plain condition a test can set. Nudges come out most important
first and at most ``MAX_NUDGES`` of them (extensions' nudges are appended by the engine and share
the same bound in ``context_message``). Each has a kind (``NudgeKind``), kept with it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, NamedTuple

from cove.engine.budgets import MAX_NUDGES, VAR_INDEX_ROWS

#: The same code with the same result this many times in a row is a loop.
REPEAT_LIMIT = 3
#: Consecutive failed iterations before the error-streak nudge.
ERROR_STREAK_NUDGE = 2
#: Iterations left (this one included) at which the budget nudge starts.
ITERATIONS_LEFT_NUDGE = 2
#: Lost variable names listed by name; the rest are counted.
LOST_NAMES_SHOWN = 8
#: Characters of a refusal reason repeated to the model.
REFUSAL_CHARS = 160


@dataclass
class NudgeState:
    """What the engine knows about the running turn that the built-in nudges look at.

    Attributes:
        iteration: The iteration about to run, starting at 1.
        budget: The turn's live iteration budget.
        has_title: Whether the conversation has a title.
        var_count: How many user variables exist.
        repeated: How many of the last ``REPEAT_LIMIT`` iterations had the same code and
            results as the latest one (the latest included).
        error_streak: Consecutive failed iterations so far.
        error_budget: Consecutive failed iterations that trigger a strategy restart (0: unknown).
        refusal: Why the last answer was refused, if it was.
        sandbox_restarted: Whether the sandbox worker was replaced during the last iteration.
        restart_reason: Why it was replaced (timeout, crash, memory).
        lost_variables: Variables that could not be restored after that restart.
        strategy_restart: Whether the engine just restarted the strategy after the error budget.
    """

    iteration: int = 1
    budget: int = 10
    has_title: bool = True
    var_count: int = 0
    repeated: int = 0
    error_streak: int = 0
    error_budget: int = 0
    refusal: str | None = None
    sandbox_restarted: bool = False
    restart_reason: str | None = None
    lost_variables: Sequence[str] = ()
    strategy_restart: bool = False


NudgeKind = Literal[
    "strategy_restart",
    "sandbox_restart",
    "refusal",
    "error_streak",
    "repetition",
    "iterations_left",
    "title",
    "var_overflow",
    "extension",  # given by a sandbox extension
]


class NudgeNote(NamedTuple):
    """One nudge: which rule gave it, and its text (without the ``[nudge]`` prefix)."""

    kind: NudgeKind
    text: str


def builtin_nudges(state: NudgeState) -> list[NudgeNote]:
    """The built-in nudges that apply to ``state``, most important first.

    Args:
        state: The engine's view of the running turn.

    Returns:
        At most ``MAX_NUDGES`` nudges.
    """
    found = [(kind, rule(state)) for kind, rule in _RULES]
    return [NudgeNote(kind, text) for kind, text in found if text is not None][:MAX_NUDGES]


def _strategy_restart(state: NudgeState) -> str | None:
    if not state.strategy_restart:
        return None
    return (
        "Too many iterations failed in a row, so start over: drop the current approach, re-read "
        "the request and try a simpler one; check inputs with shape(x) before building on them."
    )


def _sandbox_restart(state: NudgeState) -> str | None:
    if not (state.sandbox_restarted or state.lost_variables):
        return None
    why = f" ({state.restart_reason})" if state.restart_reason else ""
    lost = list(state.lost_variables)
    if not lost:
        return f"The sandbox was restarted{why}; all variables were restored."
    names = ", ".join(lost[:LOST_NAMES_SHOWN])
    more = f" and {len(lost) - LOST_NAMES_SHOWN} more" if len(lost) > LOST_NAMES_SHOWN else ""
    return (
        f"The sandbox was restarted{why}; lost variables: {names}{more}. Recompute them before "
        "use, and split slow work into smaller blocks."
    )


def _refusal(state: NudgeState) -> str | None:
    if not state.refusal:
        return None
    reason = state.refusal.strip()
    # Refusal reasons may already open with these words; say them once.
    if reason.lower().startswith("answer refused"):
        reason = reason[len("answer refused") :].lstrip(" :")
    if len(reason) > REFUSAL_CHARS:
        reason = reason[: REFUSAL_CHARS - 1] + "…"
    return f"Your answer was refused: {reason}. Fix that, then answer again."


def _error_streak(state: NudgeState) -> str | None:
    if state.error_streak < ERROR_STREAK_NUDGE:
        return None
    text = (
        f"The last {state.error_streak} iterations failed. Read the error in the journal and fix "
        "its cause instead of resending similar code."
    )
    left = state.error_budget - state.error_streak
    if left > 0:
        plural = "s" if left > 1 else ""
        text += f" {left} more failed iteration{plural} and your strategy is restarted."
    return text


def _repetition(state: NudgeState) -> str | None:
    if state.repeated < REPEAT_LIMIT:
        return None
    return (
        f"Your last {state.repeated} iterations ran the same code with the same results. Change "
        "the approach, or answer from what the variables already hold."
    )


def _iterations_left(state: NudgeState) -> str | None:
    left = state.budget - state.iteration + 1
    if left > ITERATIONS_LEFT_NUDGE:
        return None
    if left <= 1:
        return (
            "This is the last iteration: answer now from what the variables hold, or call "
            "request_more_iterations(n) in this reply if the work truly needs more."
        )
    return (
        f"{left} iterations left, this one included: wrap up and answer next, or call "
        "request_more_iterations(n) if the work truly needs more."
    )


def _title(state: NudgeState) -> str | None:
    if state.has_title or state.iteration <= 1:
        return None
    return 'The conversation has no title yet: add "title": "<3-7 words>" to this reply.'


def _var_overflow(state: NudgeState) -> str | None:
    if state.var_count <= VAR_INDEX_ROWS:
        return None
    return (
        f"{state.var_count} variables exist and the index shows only the newest; forget(*names) "
        "the ones you no longer need, or group related values in one dict."
    )


#: Every built-in rule, most important first.
_RULES: tuple[tuple[NudgeKind, Callable[[NudgeState], str | None]], ...] = (
    ("strategy_restart", _strategy_restart),
    ("sandbox_restart", _sandbox_restart),
    ("refusal", _refusal),
    ("error_streak", _error_streak),
    ("repetition", _repetition),
    ("iterations_left", _iterations_left),
    ("title", _title),
    ("var_overflow", _var_overflow),
)
