"""``refine(n)``: build, then test, review and fix, at most ``n`` times, then return anyway.

Each iteration judges the current candidate: the tests first (a failing test blocks at every
strictness), then the review. The review's strictness decays over the iterations (by default
everything on the first, significant issues on the second, critical ones only after that), so a
critic that always finds something cannot hold the work forever. A candidate with no blocking
issue is accepted (``completed``); otherwise it is fixed and judged again. After the last
iteration the loop returns its best effort (the candidate with the fewest failing tests, then
critical, significant and minor issues) as ``completed_with_warnings``, listing what is left:
it does not fail. The convergence detector ends it early, with the same best effort, when the
same issues keep coming back.

::

    result = refine(3).run(build, review, fix, test=run_tests, governor=session)
    result.value      # the accepted candidate, or the best effort
    result.outcome    # completed | completed_with_warnings (iteration_limit, converged.*) | ...
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar, overload

from ..drivers.prompters import Prompter
from ..engine.errors import InvalidValueError
from ..engine.governor import Governor
from ..engine.ledger import Ledger
from ..engine.limits import Limit
from ..engine.outcome import Status
from ._flow import _MISSING, BoundedLoop, Logic, Step, _Finish, _Run, adrive, describe_error, drive
from .convergence import Convergence, convergence
from .records import (
    STRICTNESS_LEVELS,
    Issue,
    Iteration,
    LoopResult,
    Strictness,
    as_review,
    issue_list,
    most_severe_first,
    summarize,
)

__all__ = ["DEFAULT_STRICTNESS", "Refine", "refine"]

T = TypeVar("T")
#: Everything on the first iteration, significant issues on the second, critical ones after.
DEFAULT_STRICTNESS: tuple[Strictness, ...] = ("all", "significant", "critical")
_DEFAULT_CONVERGENCE = convergence()


class Refine(BoundedLoop):
    """Build, then test, review and fix at most ``max_iterations`` times. See ``refine()``."""

    kind = "refine"

    def __init__(
        self,
        max_iterations: int,
        *,
        strictness: tuple[Strictness, ...],
        max_issues: int | None,
        converge: Convergence | None,
        ledger: Ledger | None,
        dump: Callable[[Any], Any] | None,
        load: Callable[[Any], Any] | None,
        step_limits: Limit | None,
        args: str,
    ) -> None:
        super().__init__(ledger=ledger, dump=dump, load=load, step_limits=step_limits, args=args)
        #: The most iterations (each judges one candidate).
        self.max_iterations = max_iterations
        #: The strictness of each iteration, in order; the last one holds from then on.
        self.strictness = strictness
        #: The most issues kept from one review, most severe first (None: all).
        self.max_issues = max_issues
        #: Ends the loop early when it stops making progress (None: never early).
        self.converge = converge

    def strictness_at(self, number: int) -> Strictness:
        """The strictness of iteration ``number`` (1 for the first)."""
        return self.strictness[min(number, len(self.strictness)) - 1]

    def run(
        self,
        build: Callable[[Step], T],
        review: Callable[[T, Step], Any],
        fix: Callable[[T, tuple[Issue, ...], Step], T],
        *,
        test: Callable[[T, Step], Any] | None = None,
        governor: Governor | None = None,
        clock: Callable[[], float] | None = None,
        prompter: Prompter | None = None,
    ) -> LoopResult[T]:
        """Refine what ``build(step)`` makes.

        ``test(candidate, step)`` returns the failing tests (an empty list, ``True`` or
        ``None`` when all pass); ``review(candidate, step)`` returns the issues (a list of
        strings or ``Issue``, or a ``Review`` with metrics) and should look at
        ``step.strictness``; ``fix(candidate, issues, step)`` returns the next candidate.
        """
        return drive(self._start((build, review, fix, test), governor, clock, prompter, None))

    @overload
    async def arun(
        self,
        build: Callable[[Step], Awaitable[T]],
        review: Callable[[T, Step], Any],
        fix: Callable[[T, tuple[Issue, ...], Step], Any],
        *,
        test: Callable[[T, Step], Any] | None = None,
        governor: Governor | None = None,
        clock: Callable[[], float] | None = None,
        prompter: Prompter | None = None,
    ) -> LoopResult[T]: ...

    @overload
    async def arun(
        self,
        build: Callable[[Step], T],
        review: Callable[[T, Step], Any],
        fix: Callable[[T, tuple[Issue, ...], Step], Any],
        *,
        test: Callable[[T, Step], Any] | None = None,
        governor: Governor | None = None,
        clock: Callable[[], float] | None = None,
        prompter: Prompter | None = None,
    ) -> LoopResult[T]: ...

    async def arun(
        self,
        build: Callable[[Step], Any],
        review: Callable[[T, Step], Any],
        fix: Callable[[T, tuple[Issue, ...], Step], Any],
        *,
        test: Callable[[T, Step], Any] | None = None,
        governor: Governor | None = None,
        clock: Callable[[], float] | None = None,
        prompter: Prompter | None = None,
    ) -> LoopResult[Any]:
        """``run``, awaiting the callbacks that are async (``fix`` may return an awaitable)."""
        flow = self._start((build, review, fix, test), governor, clock, prompter, None)
        return await adrive(flow)

    def resume(
        self,
        checkpoint: str,
        build: Callable[[Step], T],
        review: Callable[[T, Step], Any],
        fix: Callable[[T, tuple[Issue, ...], Step], T],
        *,
        test: Callable[[T, Step], Any] | None = None,
        governor: Governor | None = None,
        clock: Callable[[], float] | None = None,
        prompter: Prompter | None = None,
    ) -> LoopResult[T]:
        """Go on from a checkpoint with its candidate (rebuilt if it could not be stored)."""
        flow = self._start((build, review, fix, test), governor, clock, prompter, checkpoint)
        return drive(flow)

    @overload
    async def aresume(
        self,
        checkpoint: str,
        build: Callable[[Step], Awaitable[T]],
        review: Callable[[T, Step], Any],
        fix: Callable[[T, tuple[Issue, ...], Step], Any],
        *,
        test: Callable[[T, Step], Any] | None = None,
        governor: Governor | None = None,
        clock: Callable[[], float] | None = None,
        prompter: Prompter | None = None,
    ) -> LoopResult[T]: ...

    @overload
    async def aresume(
        self,
        checkpoint: str,
        build: Callable[[Step], T],
        review: Callable[[T, Step], Any],
        fix: Callable[[T, tuple[Issue, ...], Step], Any],
        *,
        test: Callable[[T, Step], Any] | None = None,
        governor: Governor | None = None,
        clock: Callable[[], float] | None = None,
        prompter: Prompter | None = None,
    ) -> LoopResult[T]: ...

    async def aresume(
        self,
        checkpoint: str,
        build: Callable[[Step], Any],
        review: Callable[[T, Step], Any],
        fix: Callable[[T, tuple[Issue, ...], Step], Any],
        *,
        test: Callable[[T, Step], Any] | None = None,
        governor: Governor | None = None,
        clock: Callable[[], float] | None = None,
        prompter: Prompter | None = None,
    ) -> LoopResult[Any]:
        """``resume``, awaiting the callbacks that are async."""
        flow = self._start((build, review, fix, test), governor, clock, prompter, checkpoint)
        return await adrive(flow)

    # -- the logic, written once -------------------------------------------------------------

    def _logic(self, run: _Run, callbacks: tuple[Any, ...]) -> Logic:
        build, review, fix, test = callbacks
        limit = self.max_iterations
        candidate = run.restored("candidate")
        if candidate is not _MISSING:
            run.keep("candidate", candidate)
        best = run.restored("best")
        if best is not _MISSING and "best_score" in run.state:
            run.keep("best", best)
        else:
            run.state.pop("best_score", None)
        if run.state.get("unfixed") and candidate is not _MISSING and run.history:
            # Resumed after the bound: the candidate was judged and not fixed yet. Fix it now
            # rather than judge it again (which would also look like "the same issues again").
            judged = run.history[-1]
            left = tuple(issue for issue in judged.issues if issue.blocks(judged.strictness))
            step = yield from run.next_step(limit, judged.strictness, number=judged.number)
            reply = yield from run.call(fix, candidate, left, step)
            del run.state["unfixed"]
            if reply.error is not None:
                error = f"fix raised {describe_error(reply.error)}"
                run.history[-1] = dataclasses.replace(judged, error=error)
            else:
                candidate = reply.value
                run.keep("candidate", candidate)
        run.state.pop("unfixed", None)
        while run.number < limit:
            step = yield from run.next_step(limit, self.strictness_at(run.number + 1))
            started = run.now()

            origin = "fix"
            if candidate is _MISSING:
                origin = "build"
                reply = yield from run.call(build, step)
                if reply.error is not None:
                    stop = self._failed(run, step, started, "build", describe_error(reply.error))
                    if stop is not None:
                        return stop
                    continue
                candidate = reply.value
                run.keep("candidate", candidate)
            summary = summarize(candidate)
            run.unjudged(step.number, origin, candidate, started)

            failures: tuple[Issue, ...] = ()
            if test is not None:
                reply = yield from run.call(test, candidate, step)
                verdict = _judged("test", reply.error, reply.value)
                if isinstance(verdict, str):
                    stop = self._failed(run, step, started, "test", verdict, summary)
                    if stop is not None:
                        return stop
                    continue
                failures = tuple(Issue(issue.text, "critical") for issue in verdict.issues)

            metrics: dict[str, float] = {}
            if failures:
                label, issues, estimate = "test", failures, None
                blocking: Sequence[Issue] = failures
            else:
                reply = yield from run.call(review, candidate, step)
                verdict = _judged("review", reply.error, reply.value)
                if isinstance(verdict, str):
                    stop = self._failed(run, step, started, "review", verdict, summary)
                    if stop is not None:
                        return stop
                    continue
                label, estimate = "review", verdict.estimate
                issues = most_severe_first(verdict.issues, self.max_issues)
                metrics.update(verdict.metrics)
                blocking = [issue for issue in issues if issue.blocks(step.strictness)]
            if test is not None:
                metrics["failing_tests"] = float(len(failures))
            metrics["issues"] = float(len(issues))
            iteration = run.record(
                Iteration(
                    step.number,
                    label,
                    summary=summary,
                    issues=issues,
                    metrics=metrics,
                    estimate=estimate,
                    accepted=not blocking,
                    strictness=step.strictness,
                    elapsed=run.now() - started,
                )
            )
            score = _score(failures, issues)
            if "best_score" not in run.state or score <= run.state["best_score"]:
                run.keep("best", candidate)
                run.state["best_score"] = score
                run.state["best_iteration"] = step.number
            if not blocking:
                return self._accepted(step, issues, candidate)
            # Until it is fixed, a resume fixes this candidate rather than judge it again.
            run.state["unfixed"] = True
            if run.number >= limit:
                break
            stop = self._converged(run)
            if stop is not None:
                return stop
            reply = yield from run.call(fix, candidate, tuple(blocking), step)
            del run.state["unfixed"]
            if reply.error is not None:
                # The fix failed: judge the same candidate again next time.
                error = f"fix raised {describe_error(reply.error)}"
                run.history[-1] = dataclasses.replace(iteration, error=error)
            else:
                candidate = reply.value
                run.keep("candidate", candidate)
        return self._exhausted(run)

    def _failed(
        self,
        run: _Run,
        step: Step,
        started: float,
        label: str,
        error: str,
        summary: str | None = None,
    ) -> _Finish | None:
        """Record a pass in which a callback failed; the convergence detector's verdict."""
        run.record(
            Iteration(
                step.number,
                label,
                summary=summary,
                error=error,
                strictness=step.strictness,
                elapsed=run.now() - started,
            )
        )
        return self._converged(run)

    def _accepted(self, step: Step, issues: Sequence[Issue], candidate: Any) -> _Finish:
        message = (
            f"Accepted at iteration {step.number} of {self.max_iterations} "
            f"(strictness {step.strictness!r})"
        )
        if issues:
            lesser = "issue" if len(issues) == 1 else "issues"
            message += f", with {len(issues)} lesser {lesser} left: {issue_list(issues)}"
        return _Finish(Status.COMPLETED, "completed", message + ".", candidate)

    def _converged(self, run: _Run) -> _Finish | None:
        if self.converge is None or run.number >= self.max_iterations:
            return None
        converged = self.converge.check(run.history)
        if converged is None:
            return None
        value = _best(run)
        where = f"after {run.number} of {self.max_iterations} iterations"
        if value is _MISSING:
            return _Finish(
                Status.ABANDONED,
                converged.reason,
                f"Stopped {where}, with nothing built: {converged.message}",
                None,
                _suggestions(run, stuck=True),
                partial=run.history[-1].summary,
            )
        return _Finish(
            Status.COMPLETED_WITH_WARNINGS,
            converged.reason,
            f"Stopped {where}: {converged.message} Returning the best effort{_from(run)}.",
            value,
            _suggestions(run, stuck=True),
        )

    def _exhausted(self, run: _Run) -> _Finish:
        value = _best(run)
        done = f"{run.number} of {self.max_iterations} iterations"
        if value is _MISSING:
            last = run.history[-1].error if run.history else None
            return _Finish(
                Status.ABANDONED,
                "iteration_limit",
                f"Stopped after {done} with nothing built"
                + (f": the last try raised {last}." if last else "."),
                None,
                _suggestions(run),
            )
        left = _left(run)
        message = f"Stopped after {done}"
        message += f" with {left}" if left else ", never judged"
        message += f"; returning the best effort{_from(run)}."
        return _Finish(
            Status.COMPLETED_WITH_WARNINGS, "iteration_limit", message, value, _suggestions(run)
        )

    def _best_effort(self, run: _Run) -> Any:
        best = _best(run)
        return None if best is _MISSING else best

    def _halt_note(self, run: _Run) -> str:
        return (
            f"The refine loop stopped after {run.number} of {self.max_iterations} iterations; "
            "its best effort is kept."
        )


def _best(run: _Run) -> Any:
    """The best judged candidate, else the latest one, else ``_MISSING`` (None is a value)."""
    best = run.kept("best", _MISSING)
    return run.kept("candidate", _MISSING) if best is _MISSING else best


def _judged(what: str, error: BaseException | None, value: Any) -> Any:
    """The callback's verdict as a Review, or a string saying why there is none."""
    if error is not None:
        return f"{what} raised {describe_error(error)}"
    if value is False and what == "test":
        value = "the tests failed"
    try:
        return as_review(value)
    except InvalidValueError:
        return f"{what} returned {summarize(value, 60)}, which is not a verdict"


def _score(failures: Sequence[Issue], issues: Sequence[Issue]) -> list[int]:
    """Lower is better: failing tests, then critical, significant and minor issues."""
    if failures:
        return [len(failures), 0, 0, 0]
    counts = {"critical": 0, "significant": 0, "minor": 0}
    for issue in issues:
        counts[issue.severity] += 1
    return [0, counts["critical"], counts["significant"], counts["minor"]]


def _best_iteration(run: _Run) -> Iteration | None:
    number = run.state.get("best_iteration")
    for iteration in run.history:
        if iteration.number == number:
            return iteration
    return None


def _from(run: _Run) -> str:
    best = _best_iteration(run)
    return "" if best is None else f" (from iteration {best.number})"


def _left(run: _Run) -> str:
    best = _best_iteration(run)
    if best is None or not best.issues:
        return ""
    noun = "failing test" if best.label == "test" else "issue"
    count = len(best.issues)
    return f"{count} {noun}{'' if count == 1 else 's'} left: {issue_list(best.issues)}"


def _suggestions(run: _Run, *, stuck: bool = False) -> tuple[str, ...]:
    hints = []
    best = _best_iteration(run)
    if best is not None and best.issues:
        hints.append(f"Fix what is left by hand: {issue_list(best.issues)}")
    if stuck:
        hints += [
            "Change the approach: the fixes are not moving the review",
            "Break the task into smaller subtasks",
        ]
    else:
        hints.append("Allow more iterations (refine(n)), or resume from the checkpoint")
    return tuple(hints)


def refine(
    max_iterations: int = 3,
    *,
    strictness: Sequence[Strictness] = DEFAULT_STRICTNESS,
    max_issues: int | None = 10,
    converge: Convergence | None = _DEFAULT_CONVERGENCE,
    ledger: Ledger | None = None,
    dump: Callable[[Any], Any] | None = None,
    load: Callable[[Any], Any] | None = None,
    step_limits: Limit | None = None,
) -> Refine:
    """A build, test, review and fix loop of at most ``max_iterations`` iterations.

    ``strictness`` is the review's schedule, one level per iteration, the last repeating:
    ``all`` (every issue blocks), ``significant`` (minor ones do not), ``critical``.
    ``max_issues`` keeps the most severe issues of a review (a critic may not report 100).
    ``converge`` ends it early when it stops making progress (``None``: never early).
    """
    if (
        isinstance(max_iterations, bool)
        or not isinstance(max_iterations, int)
        or max_iterations < 1
    ):
        raise InvalidValueError(
            "refine(max_iterations)", max_iterations, "a positive integer, e.g. refine(3)"
        )
    schedule: tuple[Strictness, ...] = (
        (strictness,) if isinstance(strictness, str) else tuple(strictness)  # type: ignore[assignment]
    )
    if not schedule or any(level not in STRICTNESS_LEVELS for level in schedule):
        raise InvalidValueError(
            "refine(strictness)",
            strictness,
            "a sequence of 'all', 'significant' and 'critical', e.g. ('all', 'critical')",
        )
    if max_issues is not None and (
        isinstance(max_issues, bool) or not isinstance(max_issues, int) or max_issues < 1
    ):
        raise InvalidValueError("refine(max_issues)", max_issues, "a positive integer, or None")
    if converge is not None and not isinstance(converge, Convergence):
        raise InvalidValueError("refine(converge)", converge, "convergence(...) or None")
    parts = [repr(max_iterations)]
    if schedule != DEFAULT_STRICTNESS:
        parts.append(f"strictness={schedule!r}")
    if max_issues != 10:
        parts.append(f"max_issues={max_issues!r}")
    if converge != _DEFAULT_CONVERGENCE:
        parts.append(f"converge={converge!r}")
    if step_limits is not None:
        parts.append(f"step_limits={step_limits!r}")
    return Refine(
        max_iterations,
        strictness=schedule,
        max_issues=max_issues,
        converge=converge,
        ledger=ledger,
        dump=dump,
        load=load,
        step_limits=step_limits,
        args=", ".join(parts),
    )
