"""What a reader makes of a recorded run: its metadata and its events.

A ``Run`` is one agent run as the governor would have seen it live: the same event stream,
with per-step usage where the file has it. ``RunMeta`` holds what the file (or the corpus it
sits in) says about the run from outside: which model, whether the task was solved, how the
run really ended. A file that cannot be read becomes a ``ReadError`` naming the file and the
position, and the rest of the corpus still runs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from decimal import Decimal

from ..engine.events import Event

__all__ = [
    "USAGE_ESTIMATED",
    "USAGE_NONE",
    "USAGE_PER_STEP",
    "ReadError",
    "ReadNote",
    "Run",
    "RunMeta",
]

#: Where a run's per-step usage came from.
USAGE_PER_STEP = "per step"
USAGE_ESTIMATED = "estimated from run totals"
USAGE_NONE = "none"

_LIMIT_EXIT = re.compile(
    r"exit_cost|exit_context|limits?_?exceeded|cost_?limit|context_?length", re.I
)


def ended_on_limit(exit_status: str | None) -> bool:
    """Whether an agent's exit status says the run ended on one of its own limits."""
    return bool(exit_status) and _LIMIT_EXIT.search(exit_status or "") is not None


@dataclass(slots=True)
class RunMeta:
    """What is known about a recorded run besides its events."""

    #: The run's id within its corpus (an instance id, with its sub-folder when there is one).
    run_id: str
    #: The corpus: the first folder under the path given to ``audit``.
    corpus: str
    #: The model's name, or ``""`` when the file does not say.
    model: str
    #: The file the run came from.
    source: str
    #: The reader that read it: ``swe-agent``, ``mini-swe-agent``, ``tau-bench``, ``openai``,
    #: ``haltwise``.
    format: str
    #: Whether the run solved its task, when the corpus says (``None``: unknown).
    resolved: bool | None = None
    #: How the run really ended, in the agent's own words (``submitted``, ``exit_cost``, ...).
    exit_status: str | None = None
    #: Whether that end was one of the agent's own limits (cost, context, steps).
    ended_on_limit: bool = False
    #: Where per-step usage came from: ``USAGE_PER_STEP``, ``USAGE_ESTIMATED`` or ``USAGE_NONE``.
    usage: str = USAGE_NONE
    #: The cost the agent itself recorded for the run, when it did (its own prices).
    recorded_cost: Decimal | None = None


@dataclass(slots=True)
class Run:
    """A recorded run: its metadata and the events the governor would have seen."""

    meta: RunMeta
    events: list[Event] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class ReadNote:
    """What a reader says about a place in what it read: ``source at position: message``."""

    #: The file, or the folder of a corpus.
    source: str
    #: Where in the file: ``line 12, column 4``, ``trajectory[7]``, ``item 31``; or ``""``.
    position: str
    message: str

    def __str__(self) -> str:
        where = f" at {self.position}" if self.position else ""
        return f"{self.source}{where}: {self.message}"


@dataclass(frozen=True, slots=True)
class ReadError(ReadNote):
    """A file, or one run in it, that could not be read."""
