"""Replay: each recorded run fed, event by event, to a ``Governor`` on a clock that stands still.

The governor decides exactly as it would have live. Its decisions are carried out as far as a
recording allows: a ``Warn`` is noted (the recorded model never saw it); a ``Block`` means the
call would not have run, so its recorded result is not shown to the governor; an ``Ask`` gets no
answer (there is no human in a replay), which stops the run; a ``Stop`` ends the replay of that
run there. Spend is counted for the whole recorded run, so that what came after the stop is what
the stop would have saved.

One run can be replayed through several sets of limits at once (a threshold sweep): the events
are produced once and handed to each governor.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal

from ..engine.decisions import Ask, Block, Stop, Warn
from ..engine.errors import UnpricedModelError
from ..engine.events import ModelResponse, RunEnded, ToolResult, TurnStarting
from ..engine.governor import Governor
from ..engine.limits import Limit
from ..engine.pricing import Pricer
from .runs import Run, RunMeta

__all__ = ["RunResult", "replay"]


def _still() -> float:
    """The time of a replay: a recording's time does not pass again, and no time limit runs
    out while one is replayed."""
    return 0.0


@dataclass(slots=True)
class RunResult:
    """What replaying one run through one set of limits found."""

    meta: RunMeta
    #: Steps (turns) of the recorded run, and what the whole run spent.
    steps: int = 0
    tokens: int = 0
    #: Dollars, or None when some step had no known price ("cost unknown", never $0).
    cost: Decimal | None = Decimal(0)
    #: The step during which haltwise would have stopped the run (None: it would not have).
    stop_step: int | None = None
    #: The stop's reason code, message and limit.
    stop_reason: str | None = None
    stop_message: str | None = None
    stop_limit: str | None = None
    #: For a stuck detector's stop: the step at which the repeated pattern began.
    onset_step: int | None = None
    #: The first step with a note for the model, and how many calls were refused.
    warn_step: int | None = None
    blocked: int = 0
    #: What came after the stop: the steps, tokens and dollars it would have saved.
    saved_steps: int = 0
    saved_tokens: int = 0
    saved_cost: Decimal | None = Decimal(0)
    #: Cumulative tokens and dollars after each step (dollars None once unknown), for plots.
    tokens_by_step: list[int] = field(default_factory=list)
    cost_by_step: list[float | None] = field(default_factory=list)
    #: Why this run could not be replayed with these limits (e.g. an unpriced model under a
    #: cost limit), or None.
    error: str | None = None

    @property
    def stopped(self) -> bool:
        return self.stop_step is not None

    @property
    def steps_after_onset(self) -> int | None:
        """How many steps after the onset of the repeat the stop came."""
        if self.stop_step is None or self.onset_step is None:
            return None
        return max(0, self.stop_step - self.onset_step)


class _Replay:
    """One governor's view of the run being replayed."""

    __slots__ = ("done", "governor", "refused", "result", "spent_cost", "spent_tokens")

    def __init__(self, governor: Governor, result: RunResult) -> None:
        self.governor = governor
        self.result = result
        self.refused: set[str] = set()
        self.done = False
        self.spent_tokens = 0
        self.spent_cost: Decimal | None = Decimal(0)


def replay(
    run: Run,
    limits: Sequence[Limit],
    *,
    pricer: Pricer,
    clock: Callable[[], float] | None = None,
) -> list[RunResult]:
    """Replay ``run`` through each of ``limits``; one ``RunResult`` for each, in order."""
    if clock is None:
        clock = _still
    replays = [
        _Replay(
            Governor(limit, clock=clock, pricer=pricer, new_id=lambda: run.meta.run_id),
            RunResult(run.meta),
        )
        for limit in limits
    ]
    turn = 0
    tokens = 0
    cost: Decimal | None = Decimal(0)
    tokens_by_step: list[int] = []
    cost_by_step: list[float | None] = []
    for event in run.events:
        kind = type(event)
        if kind is TurnStarting:
            if turn:
                tokens_by_step.append(tokens)
                cost_by_step.append(None if cost is None else float(cost))
            turn += 1
        elif kind is ModelResponse:
            assert isinstance(event, ModelResponse)
            tokens += event.input_tokens + event.output_tokens
            if cost is not None:
                step_cost = event.cost
                if step_cost is None and event.model:
                    step_cost = pricer.cost(
                        event.model,
                        input_tokens=event.input_tokens,
                        output_tokens=event.output_tokens,
                        cache_read_tokens=event.cache_read_tokens,
                        cache_write_tokens=event.cache_write_tokens,
                    )
                cost = None if step_cost is None else cost + step_cost
        for state in replays:
            if state.done:
                continue
            if kind is ModelResponse:
                state.spent_tokens = tokens
                state.spent_cost = cost
            if kind is ToolResult:
                assert isinstance(event, ToolResult)
                if event.call_id and event.call_id in state.refused:
                    continue  # the call was refused: this result never happened
            if kind is RunEnded:
                state.done = True
                continue
            _decide(state, event, turn)
    if turn:
        tokens_by_step.append(tokens)
        cost_by_step.append(None if cost is None else float(cost))
    results = []
    for state in replays:
        result = state.result
        result.steps = turn
        result.tokens = tokens
        result.cost = cost
        result.tokens_by_step = tokens_by_step
        result.cost_by_step = cost_by_step
        if result.stop_step is not None:
            result.saved_steps = turn - result.stop_step
            result.saved_tokens = tokens - state.spent_tokens
            result.saved_cost = (
                None if cost is None or state.spent_cost is None else cost - state.spent_cost
            )
        else:
            result.saved_cost = Decimal(0)
        results.append(result)
    return results


def _decide(state: _Replay, event: object, turn: int) -> None:
    result = state.result
    governor = state.governor
    try:
        decision = governor.handle(event)  # type: ignore[arg-type]
        if isinstance(decision, Ask):
            decision = governor.resolve(decision, None)
    except UnpricedModelError as error:
        result.error = str(error)
        state.done = True
        return
    if isinstance(decision, Warn):
        if result.warn_step is None:
            result.warn_step = turn
    elif isinstance(decision, Block):
        result.blocked += 1
        if result.warn_step is None:
            result.warn_step = turn
        if decision.call.call_id:
            state.refused.add(decision.call.call_id)
    elif isinstance(decision, Stop):
        state.done = True
        outcome = decision.outcome
        if outcome.reason == "completed":
            return
        # A stop before a turn runs saves that turn too.
        result.stop_step = turn - 1 if type(event) is TurnStarting else turn
        result.stop_reason = outcome.reason
        result.stop_message = outcome.message
        result.stop_limit = outcome.limit
        result.onset_step = _onset(governor, outcome.limit)


def _onset(governor: Governor, limit: str | None) -> int | None:
    """The turn at which a stuck detector's pattern began, from the detector's own state."""
    if limit is None:
        return None
    for leaf in governor.limits.leaves():
        if repr(leaf) == limit:
            onset = getattr(governor.slot(leaf).state, "onset", None)
            return onset if isinstance(onset, int) else None
    return None
