"""``attempts(n)``: a bounded retry with degradation.

Each attempt sees every earlier one (``step.history``: what it produced, what was wrong with it,
what it raised), so it can degrade: add constraints, simplify, switch approach. An attempt that
raises is a failed attempt, recorded, never a crash. After ``n`` attempts with none accepted the
loop abandons (``attempts_exhausted``), listing what was tried, with a checkpoint.

::

    spec = attempts(3, accept=is_spec_complete).run(generate_spec, governor=session)
    if not spec.ok:
        print(spec.outcome.message, spec.tried)
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, overload

from ..drivers.prompters import Prompter
from ..engine.errors import InvalidValueError
from ..engine.governor import Governor
from ..engine.ledger import Ledger
from ..engine.limits import Limit
from ..engine.outcome import Status
from ._flow import BoundedLoop, Logic, Step, _Finish, _Run, adrive, describe_error, drive
from .convergence import Convergence
from .records import Iteration, LoopResult, as_review, issue_list, summarize, tried_list

__all__ = ["Attempts", "attempts"]

T = TypeVar("T")
#: A judge: returns a Review, a bool, None, a string or an iterable of issues (see as_review).
Judge = Callable[[Any], Any]


class Attempts(BoundedLoop):
    """At most ``n`` attempts; the first accepted one wins. Build it with ``attempts()``."""

    kind = "attempts"
    keeps_best_effort = False

    def __init__(
        self,
        n: int,
        *,
        accept: Judge | None,
        converge: Convergence | None,
        ledger: Ledger | None,
        dump: Callable[[Any], Any] | None,
        load: Callable[[Any], Any] | None,
        step_limits: Limit | None,
        args: str,
    ) -> None:
        super().__init__(ledger=ledger, dump=dump, load=load, step_limits=step_limits, args=args)
        #: The most attempts made.
        self.n = n
        #: Judges each attempt's value; None accepts whatever an attempt returns.
        self.accept = accept
        #: Stops early when attempts stop making progress (None: never early).
        self.converge = converge

    def run(
        self,
        attempt: Callable[[Step], T],
        *,
        governor: Governor | None = None,
        clock: Callable[[], float] | None = None,
        prompter: Prompter | None = None,
    ) -> LoopResult[T]:
        """Call ``attempt(step)`` until a value is accepted, at most ``n`` times."""
        return drive(self._start((attempt,), governor, clock, prompter, None))

    @overload
    async def arun(
        self,
        attempt: Callable[[Step], Awaitable[T]],
        *,
        governor: Governor | None = None,
        clock: Callable[[], float] | None = None,
        prompter: Prompter | None = None,
    ) -> LoopResult[T]: ...

    @overload
    async def arun(
        self,
        attempt: Callable[[Step], T],
        *,
        governor: Governor | None = None,
        clock: Callable[[], float] | None = None,
        prompter: Prompter | None = None,
    ) -> LoopResult[T]: ...

    async def arun(
        self,
        attempt: Callable[[Step], Any],
        *,
        governor: Governor | None = None,
        clock: Callable[[], float] | None = None,
        prompter: Prompter | None = None,
    ) -> LoopResult[Any]:
        """``run``, awaiting ``attempt`` (and ``accept``) when they are async."""
        return await adrive(self._start((attempt,), governor, clock, prompter, None))

    def resume(
        self,
        checkpoint: str,
        attempt: Callable[[Step], T],
        *,
        governor: Governor | None = None,
        clock: Callable[[], float] | None = None,
        prompter: Prompter | None = None,
    ) -> LoopResult[T]:
        """Go on from a checkpoint: earlier attempts count against ``n`` and stay visible."""
        return drive(self._start((attempt,), governor, clock, prompter, checkpoint))

    @overload
    async def aresume(
        self,
        checkpoint: str,
        attempt: Callable[[Step], Awaitable[T]],
        *,
        governor: Governor | None = None,
        clock: Callable[[], float] | None = None,
        prompter: Prompter | None = None,
    ) -> LoopResult[T]: ...

    @overload
    async def aresume(
        self,
        checkpoint: str,
        attempt: Callable[[Step], T],
        *,
        governor: Governor | None = None,
        clock: Callable[[], float] | None = None,
        prompter: Prompter | None = None,
    ) -> LoopResult[T]: ...

    async def aresume(
        self,
        checkpoint: str,
        attempt: Callable[[Step], Any],
        *,
        governor: Governor | None = None,
        clock: Callable[[], float] | None = None,
        prompter: Prompter | None = None,
    ) -> LoopResult[Any]:
        """``resume``, awaiting the callbacks that are async."""
        return await adrive(self._start((attempt,), governor, clock, prompter, checkpoint))

    def _logic(self, run: _Run, callbacks: tuple[Any, ...]) -> Logic:
        (attempt,) = callbacks
        while run.number < self.n:
            step = yield from run.next_step(self.n)
            started = run.now()
            reply = yield from run.call(attempt, step)
            if reply.error is not None:
                run.record(
                    Iteration(
                        step.number,
                        "attempt",
                        error=describe_error(reply.error),
                        elapsed=run.now() - started,
                    )
                )
            else:
                value = reply.value
                summary = summarize(value)
                error = None
                review = as_review(None)
                if self.accept is not None:
                    run.unjudged(step.number, "attempt", value, started)
                    judged = yield from run.call(self.accept, value)
                    if judged.error is not None:
                        error = f"accept raised {describe_error(judged.error)}"
                    else:
                        try:
                            review = as_review(judged.value)
                        except InvalidValueError as invalid:
                            error = f"accept returned {invalid.value!r}, which is not a verdict"
                accepted = error is None and review.accepted
                run.record(
                    Iteration(
                        step.number,
                        "attempt",
                        summary=summary,
                        issues=review.issues,
                        metrics={**review.metrics, "issues": float(len(review.issues))},
                        estimate=review.estimate,
                        error=error,
                        accepted=accepted,
                        elapsed=run.now() - started,
                    )
                )
                if accepted:
                    return _Finish(
                        Status.COMPLETED,
                        "completed",
                        f"Attempt {step.number} of {self.n} was accepted.",
                        value,
                    )
                run.keep("last", value)
            if self.converge is not None and run.number < self.n:
                converged = self.converge.check(run.history)
                if converged is not None:
                    return _Finish(
                        Status.ABANDONED,
                        converged.reason,
                        f"Gave up after {run.number} of {self.n} attempts: {converged.message}",
                        None,
                        _suggestions(self),
                        partial=run.history[-1].summary,
                    )
        last = run.history[-1] if run.history else None
        return _Finish(
            Status.ABANDONED,
            "attempts_exhausted",
            f"Gave up after {run.number} of {self.n} attempts: none was accepted. "
            f"Tried: {tried_list(run.history)}.",
            None,
            _suggestions(self, last),
            partial=None if last is None else last.summary,
        )

    def _halt_note(self, run: _Run) -> str:
        return f"Stopped after {run.number} of {self.n} attempts; what was tried is kept."


def _suggestions(loop: Attempts, last: Iteration | None = None) -> tuple[str, ...]:
    hints = []
    if last is not None and last.issues:
        hints.append(f"Address what the last attempt lacked: {issue_list(last.issues)}")
    hints += [
        "Rephrase the request more specifically, or give more context",
        f"Allow more attempts than {loop.n} (attempts(n))",
    ]
    return tuple(hints)


def attempts(
    n: int,
    *,
    accept: Judge | None = None,
    converge: Convergence | None = None,
    ledger: Ledger | None = None,
    dump: Callable[[Any], Any] | None = None,
    load: Callable[[Any], Any] | None = None,
    step_limits: Limit | None = None,
) -> Attempts:
    """At most ``n`` attempts, each seeing what went before; the first accepted value wins.

    ``accept(value)`` judges each value: ``True``/``None`` accepts; ``False``, a string saying
    what is wrong, or a list of issues rejects (see ``as_review``); without it every value that
    is returned (not raised) is accepted. ``converge`` (e.g. ``convergence()``) gives up early
    when the same problem keeps coming back. ``ledger`` keeps checkpoints; ``dump``/``load``
    turn values into JSON-compatible data and back (by default a value is stored when it
    already is JSON-compatible). ``step_limits`` are limits of each attempt's own
    ``step.governor``, inside the loop's.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise InvalidValueError("attempts(n)", n, "a positive integer, e.g. attempts(3)")
    if accept is not None and not callable(accept):
        raise InvalidValueError("attempts(accept)", accept, "a callable value -> verdict, or None")
    if converge is not None and not isinstance(converge, Convergence):
        raise InvalidValueError("attempts(converge)", converge, "convergence(...) or None")
    parts = [repr(n)]
    if accept is not None:
        parts.append(f"accept={getattr(accept, '__name__', repr(accept))}")
    if converge is not None:
        parts.append(f"converge={converge!r}")
    if step_limits is not None:
        parts.append(f"step_limits={step_limits!r}")
    return Attempts(
        n,
        accept=accept,
        converge=converge,
        ledger=ledger,
        dump=dump,
        load=load,
        step_limits=step_limits,
        args=", ".join(parts),
    )
