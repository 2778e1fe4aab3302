"""The values the bounded loops pass around: issues, reviews, iteration records, results.

Nothing here runs a callback or talks to a governor; these are values, each JSON-round-trippable
where a checkpoint has to hold it (``Issue``, ``Iteration``).

- ``Issue``: one problem a review found, with a severity (``minor`` < ``significant`` <
  ``critical``); plain strings are read as ``significant`` issues.
- ``Review``: what a judge callback (``accept=``, ``review``) found: issues, metrics, an estimate.
  A judge may return a ``Review``, a bool, a string, ``None`` or an iterable of issues: see
  ``as_review``.
- ``Iteration``: the record of one pass of a loop (what was tried, what came of it): the loops'
  history and the convergence detector's input.
- ``LoopResult``: how a loop ended: its ``Outcome``, its value (accepted, or best effort) and
  its history.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Generic, Literal, TypeVar

from ..engine.errors import InvalidValueError
from ..engine.outcome import Outcome, Status

__all__ = [
    "SEVERITIES",
    "STRICTNESS_LEVELS",
    "Issue",
    "Iteration",
    "LoopResult",
    "Review",
    "Severity",
    "Strictness",
    "as_review",
]

T = TypeVar("T")

Severity = Literal["minor", "significant", "critical"]
#: Least severe first.
SEVERITIES: tuple[Severity, ...] = ("minor", "significant", "critical")
#: Which issues block at a given strictness: ``all`` every issue, ``significant`` significant
#: and critical ones, ``critical`` only critical ones.
Strictness = Literal["all", "significant", "critical"]
STRICTNESS_LEVELS: tuple[Strictness, ...] = ("all", "significant", "critical")
_RANK: dict[str, int] = {"minor": 0, "significant": 1, "critical": 2, "all": 0}


@dataclass(frozen=True, slots=True)
class Issue:
    """One problem found in a candidate."""

    text: str
    severity: Severity = "significant"

    def __post_init__(self) -> None:
        if not isinstance(self.text, str):
            object.__setattr__(self, "text", str(self.text))
        if self.severity not in SEVERITIES:
            raise InvalidValueError(
                "Issue(severity)", self.severity, "'minor', 'significant' or 'critical'"
            )

    def blocks(self, strictness: Strictness) -> bool:
        """Whether this issue holds a candidate back at ``strictness``."""
        return _RANK[self.severity] >= _RANK[strictness]

    def __str__(self) -> str:
        return self.text if self.severity == "significant" else f"{self.text} ({self.severity})"

    def to_dict(self) -> dict[str, str]:
        return {"text": self.text, "severity": self.severity}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Issue:
        return cls(str(data["text"]), data.get("severity", "significant"))


def as_issue(value: Issue | str) -> Issue:
    """An ``Issue`` from an issue or a string (a ``significant`` issue)."""
    return value if isinstance(value, Issue) else Issue(str(value))


def most_severe_first(issues: Iterable[Issue], limit: int | None = None) -> tuple[Issue, ...]:
    """``issues`` ordered critical first (stable within a severity), at most ``limit`` of them."""
    ordered = sorted(issues, key=lambda issue: -_RANK[issue.severity])
    return tuple(ordered if limit is None else ordered[:limit])


@dataclass(frozen=True, slots=True, init=False)
class Review:
    """What a judge found in a candidate: no issues means accepted.

    ``metrics`` are numbers the caller names (``lines_changed``, ``failing_tests``): the
    convergence detector watches the one it is told to. ``estimate`` is a cost estimate, for
    "the same estimate again and again".
    """

    issues: tuple[Issue, ...]
    metrics: Mapping[str, float]
    estimate: Decimal | float | None

    def __init__(
        self,
        issues: Iterable[Issue | str] = (),
        *,
        metrics: Mapping[str, float] | None = None,
        estimate: Decimal | float | None = None,
    ) -> None:
        if isinstance(issues, str | Issue):
            issues = (issues,)
        object.__setattr__(self, "issues", tuple(as_issue(issue) for issue in issues))
        object.__setattr__(self, "metrics", dict(metrics or {}))
        object.__setattr__(self, "estimate", estimate)

    @property
    def accepted(self) -> bool:
        return not self.issues


def as_review(value: object) -> Review:
    """A ``Review`` from what a judge returned.

    ``True`` or ``None``: accepted. ``False``: rejected ("not accepted"). A string: rejected, and
    the string says why. An iterable of issues or strings: rejected when non-empty. A ``Review``:
    itself.
    """
    if isinstance(value, Review):
        return value
    if value is None or value is True:
        return Review()
    if value is False:
        return Review(("not accepted",))
    if isinstance(value, str | Issue):
        return Review((value,))
    if isinstance(value, Iterable):
        return Review(value)
    raise InvalidValueError(
        "the judge's result",
        value,
        "a Review, a bool, None, a string or an iterable of issues (strings or Issue)",
    )


@dataclass(frozen=True, slots=True)
class Iteration:
    """The record of one pass of a loop: what was tried and what came of it."""

    #: 1 for the first pass.
    number: int
    #: What the pass did: ``attempt``, ``review``, ``test``, ``simplify``, ``quote``, ...
    label: str = ""
    #: A short description of the value the pass produced or judged.
    summary: str | None = None
    #: The problems found (for a failed test run: the failing tests, as critical issues).
    issues: tuple[Issue, ...] = ()
    #: Numbers the caller named, and ``issues`` / ``failing_tests`` counted by the loop.
    metrics: Mapping[str, float] = field(default_factory=dict)
    #: A cost estimate, when the pass made one.
    estimate: Decimal | float | None = None
    #: ``"ValueError: boom"`` when a callback raised: the pass failed, and is kept.
    error: str | None = None
    #: Whether the pass's value was accepted.
    accepted: bool = False
    #: The strictness the pass was judged at.
    strictness: Strictness = "all"
    #: Seconds the pass took, on the loop's clock.
    elapsed: float = 0.0

    @property
    def failed(self) -> bool:
        """Whether a callback raised during the pass."""
        return self.error is not None

    def signature(self) -> tuple[str, frozenset[str]] | None:
        """What "the same problem again" compares: the issues, else the error, else None."""
        if self.issues:
            return ("issues", frozenset(issue.text for issue in self.issues))
        if self.error is not None:
            return ("error", frozenset((self.error,)))
        return None

    def to_dict(self) -> dict[str, Any]:
        estimate: str | float | None = self.estimate  # type: ignore[assignment]
        if isinstance(self.estimate, Decimal):
            estimate = str(self.estimate)
        return {
            "number": self.number,
            "label": self.label,
            "summary": self.summary,
            "issues": [issue.to_dict() for issue in self.issues],
            "metrics": {name: _finite(value) for name, value in self.metrics.items()},
            "estimate": estimate,
            "error": self.error,
            "accepted": self.accepted,
            "strictness": self.strictness,
            "elapsed": _finite(self.elapsed),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Iteration:
        estimate = data.get("estimate")
        return cls(
            number=int(data["number"]),
            label=str(data.get("label", "")),
            summary=data.get("summary"),
            issues=tuple(Issue.from_dict(issue) for issue in data.get("issues", ())),
            metrics={str(k): float(v) for k, v in dict(data.get("metrics", {})).items()},
            estimate=Decimal(estimate) if isinstance(estimate, str) else estimate,
            error=data.get("error"),
            accepted=bool(data.get("accepted", False)),
            strictness=data.get("strictness", "all"),
            elapsed=float(data.get("elapsed", 0.0)),
        )

    def __repr__(self) -> str:
        parts = [f"#{self.number}"]
        if self.label:
            parts.append(self.label)
        if self.error is not None:
            parts.append(f"raised {self.error}")
        elif self.accepted:
            parts.append("accepted")
        if self.issues:
            parts.append("issues=[" + ", ".join(str(issue) for issue in self.issues) + "]")
        if self.estimate is not None:
            parts.append(f"estimate={self.estimate}")
        return "Iteration(" + " ".join(parts) + ")"


def _finite(value: float) -> float | str:
    """JSON has no infinity or NaN: keep them as strings."""
    value = float(value)
    return value if math.isfinite(value) else str(value)


@dataclass(frozen=True, slots=True)
class LoopResult(Generic[T]):
    """How a bounded loop ended: the ``Outcome``, the value, and every pass it made."""

    outcome: Outcome
    #: The accepted value; or the best effort (refine, simplify, a stopped loop); None when the
    #: loop abandoned with nothing worth keeping.
    value: T | None
    #: Every pass, in order, failed ones included.
    history: tuple[Iteration, ...] = ()

    @property
    def ok(self) -> bool:
        """Whether the loop produced its value (perhaps with warnings)."""
        return self.outcome.ok

    @property
    def status(self) -> Status:
        return self.outcome.status

    @property
    def reason(self) -> str:
        return self.outcome.reason

    @property
    def iterations(self) -> int:
        """How many passes ran."""
        return len(self.history)

    @property
    def tried(self) -> tuple[str, ...]:
        """One line per pass: what was tried and what came of it."""
        return tuple(describe_iteration(iteration) for iteration in self.history)

    def __repr__(self) -> str:
        return (
            f"LoopResult({self.outcome.status}, reason={self.outcome.reason!r}, "
            f"iterations={self.iterations}, value={_short(self.value)})"
        )


def describe_iteration(iteration: Iteration) -> str:
    """``"attempt 2: 'spec v2' -> rejected: no acceptance tests"``."""
    head = f"{iteration.label or 'pass'} {iteration.number}"
    if iteration.summary is not None:
        head += f": {iteration.summary}"
    if iteration.estimate is not None:
        head += f" (estimate {iteration.estimate})"
    if iteration.error is not None:
        return f"{head} -> raised {iteration.error}"
    if iteration.accepted:
        lesser = f", with {'; '.join(map(str, iteration.issues))}" if iteration.issues else ""
        return f"{head} -> accepted{lesser}"
    if iteration.issues:
        return f"{head} -> " + "; ".join(str(issue) for issue in iteration.issues)
    return head


def tried_list(history: Sequence[Iteration], limit: int = 3) -> str:
    """The last ``limit`` passes, one clause each, for a message."""
    shown = "; ".join(describe_iteration(iteration) for iteration in history[-limit:])
    earlier = len(history) - limit
    return (f"{earlier} earlier, then " if earlier > 0 else "") + (shown or "nothing")


def summarize(value: object, width: int = 120) -> str:
    """A one-line description of ``value`` for histories and messages."""
    text = value if isinstance(value, str) else repr(value)
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _short(value: object) -> str:
    return summarize(value, 60) if value is not None else "None"


def issue_list(issues: Sequence[Issue], limit: int = 3) -> str:
    """``"a; b; c and 2 more"``."""
    shown = "; ".join(str(issue) for issue in issues[:limit])
    more = len(issues) - limit
    return shown + (f" and {more} more" if more > 0 else "")
