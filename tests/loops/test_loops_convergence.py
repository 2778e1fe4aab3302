"""The convergence detector over iteration histories, and the records it reads."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest

from haltwise import InvalidValueError
from haltwise.loops import Issue, Iteration, Review, as_review, convergence


def issues(*texts: str) -> tuple[Issue, ...]:
    return tuple(Issue(text) for text in texts)


def test_same_issues_in_any_order_three_times_in_a_row() -> None:
    history = [
        Iteration(1, issues=issues("a", "b")),
        Iteration(2, issues=issues("b", "a")),
        Iteration(3, issues=issues("a", "b")),
    ]
    found = convergence().check(history)
    assert found is not None
    assert found.reason == "converged.same_issues"
    assert found.message == "The same issues came back 3 times in a row: a, b."


def test_changing_or_absent_issues_are_not_convergence() -> None:
    detector = convergence()
    assert not detector.is_stuck([Iteration(n, issues=issues("a")) for n in (1, 2)])
    assert not detector.is_stuck(
        [Iteration(1, issues=issues("a")), Iteration(2, issues=issues("b")), Iteration(3)]
    )
    assert not detector.is_stuck([Iteration(n) for n in (1, 2, 3)])
    assert not detector.is_stuck(
        [Iteration(1, issues=issues("b"))] + [Iteration(n, issues=issues("a")) for n in (2, 3)]
    )


def test_the_same_error_three_times_is_convergence() -> None:
    history = [Iteration(n, error="KeyError: 'spec'") for n in (1, 2, 3)]
    found = convergence().check(history)
    assert found is not None
    assert found.message == "The same error came back 3 times in a row: KeyError: 'spec'."


def test_the_count_is_settable_and_none_turns_the_check_off() -> None:
    two = [Iteration(n, issues=issues("a")) for n in (1, 2)]
    assert convergence(same_issues=2).is_stuck(two)
    assert not convergence(same_issues=None).is_stuck(two * 3)


@pytest.mark.parametrize(
    ("values", "goal", "stuck"),
    [
        ([100, 98, 97], "min", True),  # 3% better
        ([100, 90, 80], "min", False),  # 20% better
        ([100, 100, 95], "min", False),  # exactly 5% is progress
        ([100, 101, 120], "min", True),  # worse
        ([50, 51, 52], "max", True),  # 4% better, higher is better
        ([50, 55, 60], "max", False),
        ([0, 0, 0], "min", True),  # nothing left to improve, no progress
        ([0, 1, 2], "max", False),  # from zero, any gain counts
    ],
)
def test_less_than_five_percent_improvement_of_a_named_metric(
    values: list[float], goal: Any, stuck: bool
) -> None:
    history = [Iteration(n, metrics={"failing_tests": v}) for n, v in enumerate(values, 1)]
    detector = convergence(metric="failing_tests", goal=goal, same_issues=None)
    assert detector.is_stuck(history) is stuck


def test_the_metric_window_and_threshold_are_settable() -> None:
    history = [Iteration(n, metrics={"loc": v}) for n, v in enumerate([100, 50, 45], 1)]
    assert not convergence(metric="loc").is_stuck(history)  # 55% over three passes
    assert not convergence(metric="loc", window=2).is_stuck(history)  # 10% over two
    found = convergence(metric="loc", window=2, min_improvement=0.2).check(history)
    assert found is not None
    assert found.message == (
        "loc went from 50 to 45 over the last 2 passes: 10% better, "
        "less than the 20% that counts as progress."
    )


def test_a_metric_missing_from_a_pass_is_not_judged() -> None:
    history = [Iteration(1, metrics={"loc": 100}), Iteration(2), Iteration(3, metrics={"loc": 100})]
    assert not convergence(metric="loc").is_stuck(history)
    assert not convergence(metric="lines").is_stuck(history)


def test_the_same_estimate_repeated() -> None:
    same = [Iteration(n, estimate=Decimal("4.20")) for n in (1, 2, 3)]
    found = convergence().check(same)
    assert found is not None
    assert found.reason == "converged.same_estimate"
    assert "4.20" in found.message
    assert not convergence(same_estimate=None).is_stuck(same)
    assert not convergence().is_stuck([Iteration(n, estimate=n) for n in (1, 2, 3)])
    assert not convergence().is_stuck([Iteration(n) for n in (1, 2, 3)])


@pytest.mark.parametrize(
    "kwargs",
    [
        {"same_issues": 1},
        {"same_issues": True},
        {"same_estimate": 0},
        {"window": 1},
        {"min_improvement": 1},
        {"min_improvement": -0.1},
        {"metric": ""},
        {"goal": "up"},
    ],
)
def test_invalid_thresholds_are_refused(kwargs: dict[str, Any]) -> None:
    with pytest.raises(InvalidValueError, match="convergence"):
        convergence(**kwargs)


def test_repr_echoes_the_factory() -> None:
    assert repr(convergence()) == "convergence()"
    assert (
        repr(convergence(metric="lines_changed", min_improvement=0.1, same_estimate=None))
        == "convergence(metric='lines_changed', min_improvement=0.1, same_estimate=None)"
    )
    assert convergence(window=4) == convergence(window=4)


def test_an_iteration_round_trips_through_json() -> None:
    iteration = Iteration(
        3,
        "review",
        summary="v3",
        issues=(Issue("god_object", "critical"), Issue("naming", "minor")),
        metrics={"lines_changed": 12.0, "ratio": float("inf")},
        estimate=Decimal("1.25"),
        error="fix raised ValueError: x",
        accepted=False,
        strictness="significant",
        elapsed=1.5,
    )
    data = json.loads(json.dumps(iteration.to_dict(), allow_nan=False))
    assert Iteration.from_dict(data) == iteration


def test_issues_and_reviews() -> None:
    assert Issue("x").blocks("significant")
    assert not Issue("x", "minor").blocks("significant")
    assert Issue("x", "minor").blocks("all")
    assert not Issue("x").blocks("critical")
    assert str(Issue("x", "critical")) == "x (critical)"
    with pytest.raises(InvalidValueError, match="severity"):
        Issue("x", "high")  # type: ignore[arg-type]
    assert Review("one").issues == (Issue("one"),)
    assert as_review(Review(["a"])).issues == (Issue("a"),)
    with pytest.raises(InvalidValueError):
        as_review(3)
