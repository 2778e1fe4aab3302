"""Laws every bounded loop keeps, whatever its callbacks return or raise.

- it ends, within its bound: no callback is called more often than the bound allows;
- a callback that raises is a failed pass, recorded in the history, never a crash;
- it ends in an Outcome with a stable reason, and a checkpoint unless it plainly completed;
- the sync and async drivers carry out the same logic: the same script gives the same result;
- with a session time limit, it stops on time.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from haltwise import Governor, Status, timeout
from haltwise.loops import (
    Issue,
    LoopResult,
    Quote,
    Review,
    attempts,
    convergence,
    cost_gate,
    refine,
    simplify,
)
from haltwise.testing import FakeClock

LOOP_REASONS = {
    "completed",
    "attempts_exhausted",
    "iteration_limit",
    "converged.same_issues",
    "converged.no_improvement",
    "converged.same_estimate",
    "measure_failed",
    "cost_rejected",
    "no_acceptable_alternative",
}
SESSION_REASONS = {"time_limit", "cancelled"}

issue = st.builds(
    Issue,
    st.sampled_from(["a", "b", "god_object"]),
    st.sampled_from(["minor", "significant", "critical"]),
)
#: Anything a callback may give back: plain values, verdicts, nonsense.
values = st.one_of(
    st.integers(-5, 200),
    st.sampled_from(["draft", "", "v2", True, False, None, "1.50", "99"]),
    st.lists(st.one_of(st.sampled_from(["a", "b"]), issue), max_size=3),
    st.builds(
        Review,
        st.lists(issue, max_size=2),
        metrics=st.dictionaries(st.just("loc"), st.integers(0, 100), max_size=1),
        estimate=st.one_of(st.none(), st.integers(0, 5)),
    ),
    st.builds(object),
    st.floats(allow_nan=True, allow_infinity=True),
)
#: What one callback call does: return a value, or raise.
behaviour = st.one_of(
    st.tuples(st.just("return"), values),
    st.tuples(st.just("raise"), st.sampled_from([ValueError, RuntimeError, KeyError, TypeError])),
)
scripts = st.lists(st.tuples(behaviour, st.floats(0, 3)), max_size=40)


class Script:
    """Callbacks that follow a script; counts calls and raises per callback name."""

    def __init__(self, script: list[tuple[tuple[str, Any], float]], clock: FakeClock) -> None:
        self.script = list(script)
        self.clock = clock
        self.calls: dict[str, int] = {}
        self.raised = 0

    def act(self, name: str) -> Any:
        self.calls[name] = self.calls.get(name, 0) + 1
        if not self.script:
            return "draft"
        (kind, payload), seconds = self.script.pop(0)
        self.clock.advance(seconds)
        if kind == "raise":
            self.raised += 1
            raise payload(f"{name} failed")
        return payload

    def callback(self, name: str) -> Callable[..., Any]:
        def call(*args: Any) -> Any:
            return self.act(name)

        call.__name__ = name
        return call

    def acallback(self, name: str) -> Callable[..., Any]:
        async def call(*args: Any) -> Any:
            await asyncio.sleep(0)
            return self.act(name)

        call.__name__ = name
        return call


def check_ending(result: LoopResult[Any]) -> None:
    outcome = result.outcome
    assert outcome.reason in LOOP_REASONS | SESSION_REASONS
    assert outcome.message
    if outcome.status is not Status.COMPLETED:
        assert outcome.checkpoint is not None
        assert outcome.suggestions[-1] == f"Resume from checkpoint {outcome.checkpoint}"
    numbers = [iteration.number for iteration in result.history]
    assert numbers == sorted(numbers)


def errors(result: LoopResult[Any]) -> int:
    return sum(1 for iteration in result.history if iteration.error is not None)


@settings(max_examples=150, deadline=None)
@given(n=st.integers(1, 6), script=scripts, judged=st.booleans(), stuck=st.booleans())
def test_attempts_end_within_their_bound(
    n: int, script: list[Any], judged: bool, stuck: bool
) -> None:
    calls = Script(script, FakeClock())
    loop = attempts(
        n,
        accept=calls.callback("accept") if judged else None,
        converge=convergence(same_issues=2) if stuck else None,
    )
    result = loop.run(calls.callback("attempt"), clock=calls.clock)

    check_ending(result)
    assert calls.calls["attempt"] <= n
    assert calls.calls.get("accept", 0) <= calls.calls["attempt"]
    assert result.iterations == calls.calls["attempt"]  # every attempt is recorded
    assert errors(result) >= calls.raised  # every raise is a failed attempt
    assert result.ok == (result.reason == "completed")


@settings(max_examples=150, deadline=None)
@given(n=st.integers(1, 5), script=scripts, tested=st.booleans(), stuck=st.booleans())
def test_refine_ends_within_its_bound_and_still_returns(
    n: int, script: list[Any], tested: bool, stuck: bool
) -> None:
    calls = Script(script, FakeClock())
    loop = refine(n, converge=convergence() if stuck else None)
    result = loop.run(
        calls.callback("build"),
        calls.callback("review"),
        calls.callback("fix"),
        test=calls.callback("test") if tested else None,
        clock=calls.clock,
    )

    check_ending(result)
    assert result.iterations <= n
    for name in ("build", "test", "review"):
        assert calls.calls.get(name, 0) <= n
    assert calls.calls.get("fix", 0) <= n - 1
    assert errors(result) >= calls.raised
    if result.status is Status.COMPLETED_WITH_WARNINGS:
        # The best effort: returned rather than failed, and it is something that was built.
        assert result.reason == "iteration_limit" or result.reason.startswith("converged.")
        assert calls.calls["build"] > sum(
            1 for iteration in result.history if iteration.label == "build"
        )
    if result.status is Status.ABANDONED:
        assert all(iteration.label == "build" for iteration in result.history)


@settings(max_examples=100, deadline=None)
@given(n=st.integers(1, 4), script=scripts, min_size=st.one_of(st.none(), st.integers(0, 50)))
def test_simplify_ends_within_its_bound(n: int, script: list[Any], min_size: int | None) -> None:
    calls = Script(script, FakeClock())
    result = simplify(n, min_size=min_size).run(
        "start", calls.callback("simplify"), calls.callback("measure"), clock=calls.clock
    )

    check_ending(result)
    assert result.ok  # simplifying never abandons the work
    assert calls.calls.get("simplify", 0) <= n
    assert calls.calls.get("measure", 0) <= n + 1
    assert errors(result) >= calls.raised - (1 if result.reason == "measure_failed" else 0)


@settings(max_examples=100, deadline=None)
@given(
    script=scripts,
    alternatives=st.integers(0, 6),
    cap=st.integers(0, 3),
    human=st.booleans(),
)
def test_the_cost_gate_ends_within_its_bound(
    script: list[Any], alternatives: int, cap: int, human: bool
) -> None:
    calls = Script(script, FakeClock())
    gate = cost_gate("1", "10", max_alternatives=cap)
    proposals = [calls.callback(f"alternative_{k}") for k in range(alternatives)]
    result = gate.run(
        "work",
        calls.callback("estimate"),
        alternatives=proposals,
        decide=calls.callback("decide") if human else None,
        clock=calls.clock,
    )

    check_ending(result)
    assert result.ok == (result.reason == "completed")
    tried = sum(count for name, count in calls.calls.items() if name.startswith("alternative"))
    assert tried <= min(cap, alternatives)
    assert calls.calls.get("estimate", 0) <= 1 + tried
    assert calls.calls.get("decide", 0) <= 2


@settings(max_examples=75, deadline=None)
@given(n=st.integers(1, 5), script=scripts, limit=st.floats(0.5, 10))
def test_a_session_time_limit_stops_any_loop_on_time(
    n: int, script: list[Any], limit: float
) -> None:
    calls = Script(script, FakeClock())
    session = Governor(timeout(limit, scope="session"), clock=calls.clock)
    result = refine(n).run(
        calls.callback("build"), calls.callback("review"), calls.callback("fix"), governor=session
    )

    check_ending(result)
    assert result.iterations <= n
    if result.reason == "time_limit":
        assert result.status is Status.TIMED_OUT
        assert result.outcome.usage.elapsed >= limit
    # No pass starts once the time is up.
    started = 0.0
    for iteration in result.history:
        assert started < limit or iteration is result.history[-1]
        started += iteration.elapsed


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 4), script=scripts)
def test_sync_and_async_drivers_give_the_same_result(n: int, script: list[Any]) -> None:
    def outcome_of(result: LoopResult[Any]) -> tuple[Any, ...]:
        return (
            result.status,
            result.reason,
            result.tried,
            result.outcome.message.split(" Resume")[0],
        )

    sync_calls = Script(script, FakeClock())
    sync = refine(n).run(
        sync_calls.callback("build"),
        sync_calls.callback("review"),
        sync_calls.callback("fix"),
        test=sync_calls.callback("test"),
        clock=sync_calls.clock,
    )
    async_calls = Script(script, FakeClock())
    asynchronous = asyncio.run(
        refine(n).arun(
            async_calls.acallback("build"),
            async_calls.acallback("review"),
            async_calls.acallback("fix"),
            test=async_calls.acallback("test"),
            clock=async_calls.clock,
        )
    )

    assert outcome_of(sync) == outcome_of(asynchronous)
    assert sync_calls.calls == async_calls.calls


@settings(max_examples=60, deadline=None)
@given(choice=st.one_of(st.integers(-2, 4), st.booleans(), st.none(), st.text(max_size=3)))
def test_whatever_the_human_answers_the_gate_ends(choice: Any) -> None:
    def decide(quotes: tuple[Quote[str], ...]) -> Any:
        return choice

    result = cost_gate("1", "10").run(
        "work",
        lambda work: {"work": Decimal(20), "smaller": Decimal(5)}.get(work, Decimal(3)),
        alternatives=[lambda work: "smaller", lambda work: "other"],
        decide=decide,
    )
    check_ending(result)
    assert result.ok == (result.value is not None)
