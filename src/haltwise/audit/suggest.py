"""``--suggest``: limits calibrated on the corpus itself.

For turns, tokens and dollars: the value within which a chosen share (95% by default) of the
*solved* runs finished, so that a limit set there would have cut about 5% of them, with a
distribution-free 95% confidence interval for that quantile (from the order statistics, so it
holds whatever the shape of the distribution), and what the limit would have saved on the
runs that did not solve their task. Fewer than 20 solved runs give no suggestion: the tail is
not known well enough.

For ``stuck()``: its thresholds scaled together (``STUCK_SCALES``, tighter and looser than the
defaults), each replayed over the same runs; the tightest that cuts at most 1% of the solved
runs is suggested, with the share it cuts and a Wilson 95% interval for that share (over runs),
and what it saves on the unsolved runs. An agent whose solved runs retry a lot is fitted
looser thresholds instead of false stops. ``profile_document`` is the file ``stuck(profile=)``
loads.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from decimal import ROUND_CEILING, Decimal
from typing import Any

from ..engine.detectors import DEFAULTS, MINIMUMS, stuck
from ..engine.limits import Limit
from .replay import RunResult

__all__ = [
    "MIN_SOLVED",
    "STUCK_BUDGET",
    "STUCK_SCALES",
    "StuckSuggestion",
    "Suggestion",
    "format_stuck_suggestion",
    "format_suggestions",
    "profile_document",
    "quantile_interval",
    "stuck_candidates",
    "stuck_thresholds",
    "suggest",
    "suggest_stuck",
    "wilson_interval",
]

#: The fewest solved runs from which a limit is suggested.
MIN_SOLVED = 20


@dataclass(frozen=True, slots=True)
class Suggestion:
    """One suggested limit."""

    #: What it limits: ``turns``, ``tokens`` or ``dollars``.
    measure: str
    #: The limit as an expression (``max_turns(42)``).
    expression: str
    value: float
    #: The share of solved runs that finished within it, and the 95% interval of the value.
    coverage: float
    low: float
    high: float
    solved_runs: int
    #: Of the solved runs, how many it would have cut; of the unsolved, how much it saves.
    solved_cut: int
    unsolved_runs: int
    unsolved_saved: float
    unsolved_total: float

    def record(self) -> dict[str, Any]:
        return {
            "measure": self.measure,
            "limit": self.expression,
            "value": self.value,
            "solved_within": self.coverage,
            "interval_95": [self.low, self.high],
            "solved_runs": self.solved_runs,
            "solved_cut": self.solved_cut,
            "unsolved_runs": self.unsolved_runs,
            "unsolved_saved": self.unsolved_saved,
            "unsolved_total": self.unsolved_total,
        }


def _binomial_cdf(k: int, n: int, p: float) -> float:
    """P(X <= k) for X ~ Binomial(n, p), summed in log space (fine for n in the thousands)."""
    if k < 0:
        return 0.0
    if k >= n:
        return 1.0
    total = 0.0
    log_p, log_q = math.log(p), math.log1p(-p)
    for i in range(k + 1):
        total += math.exp(
            math.lgamma(n + 1)
            - math.lgamma(i + 1)
            - math.lgamma(n - i + 1)
            + i * log_p
            + (n - i) * log_q
        )
    return min(1.0, total)


def quantile_interval(
    values: Sequence[float], q: float, confidence: float = 0.95
) -> tuple[float, float, float]:
    """The ``q``-quantile of ``values`` and a distribution-free ``confidence`` interval for it.

    The interval runs between order statistics ``x(l)`` and ``x(u)``, chosen so that the
    binomial probability of the quantile lying between them is at least ``confidence``; when
    the sample is too small for the upper end, the largest value is used.
    """
    ordered = sorted(values)
    n = len(ordered)
    if n == 0:
        raise ValueError("no values")
    rank = max(1, math.ceil(q * n))
    point = ordered[rank - 1]
    alpha = (1 - confidence) / 2
    low_rank = rank
    while low_rank > 1 and _binomial_cdf(low_rank - 2, n, q) > alpha:
        low_rank -= 1
    high_rank = rank
    while high_rank < n and 1 - _binomial_cdf(high_rank - 1, n, q) > alpha:
        high_rank += 1
    return point, ordered[low_rank - 1], ordered[high_rank - 1]


def _measures(result: RunResult) -> dict[str, float | None]:
    return {
        "turns": float(result.steps),
        "tokens": float(result.tokens) if result.tokens else None,
        "dollars": None if result.cost is None or not result.tokens else float(result.cost),
    }


def _saved(result: RunResult, measure: str, limit: float) -> tuple[float, float]:
    """What a limit on ``measure`` at ``limit`` would have saved of ``result``, and its total."""
    if measure == "turns":
        total = float(result.tokens) if result.tokens else float(result.steps)
        series = [float(value) for value in result.tokens_by_step] if result.tokens else None
        steps = int(limit)
        if result.steps <= steps:
            return 0.0, total
        if series is None:
            return float(result.steps - steps), total
        return total - (series[steps - 1] if steps >= 1 else 0.0), total
    series_values: list[float | None]
    if measure == "tokens":
        series_values = [float(value) for value in result.tokens_by_step]
    else:
        series_values = list(result.cost_by_step)
    known = [value for value in series_values if value is not None]
    if not known:
        return 0.0, 0.0
    total = known[-1]
    spent = next((value for value in known if value > limit), None)
    if spent is None:
        return 0.0, total
    return total - spent, total


def _expression(measure: str, value: float) -> str:
    if measure == "turns":
        return f"max_turns({int(value)})"
    if measure == "tokens":
        return f"max_tokens({int(value)})"
    amount = Decimal(str(value)).quantize(Decimal("0.01"), rounding=ROUND_CEILING)
    return f"max_cost({str(amount)!r})"


def suggest(results: Iterable[RunResult], coverage: float = 0.95) -> list[Suggestion]:
    """Limits within which ``coverage`` of the solved runs finished, with what they save."""
    kept = [result for result in results if result.error is None]
    solved = [result for result in kept if result.meta.resolved is True]
    unsolved = [result for result in kept if result.meta.resolved is False]
    return _suggest(solved, unsolved, coverage)


def _suggest(
    solved: list[RunResult], unsolved: list[RunResult], coverage: float
) -> list[Suggestion]:
    suggestions = []
    for measure in ("turns", "tokens", "dollars"):
        values = [_measures(result)[measure] for result in solved]
        known = [value for value in values if value is not None]
        if len(known) < MIN_SOLVED or len(known) < len(values):
            continue
        point, low, high = quantile_interval(known, coverage)
        if measure == "turns":
            point, low, high = math.ceil(point), math.ceil(low), math.ceil(high)
        cut = sum(1 for value in known if value > point)
        saved = total = 0.0
        for result in unsolved:
            more, whole = _saved(result, measure, point)
            saved += more
            total += whole
        suggestions.append(
            Suggestion(
                measure=measure,
                expression=_expression(measure, point),
                value=point,
                coverage=coverage,
                low=low,
                high=high,
                solved_runs=len(known),
                solved_cut=cut,
                unsolved_runs=len(unsolved),
                unsolved_saved=saved,
                unsolved_total=total,
            )
        )
    return suggestions


def format_suggestions(suggestions: Sequence[Suggestion], title: str = "") -> str:
    if not suggestions:
        return (
            f"{title}: no suggestion (fewer than {MIN_SOLVED} solved runs with that measure)"
            if title
            else f"no suggestion: fewer than {MIN_SOLVED} solved runs"
        )
    lines = [title] if title else []
    for item in suggestions:
        share = item.unsolved_saved / item.unsolved_total if item.unsolved_total else 0.0
        unit = "tokens" if item.measure != "dollars" else "dollars"
        if item.measure == "dollars":
            interval = f"${item.low:.2f} to ${item.high:.2f}"
        else:
            interval = f"{item.low:,.0f} to {item.high:,.0f}"
        lines.append(
            f"  {item.expression:24} {item.coverage:.0%} of {item.solved_runs} solved runs "
            f"finished within it (95% interval {interval}); it cuts {item.solved_cut} of them "
            f"and saves {share:.0%} of the {unit} of {item.unsolved_runs} unsolved runs"
        )
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# stuck() fitted to an agent's own runs

#: The factors by which every ``stuck()`` threshold is scaled, tightest first.
STUCK_SCALES = (0.75, 1.0, 1.5, 2.0, 3.0, 4.0)
#: The share of solved runs a suggested ``stuck()`` may cut.
STUCK_BUDGET = 0.01


def stuck_thresholds(scale: float) -> dict[str, int | None]:
    """The ``stuck()`` defaults scaled by ``scale`` (rounded, never below each minimum)."""
    return {
        name: None if value is None else max(MINIMUMS[name], round(value * scale))
        for name, value in DEFAULTS.items()
    }


def stuck_candidates() -> list[Limit]:
    """``stuck()`` at each of ``STUCK_SCALES``, to replay side by side."""
    return [stuck(**stuck_thresholds(scale)) for scale in STUCK_SCALES]  # type: ignore[arg-type]


def wilson_interval(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval for a proportion (95% with the default ``z``)."""
    if n <= 0:
        raise ValueError("no trials")
    share = successes / n
    denominator = 1 + z * z / n
    centre = (share + z * z / (2 * n)) / denominator
    spread = z * math.sqrt(share * (1 - share) / n + z * z / (4 * n * n)) / denominator
    # At either end the interval reaches it exactly (the sum would miss it by a rounding).
    low = 0.0 if successes == 0 else max(0.0, min(share, centre - spread))
    high = 1.0 if successes == n else min(1.0, max(share, centre + spread))
    return low, high


@dataclass(frozen=True, slots=True)
class StuckSuggestion:
    """``stuck()`` thresholds fitted to a set of runs, and what they would have done there."""

    scale: float
    thresholds: dict[str, int | None]
    solved_runs: int
    solved_cut: int
    #: The Wilson 95% interval of the share of solved runs cut.
    low: float
    high: float
    #: Whether the tightest setting within the budget was found (else: the loosest tried).
    within_budget: bool
    unsolved_runs: int
    saved_tokens: int
    unsolved_tokens: int

    @property
    def expression(self) -> str:
        return repr(stuck(**self.thresholds))  # type: ignore[arg-type]

    def record(self) -> dict[str, Any]:
        return {
            "limit": self.expression,
            "scale": self.scale,
            "thresholds": self.thresholds,
            "solved_runs": self.solved_runs,
            "solved_cut": self.solved_cut,
            "solved_cut_interval_95": [self.low, self.high],
            "within_budget": self.within_budget,
            "budget": STUCK_BUDGET,
            "unsolved_runs": self.unsolved_runs,
            "unsolved_tokens_saved": self.saved_tokens,
            "unsolved_tokens": self.unsolved_tokens,
        }


def suggest_stuck(per_scale: Sequence[Sequence[RunResult]]) -> StuckSuggestion | None:
    """The tightest of ``stuck_candidates()`` (replayed: one list of results per scale, in
    order) that cut at most ``STUCK_BUDGET`` of the solved runs; None with fewer than
    ``MIN_SOLVED`` solved runs. When every scale cuts more, the loosest is given, marked so."""
    if len(per_scale) != len(STUCK_SCALES):
        raise ValueError(f"expected results for {len(STUCK_SCALES)} scales")
    fitted = None
    for scale, results in zip(STUCK_SCALES, per_scale, strict=True):
        kept = [result for result in results if result.error is None]
        solved = [result for result in kept if result.meta.resolved is True]
        unsolved = [result for result in kept if result.meta.resolved is False]
        if len(solved) < MIN_SOLVED:
            return None
        cut = sum(1 for result in solved if result.stopped)
        low, high = wilson_interval(cut, len(solved))
        within = cut <= STUCK_BUDGET * len(solved)
        fitted = StuckSuggestion(
            scale=scale,
            thresholds=stuck_thresholds(scale),
            solved_runs=len(solved),
            solved_cut=cut,
            low=low,
            high=high,
            within_budget=within,
            unsolved_runs=len(unsolved),
            saved_tokens=sum(result.saved_tokens for result in unsolved),
            unsolved_tokens=sum(result.tokens for result in unsolved),
        )
        if within:
            break
    return fitted


def format_stuck_suggestion(fitted: StuckSuggestion | None) -> str:
    if fitted is None:
        return f"  stuck(): no suggestion (fewer than {MIN_SOLVED} solved runs)"
    share = fitted.solved_cut / fitted.solved_runs
    saved = fitted.saved_tokens / fitted.unsolved_tokens if fitted.unsolved_tokens else 0.0
    budget = (
        f"the tightest of the thresholds tried within {STUCK_BUDGET:.0%} of solved runs cut"
        if fitted.within_budget
        else f"no thresholds tried stayed within {STUCK_BUDGET:.0%}; these are the loosest"
    )
    return (
        f"  {fitted.expression}\n"
        f"    the defaults x{fitted.scale:g}, {budget}: it cuts {fitted.solved_cut} of "
        f"{fitted.solved_runs} solved runs ({share:.1%}, 95% interval {fitted.low:.1%} to "
        f"{fitted.high:.1%}) and saves {saved:.0%} of the tokens of {fitted.unsolved_runs} "
        "unsolved runs"
    )


def profile_document(
    fitted: StuckSuggestion, suggestions: Sequence[Suggestion] = ()
) -> dict[str, Any]:
    """The profile file ``stuck(profile=PATH)`` loads: the fitted thresholds, what they were
    fitted on, and the other limits suggested from the same runs."""
    return {
        "stuck": fitted.thresholds,
        "fitted": fitted.record(),
        "limits": {item.measure: item.expression for item in suggestions},
    }
