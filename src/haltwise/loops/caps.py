"""Caps on what a step produces, and the session-wide limits around all the loops.

- ``max_plan_size(20)``: a plan with more tasks is rejected with "break it into smaller tasks".
  Call it as a judge (``attempts(2, accept=max_plan_size(20))`` asks for a smaller plan) or
  ``check(plan)`` for the ``plan_too_large`` outcome. (A review's issues are capped by
  ``refine(max_issues=10)``, which keeps the most severe.)
- ``session_limits()``: AUREUS's global circuit breakers (time, model calls, dollars, tokens) as
  one limit expression of the core's limits, for the ``Governor`` every loop reports to.
"""

from __future__ import annotations

from collections.abc import Sized
from decimal import Decimal

from ..engine.errors import InvalidValueError
from ..engine.limits import Limit, Scope, any_of, max_cost, max_model_calls, max_tokens, timeout
from ..engine.outcome import Outcome, Status
from .records import Issue, Review

__all__ = ["PlanCap", "max_plan_size", "session_limits"]

_SUGGESTIONS = ("Break it into smaller tasks", "Split the work into several sessions")


class PlanCap:
    """Rejects a plan of more than ``max_tasks`` tasks. Build it with ``max_plan_size()``."""

    __slots__ = ("max_tasks",)

    def __init__(self, max_tasks: int) -> None:
        self.max_tasks = max_tasks

    def problem(self, plan: Sized) -> str | None:
        """What is wrong with ``plan``'s size, or None when it is within the cap."""
        size = len(plan)
        if size <= self.max_tasks:
            return None
        return (
            f"The plan has {size} tasks, more than {self.max_tasks}: break it into smaller tasks."
        )

    def __call__(self, plan: Sized) -> Review:
        """As a judge: a critical issue when the plan is too large, else accepted."""
        problem = self.problem(plan)
        return Review() if problem is None else Review((Issue(problem, "critical"),))

    def check(self, plan: Sized) -> Outcome | None:
        """The ``plan_too_large`` outcome when ``plan`` is too large, else None."""
        problem = self.problem(plan)
        if problem is None:
            return None
        return Outcome(
            status=Status.ABANDONED,
            reason="plan_too_large",
            message=problem,
            suggestions=_SUGGESTIONS,
            limit=repr(self),
        )

    def __repr__(self) -> str:
        return f"max_plan_size({self.max_tasks!r})"


def max_plan_size(max_tasks: int = 20) -> PlanCap:
    """At most ``max_tasks`` tasks in a plan (AUREUS: "don't create 100-step plans")."""
    if isinstance(max_tasks, bool) or not isinstance(max_tasks, int) or max_tasks < 1:
        raise InvalidValueError("max_plan_size(max_tasks)", max_tasks, "a positive integer")
    return PlanCap(max_tasks)


def session_limits(
    *,
    minutes: float | None = 30,
    model_calls: int | None = 50,
    cost: Decimal | str | int | float | None = None,
    tokens: int | None = 500_000,
    scope: Scope = "session",
) -> Limit:
    """AUREUS's global circuit breakers as core limits: 30 minutes, 50 model calls, 500k tokens.

    ``cost`` (dollars) is off by default, as AUREUS has it: a cost limit needs every model's
    price. ``None`` turns any one off. The result is an ordinary limit expression
    (``timeout(minutes=30, scope='session') | max_model_calls(50, scope='session') | ...``)
    for ``Governor(session_limits(), clock=...)``.
    """
    parts: list[Limit] = []
    if minutes is not None:
        parts.append(timeout(minutes=minutes, scope=scope))
    if model_calls is not None:
        parts.append(max_model_calls(model_calls, scope=scope))
    if cost is not None:
        parts.append(max_cost(cost, scope=scope))
    if tokens is not None:
        parts.append(max_tokens(tokens, scope=scope))
    return any_of(*parts)
