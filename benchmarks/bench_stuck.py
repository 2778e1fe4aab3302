"""Stuck detection costs O(window) per step and bounded memory, whatever the history's length.

A governor with ``stuck()`` is fed runs of 10, 1,000 and 100,000 steps (a step: a turn with a
model response, one tool call with 2 KB of arguments and a 100-line result, all different, so
that no detector stops the run). For each length: the mean time per step over the last 1,000
steps (or all of them), and the size of every detector's state at the end (deep, each shared
object counted once). Both stay flat as the history grows a thousandfold.

    python benchmarks/run.py stuck
"""

from __future__ import annotations

import time
from typing import Any

from haltwise.engine.detectors import stuck
from haltwise.engine.events import (
    ModelRequest,
    ModelResponse,
    RunStarted,
    ToolCall,
    ToolResult,
    TurnEnded,
    TurnStarting,
)
from haltwise.engine.governor import Governor
from haltwise.engine.limits import Leaf
from haltwise.testing import deep_size

LENGTHS = (10, 1_000, 100_000)
TIMED = 1_000


def _step(index: int) -> list[Any]:
    # Numbers of a fixed width, so that every step carries the same amount of text.
    body = "\n".join(
        f"line {index:06d}-{line:03d}: value {index * 131 + line:09d}" for line in range(100)
    )
    call = ToolCall(
        "edit_file",
        {
            "path": f"src/module_{index:06d}.py",
            "content": f"# revision {index:06d}\n" + "x = 1\n" * 340,
        },
        call_id=f"c{index}",
    )
    return [
        TurnStarting(),
        ModelRequest(model=""),
        ModelResponse(text=f"Step {index:06d}: editing module {index:06d}.", tool_calls=1),
        call,
        ToolResult("edit_file", content=body, call_id=f"c{index}"),
        TurnEnded(),
    ]


def measure(length: int) -> tuple[float, int, str]:
    """Mean seconds per step over the last steps, the detectors' state size, the decision."""
    limits = stuck()
    governor = Governor(limits, clock=lambda: 0.0)
    governor.handle(RunStarted(prompt="refactor everything", run_id="bench"))
    timed_from = max(0, length - TIMED)
    started = 0.0
    decision: object = None
    for index in range(length):
        events = _step(index)  # built outside the timed part
        if index == timed_from:
            started = time.perf_counter()
        for event in events:
            decision = governor.handle(event)
    elapsed = time.perf_counter() - started
    leaves: list[Leaf] = list(limits.leaves())
    size = deep_size([governor.slot(leaf).state for leaf in leaves])
    return elapsed / (length - timed_from), size, type(decision).__name__


def main() -> None:
    print(f"{'steps':>8}  {'µs per step':>12}  {'state bytes':>12}  last decision")
    for length in LENGTHS:
        per_step, size, decision = measure(length)
        print(f"{length:>8,}  {per_step * 1e6:>12.1f}  {size:>12,}  {decision}")


if __name__ == "__main__":
    main()
