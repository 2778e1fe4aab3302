"""Shared helpers of the detector tests: a driver that feeds a governor one call per turn."""

from __future__ import annotations

from haltwise import (
    Block,
    Governor,
    RunStarted,
    Stop,
    ToolCall,
    ToolResult,
    TurnEnded,
    TurnStarting,
)
from haltwise.engine.decisions import Decision, Warn
from haltwise.engine.limits import Limit
from haltwise.testing import FakeClock


class Driver:
    """Feeds one tool call per turn to a governor, as a driver would, and keeps the decisions."""

    def __init__(self, limit: Limit) -> None:
        self.governor = Governor(limit, clock=FakeClock())
        self.governor.handle(RunStarted(prompt="fix the bug", run_id="r"))
        self.count = 0

    def step(self, name: str, arguments: object, result: str, **extra: object) -> Decision:
        """One turn: a call and its result. The turn's strongest decision: a refusal or a stop
        if there was one, else a note, else the result's."""
        self.count += 1
        call_id = f"c{self.count}"
        decisions = [self.governor.handle(TurnStarting())]
        call = self.governor.handle(ToolCall(name, arguments, call_id=call_id))  # type: ignore[arg-type]
        decisions.append(call)
        if not isinstance(call, Block | Stop):
            decisions.append(
                self.governor.handle(ToolResult(name, result, call_id=call_id, **extra))  # type: ignore[arg-type]
            )
        decisions.append(self.governor.handle(TurnEnded()))
        for kinds in ((Block, Stop), (Warn,)):
            for decision in decisions:
                if isinstance(decision, kinds):
                    return decision
        return decisions[-1]
