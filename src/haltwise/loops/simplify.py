"""``simplify(n)``: simplification passes that stop at diminishing returns.

Each pass proposes a simpler candidate; ``measure`` says how big it is (lines, tokens, steps).
A smaller candidate is kept; the loop stops when a pass improves the size by less than
``min_improvement`` (5% by default: ``converged.no_improvement``), after ``max_passes`` passes
(``iteration_limit``), or at once when the candidate is already below ``min_size`` ("too small
to bother"). A pass that raises is recorded and the candidate kept. Simplifying is an
optimisation, so every ending returns the best candidate: it never abandons the work.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from decimal import Decimal
from typing import Any, TypeVar

from ..drivers.prompters import Prompter
from ..engine.errors import InvalidValueError
from ..engine.governor import Governor
from ..engine.ledger import Ledger
from ..engine.limits import Limit
from ..engine.outcome import Status
from ._flow import _MISSING, BoundedLoop, Logic, Step, _Finish, _Run, adrive, describe_error, drive
from .convergence import Convergence, convergence
from .records import Iteration, LoopResult, summarize

__all__ = ["Simplify", "simplify"]

T = TypeVar("T")


class Simplify(BoundedLoop):
    """At most ``max_passes`` simplification passes. Build it with ``simplify()``."""

    kind = "simplify"

    def __init__(
        self,
        max_passes: int,
        *,
        min_improvement: float,
        min_size: float | None,
        metric: str,
        ledger: Ledger | None,
        dump: Callable[[Any], Any] | None,
        load: Callable[[Any], Any] | None,
        step_limits: Limit | None,
        args: str,
    ) -> None:
        super().__init__(ledger=ledger, dump=dump, load=load, step_limits=step_limits, args=args)
        self.max_passes = max_passes
        self.min_improvement = min_improvement
        #: Below this size a candidate is not worth simplifying (None: always try).
        self.min_size = min_size
        #: The name of what ``measure`` returns, in histories and messages.
        self.metric = metric
        #: One pass compared with the one before: the convergence detector, window 2.
        self.detector: Convergence = convergence(
            same_issues=None,
            same_estimate=None,
            metric=metric,
            min_improvement=min_improvement,
            window=2,
        )

    def run(
        self,
        candidate: T,
        simplify: Callable[[T, Step], T],
        measure: Callable[[T], float | int | Decimal],
        *,
        governor: Governor | None = None,
        clock: Callable[[], float] | None = None,
        prompter: Prompter | None = None,
    ) -> LoopResult[T]:
        """Simplify ``candidate`` with ``simplify(candidate, step)``, sized by ``measure``."""
        return drive(self._start((candidate, simplify, measure), governor, clock, prompter, None))

    async def arun(
        self,
        candidate: T,
        simplify: Callable[[T, Step], Any],
        measure: Callable[[T], Any],
        *,
        governor: Governor | None = None,
        clock: Callable[[], float] | None = None,
        prompter: Prompter | None = None,
    ) -> LoopResult[T]:
        flow = self._start((candidate, simplify, measure), governor, clock, prompter, None)
        return await adrive(flow)

    def resume(
        self,
        checkpoint: str,
        candidate: T,
        simplify: Callable[[T, Step], T],
        measure: Callable[[T], float | int | Decimal],
        *,
        governor: Governor | None = None,
        clock: Callable[[], float] | None = None,
        prompter: Prompter | None = None,
    ) -> LoopResult[T]:
        """Go on from a checkpoint; ``candidate`` is used when the saved one could not be stored."""
        flow = self._start((candidate, simplify, measure), governor, clock, prompter, checkpoint)
        return drive(flow)

    async def aresume(
        self,
        checkpoint: str,
        candidate: T,
        simplify: Callable[[T, Step], Any],
        measure: Callable[[T], Any],
        *,
        governor: Governor | None = None,
        clock: Callable[[], float] | None = None,
        prompter: Prompter | None = None,
    ) -> LoopResult[T]:
        flow = self._start((candidate, simplify, measure), governor, clock, prompter, checkpoint)
        return await adrive(flow)

    def _logic(self, run: _Run, callbacks: tuple[Any, ...]) -> Logic:
        initial, simplify, measure = callbacks
        name = self.metric
        current = run.restored("best")
        size = run.state.get("size")
        if current is _MISSING or size is None:
            current, size = initial, None
        run.keep("best", current)
        if size is None:
            reply = yield from run.call(measure, current)
            size = _size(reply.error, reply.value)
            if isinstance(size, str):
                return _Finish(
                    Status.COMPLETED_WITH_WARNINGS,
                    "measure_failed",
                    f"Could not measure the candidate ({size}), so it was not simplified.",
                    current,
                    ("Check the measure callback",),
                )
            run.state["size"] = size
        if self.min_size is not None and size < self.min_size:
            return _Finish(
                Status.COMPLETED,
                "completed",
                f"Too small to simplify: {name}={size:g} is below {self.min_size:g}.",
                current,
            )
        first = run.state.setdefault("first_size", size)
        while run.number < self.max_passes:
            step = yield from run.next_step(self.max_passes)
            started = run.now()
            reply = yield from run.call(simplify, current, step)
            if reply.error is not None:
                run.record(
                    Iteration(
                        step.number,
                        "simplify",
                        error=describe_error(reply.error),
                        elapsed=run.now() - started,
                    )
                )
                continue
            proposal = reply.value
            run.unjudged(step.number, "simplify", proposal, started)
            measured = yield from run.call(measure, proposal)
            new_size = _size(measured.error, measured.value)
            if isinstance(new_size, str):
                run.record(
                    Iteration(
                        step.number,
                        "simplify",
                        summary=summarize(proposal),
                        error=new_size,
                        elapsed=run.now() - started,
                    )
                )
                continue
            smaller = new_size < size
            run.record(
                Iteration(
                    step.number,
                    "simplify",
                    summary=summarize(proposal),
                    metrics={name: new_size},
                    accepted=smaller,
                    elapsed=run.now() - started,
                )
            )
            pair = (Iteration(0, metrics={name: size}), Iteration(1, metrics={name: new_size}))
            converged = self.detector.check(pair)
            if smaller:
                current, size = proposal, new_size
                run.keep("best", current)
                run.state["size"] = size
            if converged is not None and run.number < self.max_passes:
                return _Finish(
                    Status.COMPLETED,
                    converged.reason,
                    f"Stopped at diminishing returns after {run.number} of {self.max_passes} "
                    f"passes: {converged.message} {_change(name, first, size)}",
                    current,
                )
        failures = sum(1 for iteration in run.history if iteration.failed)
        status = Status.COMPLETED
        message = f"Made {run.number} of {self.max_passes} passes. {_change(name, first, size)}"
        if failures:
            status = Status.COMPLETED_WITH_WARNINGS
            message += f" {failures} of the passes failed; see the history."
        return _Finish(status, "iteration_limit", message, current)

    def _halt_note(self, run: _Run) -> str:
        return (
            f"Simplification stopped after {run.number} of {self.max_passes} passes; "
            "the best candidate is kept."
        )


def _size(error: BaseException | None, value: Any) -> float | str:
    """A finite size, or a string saying why there is none."""
    if error is not None:
        return f"measure raised {describe_error(error)}"
    if isinstance(value, bool) or not isinstance(value, int | float | Decimal):
        return f"measure returned {summarize(value, 60)}, not a number"
    number = float(value)
    if not math.isfinite(number):
        return f"measure returned {number}, not a finite number"
    return number


def _change(name: str, first: float, size: float) -> str:
    if size >= first:
        return f"{name} stays {size:g}."
    return f"{name} went from {first:g} to {size:g}."


def simplify(
    max_passes: int = 2,
    *,
    min_improvement: float = 0.05,
    min_size: float | None = None,
    metric: str = "size",
    ledger: Ledger | None = None,
    dump: Callable[[Any], Any] | None = None,
    load: Callable[[Any], Any] | None = None,
    step_limits: Limit | None = None,
) -> Simplify:
    """At most ``max_passes`` simplification passes, stopping when a pass improves the size by
    less than ``min_improvement``; candidates smaller than ``min_size`` are left alone."""
    if isinstance(max_passes, bool) or not isinstance(max_passes, int) or max_passes < 1:
        raise InvalidValueError("simplify(max_passes)", max_passes, "a positive integer")
    if min_size is not None and (
        isinstance(min_size, bool) or not isinstance(min_size, int | float) or min_size < 0
    ):
        raise InvalidValueError("simplify(min_size)", min_size, "a non-negative number, or None")
    if (
        isinstance(min_improvement, bool)
        or not isinstance(min_improvement, int | float)
        or not 0 <= min_improvement < 1
    ):
        raise InvalidValueError(
            "simplify(min_improvement)", min_improvement, "a fraction in [0, 1), e.g. 0.05"
        )
    if not isinstance(metric, str) or not metric:
        raise InvalidValueError("simplify(metric)", metric, "a name, e.g. 'lines'")
    parts = [repr(max_passes)]
    if min_improvement != 0.05:
        parts.append(f"min_improvement={min_improvement!r}")
    if min_size is not None:
        parts.append(f"min_size={min_size!r}")
    if metric != "size":
        parts.append(f"metric={metric!r}")
    if step_limits is not None:
        parts.append(f"step_limits={step_limits!r}")
    loop = Simplify(
        max_passes,
        min_improvement=min_improvement,
        min_size=min_size,
        metric=metric,
        ledger=ledger,
        dump=dump,
        load=load,
        step_limits=step_limits,
        args=", ".join(parts),
    )
    return loop
