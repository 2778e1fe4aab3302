"""What every framework adapter shares: the result of a governed run."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

from ..engine.outcome import Outcome, Status, Usage

__all__ = ["Governed"]

R = TypeVar("R")


@dataclass(frozen=True)
class Governed(Generic[R]):
    """A framework run under haltwise: how it ended, and what the framework itself returned.

    ``outcome`` is the same in every framework: status, reason, message, usage, partial output,
    suggestions and checkpoint. ``result`` is the framework's own result object (a ``RunResult``,
    an ``AgentRunResult``, a LangGraph state...) when its run returned one, and None when
    haltwise stopped the run before the framework could build one.
    """

    outcome: Outcome
    result: R | None = None

    def __repr__(self) -> str:
        # Short: a framework's result can be large, and asyncio formats reprs on the hot path.
        outcome, kind = self.outcome, type(self.result).__name__
        return f"Governed({outcome.status}, {outcome.reason!r}, result={kind})"

    @property
    def output(self) -> str | None:
        """The final answer, or the partial (or synthesized) one when a limit stopped the run."""
        return self.outcome.partial_output

    @property
    def completed(self) -> bool:
        """Whether the agent finished on its own (no limit, cancel or error ended it)."""
        return self.outcome.status is Status.COMPLETED

    @property
    def usage(self) -> Usage:
        return self.outcome.usage
