"""What an audit reports: a record per run, and totals per corpus and per model.

The measures follow what the recorded labels can tell (see ``../shared/traces/README.md``):

- **saved on unsolved runs**: on runs that did not solve their task, the steps, tokens and
  dollars after the point where the limits would have stopped them; also for the subset that
  really ended on one of the agent's own limits (``exit_cost``, ``exit_context``);
- **false cuts**: runs that solved their task but would have been stopped;
- **onset to stop**: for stuck detectors, how many steps after the repeat began the stop came.

Dollars are only added where every step's price is known; runs whose cost is unknown are
counted apart and reported as "cost unknown", never as $0.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from .replay import RunResult

__all__ = ["Saved", "Totals", "format_table", "run_record", "totals_record"]


@dataclass(slots=True)
class Saved:
    """Runs, and what they spent and what a stop would have saved of it."""

    runs: int = 0
    stopped: int = 0
    steps: int = 0
    tokens: int = 0
    #: Dollars of the runs whose cost is known; ``cost_unknown`` counts the others.
    cost: Decimal = Decimal(0)
    cost_unknown: int = 0
    saved_steps: int = 0
    saved_tokens: int = 0
    saved_cost: Decimal = Decimal(0)

    def add(self, result: RunResult) -> None:
        self.runs += 1
        self.steps += result.steps
        self.tokens += result.tokens
        if result.cost is None:
            self.cost_unknown += 1
        else:
            self.cost += result.cost
        if result.stopped:
            self.stopped += 1
            self.saved_steps += result.saved_steps
            self.saved_tokens += result.saved_tokens
            if result.cost is not None and result.saved_cost is not None:
                self.saved_cost += result.saved_cost

    def share(self, part: str = "tokens") -> float | None:
        """The part of ``tokens``, ``steps`` or ``cost`` that a stop would have saved."""
        if part == "tokens":
            saved, whole = float(self.saved_tokens), float(self.tokens)
        elif part == "steps":
            saved, whole = float(self.saved_steps), float(self.steps)
        else:
            saved, whole = float(self.saved_cost), float(self.cost)
        return saved / whole if whole else None

    def record(self) -> dict[str, Any]:
        return {
            "runs": self.runs,
            "stopped": self.stopped,
            "steps": self.steps,
            "tokens": self.tokens,
            "cost": str(self.cost) if self.runs > self.cost_unknown else None,
            "runs_cost_unknown": self.cost_unknown,
            "saved_steps": self.saved_steps,
            "saved_tokens": self.saved_tokens,
            "saved_cost": str(self.saved_cost) if self.runs > self.cost_unknown else None,
        }


@dataclass(slots=True)
class Totals:
    """The totals of one group of runs (a corpus, a model, or everything)."""

    runs: int = 0
    errors: int = 0
    stopped: int = 0
    steps: int = 0
    tokens: int = 0
    solved: Saved = field(default_factory=Saved)
    unsolved: Saved = field(default_factory=Saved)
    #: Unsolved runs that really ended on one of the agent's own limits.
    on_limit: Saved = field(default_factory=Saved)
    unlabelled: Saved = field(default_factory=Saved)
    #: Steps from the onset of a repeat to the stop, per stopped run that has an onset.
    onset_to_stop: list[int] = field(default_factory=list)
    reasons: dict[str, int] = field(default_factory=dict)

    def add(self, result: RunResult) -> None:
        self.runs += 1
        if result.error is not None:
            self.errors += 1
            return
        self.steps += result.steps
        self.tokens += result.tokens
        if result.stopped:
            self.stopped += 1
            reason = result.stop_reason or "?"
            self.reasons[reason] = self.reasons.get(reason, 0) + 1
            after = result.steps_after_onset
            if after is not None:
                self.onset_to_stop.append(after)
        resolved = result.meta.resolved
        if resolved is True:
            self.solved.add(result)
        elif resolved is False:
            self.unsolved.add(result)
            if result.meta.ended_on_limit:
                self.on_limit.add(result)
        else:
            self.unlabelled.add(result)

    @property
    def solved_cut(self) -> int:
        """Runs that solved their task but would have been stopped: false cuts."""
        return self.solved.stopped

    def record(self) -> dict[str, Any]:
        median = statistics.median(self.onset_to_stop) if self.onset_to_stop else None
        return {
            "runs": self.runs,
            "errors": self.errors,
            "stopped": self.stopped,
            "steps": self.steps,
            "tokens": self.tokens,
            "solved": self.solved.runs,
            "solved_cut": self.solved_cut,
            "unsolved": self.unsolved.record(),
            "unsolved_on_limit": self.on_limit.record(),
            "unlabelled": self.unlabelled.record(),
            "steps_onset_to_stop_median": median,
            "stop_reasons": dict(sorted(self.reasons.items())),
        }


def run_record(result: RunResult) -> dict[str, Any]:
    """One run of the ``--json`` document."""
    meta = result.meta
    return {
        "run_id": meta.run_id,
        "corpus": meta.corpus,
        "model": meta.model or None,
        "source": meta.source,
        "format": meta.format,
        "steps": result.steps,
        "resolved": meta.resolved,
        "exit_status": meta.exit_status,
        "ended_on_limit": meta.ended_on_limit,
        "usage": meta.usage,
        "tokens": result.tokens,
        "cost": None if result.cost is None else str(result.cost),
        "recorded_cost": None if meta.recorded_cost is None else str(meta.recorded_cost),
        "stop_step": result.stop_step,
        "stop_reason": result.stop_reason,
        "stop_message": result.stop_message,
        "stop_limit": result.stop_limit,
        "onset_step": result.onset_step,
        "steps_after_onset": result.steps_after_onset,
        "warn_step": result.warn_step,
        "blocked_calls": result.blocked,
        "saved_steps": result.saved_steps,
        "saved_tokens": result.saved_tokens,
        "saved_cost": None if result.saved_cost is None else str(result.saved_cost),
        "error": result.error,
    }


def totals_record(groups: dict[str, Totals]) -> dict[str, Any]:
    return {name: totals.record() for name, totals in groups.items()}


# --------------------------------------------------------------------------------------------
# Text


def _money(amount: Decimal, unknown: int, runs: int) -> str:
    if runs and unknown == runs:
        return "cost unknown"
    text = f"${amount:,.2f}" if amount >= 1 or amount == 0 else f"${amount:.4f}"
    return f"{text} (+{unknown} unknown)" if unknown else text


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.0f}%"


def format_table(groups: Iterable[tuple[str, Totals]], *, title: str = "") -> str:
    """A plain-text table: one row per group."""
    header = (
        "group",
        "runs",
        "stopped",
        "solved cut",
        "unsolved: stopped",
        "saved steps",
        "saved tokens",
        "saved $",
        "on limit: stopped",
        "saved tokens",
        "saved $",
        "onset→stop",
    )
    rows = [header]
    for name, totals in groups:
        unsolved, limit = totals.unsolved, totals.on_limit
        median = statistics.median(totals.onset_to_stop) if totals.onset_to_stop else None
        rows.append(
            (
                name,
                str(totals.runs) + (f" ({totals.errors} err)" if totals.errors else ""),
                str(totals.stopped),
                f"{totals.solved_cut}/{totals.solved.runs}",
                f"{unsolved.stopped}/{unsolved.runs}",
                f"{unsolved.saved_steps} ({_percent(unsolved.share('steps'))})",
                f"{unsolved.saved_tokens:,} ({_percent(unsolved.share('tokens'))})",
                _money(unsolved.saved_cost, unsolved.cost_unknown, unsolved.runs),
                f"{limit.stopped}/{limit.runs}",
                f"{limit.saved_tokens:,} ({_percent(limit.share('tokens'))})",
                _money(limit.saved_cost, limit.cost_unknown, limit.runs),
                "-" if median is None else f"{median:g}",
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = [title] if title else []
    for index, row in enumerate(rows):
        cells = [
            cell.ljust(widths[i]) if i == 0 else cell.rjust(widths[i]) for i, cell in enumerate(row)
        ]
        lines.append("  ".join(cells).rstrip())
        if index == 0:
            lines.append("  ".join("-" * width for width in widths))
    return "\n".join(lines)
