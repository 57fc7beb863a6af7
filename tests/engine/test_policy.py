"""The turn policy: error budget, strategy restarts, unreadable replies, reasoning, nudge state."""

from __future__ import annotations

from cove.engine.iteration import IterationOutcome, IterationResult
from cove.engine.nudges import NudgeState
from cove.engine.policy import Ending, Step, Streak, TurnPolicy, next_reasoning, observed

POLICY = TurnPolicy(error_budget=3, max_restarts=1)


def result(status: IterationOutcome = "ok", **fields: object) -> IterationResult:
    return IterationResult(status=status, **fields)  # type: ignore[arg-type]


def run(policy: TurnPolicy, statuses: list[IterationOutcome]) -> list[Step]:
    steps, streak = [], Streak()
    for status in statuses:
        step = policy.after(streak, result(status, parse_problem="no JSON object"))
        steps.append(step)
        if step.ending is not None:
            break
        streak = step.streak
    return steps


def test_before_an_iteration_cancellation_and_the_budget_end_the_turn() -> None:
    assert POLICY.before(0, 10, cancelled=False) is None
    assert POLICY.before(3, 10, cancelled=True) == Ending("cancelled")
    assert POLICY.before(10, 10, cancelled=False) == Ending("max_iterations", fallback=True)


def test_an_answer_a_failure_and_a_cancellation_end_the_turn() -> None:
    assert POLICY.after(Streak(), result(answer="42")).ending == Ending("done")
    failed = POLICY.after(Streak(), result("failed", failure="model down"))
    assert failed.ending == Ending("failed", error="model down")
    assert POLICY.after(Streak(), result("cancelled")).ending == Ending("cancelled")


def test_a_success_resets_the_error_streak() -> None:
    step = POLICY.after(Streak(errors=2, restarts=1, unusable=1), result("ok"))
    assert step.streak == Streak(errors=0, restarts=1, unusable=0)
    assert step.ending is None and not step.strategy_restart


def test_the_error_budget_restarts_the_strategy_then_ends_the_turn() -> None:
    steps = run(POLICY, ["error"] * 10)
    assert [s.strategy_restart for s in steps] == [False, False, True, False, False, False]
    assert steps[2].streak == Streak(errors=0, restarts=1)
    assert steps[-1].ending == Ending(
        "error_budget", error="3 failed iterations in a row after 1 strategy restart", fallback=True
    )


def test_unreadable_replies_get_one_restart_worth_of_chances() -> None:
    steps = run(TurnPolicy(error_budget=3, max_restarts=5), ["parse_error"] * 10)
    assert len(steps) == 6  # two error budgets, though restarts were left
    assert steps[2].strategy_restart
    assert steps[-1].ending == Ending(
        "error_budget",
        error="6 replies in a row could not be used; the last: no JSON object",
        fallback=True,
    )


def test_a_readable_failing_reply_breaks_the_unreadable_streak() -> None:
    steps = run(TurnPolicy(error_budget=3, max_restarts=5), ["parse_error", "error"] * 6)
    assert all(s.ending is None for s in steps)
    assert steps[-1].streak.unusable == 0


def test_reasoning_rises_while_the_turn_struggles_unless_the_model_asks() -> None:
    assert next_reasoning(None, errors=0, restarts=0) == "balanced"
    assert next_reasoning(None, errors=2, restarts=0) == "deep"
    assert next_reasoning(None, errors=0, restarts=1) == "deep"
    assert next_reasoning("quick", errors=5, restarts=1) == "quick"
    assert next_reasoning("frantic", errors=0, restarts=0) == "balanced"
    steps = run(POLICY, ["error", "error"])
    assert [s.reasoning for s in steps] == ["balanced", "deep"]


def test_the_nudge_state_follows_the_iteration_and_the_step() -> None:
    last = result(
        "error",
        signature="same",
        restart_reason="timeout",
        restarted_lost=("frame",),
        refusal="block 2 failed",
    )
    step = POLICY.after(Streak(errors=2), last)
    state = observed(NudgeState(error_budget=3), last, step, ["other", "same", "same"])
    assert state.repeated == 2
    assert state.sandbox_restarted and state.restart_reason == "timeout"
    assert list(state.lost_variables) == ["frame"]
    assert state.refusal == "block 2 failed"
    assert state.strategy_restart and state.error_streak == 0
    calm = observed(state, result("ok", signature="new"), POLICY.after(Streak(), result()), [])
    assert not calm.sandbox_restarted and not calm.strategy_restart and calm.refusal is None
