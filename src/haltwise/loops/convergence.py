"""The convergence detector: is a loop around an agent still getting anywhere?

``convergence()`` looks at the tail of a loop's history (``Iteration`` records) and says when
more passes would not help:

- ``converged.same_issues``: the same issues (or the same error) ``same_issues`` passes in a row;
- ``converged.no_improvement``: the metric the caller names (``lines_changed``,
  ``failing_tests``, ...) improved by less than ``min_improvement`` (a fraction) across the last
  ``window`` passes;
- ``converged.same_estimate``: the same cost estimate ``same_estimate`` passes in a row.

Each check is O(window) over the tail, never over the whole history. It is a pure function of
the history: the loops call it, and so may anyone holding a list of ``Iteration`` records.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from ..engine.errors import InvalidValueError
from .records import Iteration

__all__ = ["Converged", "Convergence", "convergence"]

Goal = Literal["min", "max"]


@dataclass(frozen=True, slots=True)
class Converged:
    """The detector's finding: a reason code and one sentence with the numbers."""

    #: ``converged.same_issues``, ``converged.no_improvement`` or ``converged.same_estimate``.
    reason: str
    message: str


class Convergence:
    """Detects a loop that has stopped making progress. Build it with ``convergence()``."""

    __slots__ = (
        "_args",
        "goal",
        "metric",
        "min_improvement",
        "same_estimate",
        "same_issues",
        "window",
    )

    def __init__(
        self,
        same_issues: int | None,
        metric: str | None,
        min_improvement: float,
        window: int,
        goal: Goal,
        same_estimate: int | None,
        args: str,
    ) -> None:
        #: Passes in a row with the same issues that mean "stuck" (None: not checked).
        self.same_issues = same_issues
        #: The metric whose improvement is watched (None: not checked).
        self.metric = metric
        #: The smallest relative improvement across ``window`` passes that counts as progress.
        self.min_improvement = min_improvement
        #: How many passes the improvement is measured across (2: from one pass to the next).
        self.window = window
        #: ``min`` when lower is better (failing tests, lines), ``max`` when higher is.
        self.goal = goal
        #: Passes in a row with the same estimate that mean "stuck" (None: not checked).
        self.same_estimate = same_estimate
        self._args = args

    def check(self, history: Sequence[Iteration]) -> Converged | None:
        """What the tail of ``history`` shows, or None while the loop is still progressing."""
        return (
            self._same_issues(history)
            or self._no_improvement(history)
            or self._same_estimate(history)
        )

    def is_stuck(self, history: Sequence[Iteration]) -> bool:
        return self.check(history) is not None

    def _same_issues(self, history: Sequence[Iteration]) -> Converged | None:
        count = self.same_issues
        if count is None or len(history) < count:
            return None
        tail = history[-count:]
        first = tail[0].signature()
        if first is None or any(iteration.signature() != first for iteration in tail[1:]):
            return None
        kind, items = first
        what = ", ".join(sorted(items))
        noun = "issues" if kind == "issues" else "error"
        return Converged(
            "converged.same_issues",
            f"The same {noun} came back {count} times in a row: {what}.",
        )

    def _no_improvement(self, history: Sequence[Iteration]) -> Converged | None:
        name = self.metric
        if name is None or len(history) < self.window:
            return None
        tail = history[-self.window :]
        if any(name not in iteration.metrics for iteration in tail):
            return None
        first = float(tail[0].metrics[name])
        last = float(tail[-1].metrics[name])
        gain = first - last if self.goal == "min" else last - first
        # From zero, any gain is infinitely better, and none is no improvement at all.
        relative = gain / abs(first) if first != 0 else (float("inf") if gain > 0 else 0.0)
        if relative >= self.min_improvement:
            return None
        return Converged(
            "converged.no_improvement",
            f"{name} went from {first:g} to {last:g} over the last {self.window} passes: "
            f"{_percent(relative)} better, less than the {_percent(self.min_improvement)} "
            "that counts as progress.",
        )

    def _same_estimate(self, history: Sequence[Iteration]) -> Converged | None:
        count = self.same_estimate
        if count is None or len(history) < count:
            return None
        tail = history[-count:]
        first = tail[0].estimate
        if first is None or any(iteration.estimate != first for iteration in tail[1:]):
            return None
        return Converged(
            "converged.same_estimate",
            f"The same estimate ({first}) came {count} times in a row: "
            "the alternatives are not exploring anything new.",
        )

    def __repr__(self) -> str:
        return f"convergence({self._args})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Convergence) and repr(other) == repr(self)

    def __hash__(self) -> int:
        return hash(repr(self))


def convergence(
    *,
    same_issues: int | None = 3,
    metric: str | None = None,
    min_improvement: float = 0.05,
    window: int = 3,
    goal: Goal = "min",
    same_estimate: int | None = 3,
) -> Convergence:
    """A convergence detector; every threshold is settable and ``None`` turns a check off.

    ``convergence(metric="lines_changed")`` also stops a loop whose ``lines_changed`` improved by
    less than 5% across the last 3 passes; ``goal="max"`` when higher is better.
    """
    for name, count in (("same_issues", same_issues), ("same_estimate", same_estimate)):
        if count is not None and (
            isinstance(count, bool) or not isinstance(count, int) or count < 2
        ):
            raise InvalidValueError(f"convergence({name})", count, "an integer >= 2, or None")
    if isinstance(window, bool) or not isinstance(window, int) or window < 2:
        raise InvalidValueError("convergence(window)", window, "an integer >= 2")
    if (
        isinstance(min_improvement, bool)
        or not isinstance(min_improvement, int | float)
        or not 0 <= min_improvement < 1
    ):
        raise InvalidValueError(
            "convergence(min_improvement)", min_improvement, "a fraction in [0, 1), e.g. 0.05"
        )
    if metric is not None and (not isinstance(metric, str) or not metric):
        raise InvalidValueError("convergence(metric)", metric, "a metric's name, or None")
    if goal not in ("min", "max"):
        raise InvalidValueError("convergence(goal)", goal, "'min' (lower is better) or 'max'")
    given = {
        "same_issues": (same_issues, 3),
        "metric": (metric, None),
        "min_improvement": (min_improvement, 0.05),
        "window": (window, 3),
        "goal": (goal, "min"),
        "same_estimate": (same_estimate, 3),
    }
    args = ", ".join(f"{k}={v!r}" for k, (v, default) in given.items() if v != default)
    return Convergence(
        same_issues, metric, float(min_improvement), window, goal, same_estimate, args
    )


def _percent(fraction: float) -> str:
    if fraction == float("inf"):
        return "infinitely"
    return f"{fraction:.1%}" if abs(fraction) < 0.1 else f"{fraction:.0%}"
