"""Usage snapshots and the Outcome: the one shape of every stop.

``Usage`` is an immutable snapshot of what a run spent (it adds with ``+``); ``Outcome`` is what
a run ended with, whatever ended it. The live, mutable counters are the governor's and live in
``governor.py``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from enum import Enum

__all__ = ["Outcome", "Status", "Usage"]


class Status(str, Enum):
    """How a run ended."""

    COMPLETED = "completed"
    COMPLETED_WITH_WARNINGS = "completed_with_warnings"
    ABANDONED = "abandoned"
    TIMED_OUT = "timed_out"
    CANCELLED = "cancelled"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True, slots=True)
class Usage:
    """What was spent. Adds with ``+``; an unknown cost stays unknown in a sum."""

    #: Turns admitted.
    turns: int = 0
    #: Model calls sent.
    model_calls: int = 0
    #: Tool calls admitted.
    tool_calls: int = 0
    #: Prompt tokens, cached ones included.
    input_tokens: int = 0
    #: Completion tokens, reasoning ones included.
    output_tokens: int = 0
    #: Prompt tokens read from a cache.
    cache_read_tokens: int = 0
    #: Prompt tokens written to a cache.
    cache_write_tokens: int = 0
    #: Dollars spent, or ``None`` when some model call had no known price.
    cost: Decimal | None = Decimal(0)
    #: Seconds elapsed (monotonic clock).
    elapsed: float = 0.0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        if not isinstance(other, Usage):
            return NotImplemented
        cost = None if self.cost is None or other.cost is None else self.cost + other.cost
        return Usage(
            turns=self.turns + other.turns,
            model_calls=self.model_calls + other.model_calls,
            tool_calls=self.tool_calls + other.tool_calls,
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cache_read_tokens=self.cache_read_tokens + other.cache_read_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
            cost=cost,
            elapsed=self.elapsed + other.elapsed,
        )


@dataclass(frozen=True, slots=True)
class Outcome:
    """How a run ended, and everything needed to understand or resume it."""

    status: Status
    #: A stable code: ``completed``, ``turn_limit``, ``tool_call_limit``, ``model_call_limit``,
    #: ``token_limit``, ``cost_limit``, ``time_limit``, ``stuck.repeat``, ``declined``,
    #: ``cancelled``, ``killed``, ...
    reason: str
    #: One sentence for a person, with the numbers.
    message: str
    usage: Usage = field(default_factory=Usage)
    #: The run's id.
    run_id: str = ""
    #: The last text the agent wrote, or a synthesized answer.
    partial_output: str | None = None
    #: What to try next.
    suggestions: tuple[str, ...] = ()
    #: A reference from which the run can be resumed with the counts it had.
    checkpoint: str | None = None
    #: The limit that stopped the run, as its ``repr`` (``None`` when none did).
    limit: str | None = None
    #: The phase whose limit stopped the run (``run.phase("plan", ...)``), if any.
    phase: str | None = None

    @property
    def cost(self) -> Decimal | None:
        return self.usage.cost

    @property
    def turns(self) -> int:
        return self.usage.turns

    @property
    def ok(self) -> bool:
        """Whether the run produced its answer (perhaps with warnings)."""
        return self.status in (Status.COMPLETED, Status.COMPLETED_WITH_WARNINGS)
