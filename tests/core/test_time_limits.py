"""Time limits in the engine: when each event sees a deadline pass, and the fast path that
leaves plain time limits out of the checks until their deadline.

The governor checks a plain time limit (no soft threshold, not in shadow) only once the clock
reaches its deadline; a continue, an extend, a restore, a new run, a phase or ``set_limit``
moves the deadline. ``test_the_fast_path_decides_as_checking_every_event_does`` drives random
runs through two governors, one of them made to check every time limit at every event, and
requires the same decisions.
"""

from __future__ import annotations

import time
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from haltwise import (
    CONTINUE,
    Answer,
    Ask,
    Choice,
    Decision,
    Event,
    Governor,
    ModelRequest,
    ModelResponse,
    RunEnded,
    RunStarted,
    Status,
    Stop,
    ToolCall,
    ToolResult,
    TurnEnded,
    TurnStarting,
    Warn,
    max_tokens,
    max_tool_calls,
    max_turns,
    timeout,
)
from haltwise.engine.limits import Limit
from haltwise.testing import FakeClock


def started(limits: Limit, clock: FakeClock) -> Governor:
    governor = Governor(limits, clock=clock)
    assert governor.handle(RunStarted("task")) is CONTINUE
    return governor


def test_each_spending_event_sees_the_deadline_pass() -> None:
    before: list[Event] = [TurnStarting(), ModelRequest("m"), ToolCall("t"), RunEnded()]
    after: list[Event] = [ModelResponse("m", 10, 5), ToolResult("t", "ok")]
    for event in before + after:
        clock = FakeClock()
        governor = started(timeout(seconds=10), clock)
        clock.advance(9.9)
        assert governor.handle(TurnStarting()) is CONTINUE
        clock.advance(0.1)
        stop = governor.handle(event)
        assert isinstance(stop, Stop), event
        assert stop.outcome.status is Status.TIMED_OUT
        # Checked before it spends (refused, not sent) or after it returned (counted).
        assert stop.provider_called is (event in after)


def test_the_first_event_past_a_deadline_on_the_monotonic_clock_stops() -> None:
    """On the default clock, ``time.monotonic``, which the compiled dispatch reads in C: every
    event before the deadline goes on, on the fast path, and the first after it stops."""
    seconds = 0.5
    governor = Governor(max_turns(100) | max_tokens(10**9) | timeout(seconds=seconds))
    started = time.monotonic()
    assert governor.handle(RunStarted("task")) is CONTINUE
    for _ in range(5):
        for event in (
            TurnStarting(),
            ModelRequest("gpt-4o", max_tokens=100),
            ModelResponse("gpt-4o", 1_000, 50),
        ):
            decision = governor.handle(event)
            assert decision is CONTINUE or time.monotonic() - started >= seconds, decision
    while time.monotonic() - started <= seconds:
        time.sleep(0.01)
    stop = governor.handle(ModelRequest("gpt-4o", max_tokens=100))
    assert isinstance(stop, Stop)
    assert stop.outcome.status is Status.TIMED_OUT


def test_turn_ended_does_not_end_a_run_on_time() -> None:
    clock = FakeClock()
    governor = started(timeout(seconds=10), clock)
    clock.advance(11)
    assert governor.handle(TurnEnded()) is CONTINUE
    stop = governor.handle(TurnStarting())
    assert isinstance(stop, Stop)
    assert stop.outcome.reason == "time_limit"


def test_extending_a_time_limit_moves_its_deadline() -> None:
    clock = FakeClock()
    governor = started(timeout(seconds=10, on_limit="ask"), clock)
    clock.advance(10)
    ask = governor.handle(TurnStarting())
    assert isinstance(ask, Ask)
    assert governor.resolve(ask, Answer(Choice.EXTEND, 5)) is CONTINUE
    clock.advance(4.9)
    assert governor.handle(ModelRequest("m")) is CONTINUE
    assert governor.handle(ToolCall("t")) is CONTINUE
    clock.advance(0.1)
    assert isinstance(governor.handle(ToolResult("t")), Ask)


def test_continuing_a_time_limit_starts_a_new_round() -> None:
    clock = FakeClock()
    governor = started(timeout(seconds=10, on_limit="ask"), clock)
    clock.advance(12)
    ask = governor.handle(ModelRequest("m"))
    assert isinstance(ask, Ask)
    assert governor.resolve(ask, Choice.CONTINUE) is CONTINUE  # the request is admitted
    clock.advance(9.9)
    assert governor.handle(ModelResponse("m", 1, 1)) is CONTINUE
    clock.advance(0.1)
    assert isinstance(governor.handle(TurnStarting()), Ask)


def test_a_restored_run_whose_time_is_spent_stops_at_its_next_event() -> None:
    clock = FakeClock()
    first = started(timeout(seconds=10), clock)
    clock.advance(8)
    saved = first.checkpoint()
    later = Governor(timeout(seconds=10), clock=clock)
    later.restore(saved)
    assert later.handle(TurnStarting()) is CONTINUE
    clock.advance(2)
    stop = later.handle(TurnStarting())
    assert isinstance(stop, Stop)
    assert stop.outcome.status is Status.TIMED_OUT


def test_a_session_time_limit_spans_runs_and_refuses_the_next_one() -> None:
    clock = FakeClock()
    governor = started(timeout(seconds=10, scope="session"), clock)
    clock.advance(6)
    assert isinstance(governor.handle(RunEnded()), Stop)
    assert governor.handle(RunStarted("second")) is CONTINUE
    clock.advance(4)
    stop = governor.handle(RunStarted("third"))
    assert isinstance(stop, Stop)
    assert stop.outcome.reason == "time_limit"


def test_set_limit_moves_the_deadline_both_ways() -> None:
    clock = FakeClock()
    governor = started(timeout(seconds=10), clock)
    clock.advance(8)
    governor.set_limit(timeout(seconds=20))
    clock.advance(11)
    assert governor.handle(TurnStarting()) is CONTINUE
    governor.set_limit(timeout(seconds=15))
    stop = governor.handle(ToolCall("t"))
    assert isinstance(stop, Stop)
    assert stop.outcome.message.startswith("Time limit of 15.0s reached: 19.0s elapsed")


def test_a_phase_deadline_inside_the_runs() -> None:
    clock = FakeClock()
    governor = started(timeout(seconds=100), clock)
    clock.advance(50)
    phase = governor.enter_phase("plan", timeout(seconds=5))
    clock.advance(4)
    assert governor.handle(TurnStarting()) is CONTINUE
    governor.exit_phase(phase)
    clock.advance(10)  # past the phase's deadline, which has closed
    assert governor.handle(TurnStarting()) is CONTINUE
    governor.enter_phase("act", timeout(seconds=5))
    clock.advance(5)
    stop = governor.handle(ModelRequest("m"))
    assert isinstance(stop, Stop)
    assert stop.outcome.phase == "act"


def test_soft_thresholds_and_shadow_time_limits_still_see_every_event() -> None:
    clock = FakeClock()
    governor = started(timeout(seconds=10, warn_at=0.5), clock)
    clock.advance(5)
    note = governor.handle(ToolResult("t"))
    assert isinstance(note, Warn)
    assert "5.0s of 10.0s used" in note.message
    shadow = started(timeout(seconds=10, shadow=True), clock)
    clock.advance(10)
    assert shadow.handle(ToolCall("t")) is CONTINUE
    assert [trip.limit for trip in shadow.shadow_trips] == ["timeout(10, shadow=True)"]


def test_the_first_limit_written_is_reported_when_two_trip_at_once() -> None:
    clock = FakeClock()
    governor = started(max_turns(1) | timeout(seconds=10), clock)
    assert governor.handle(TurnStarting()) is CONTINUE
    clock.advance(10)
    stop = governor.handle(TurnStarting())
    assert isinstance(stop, Stop)
    assert stop.outcome.reason == "turn_limit"


# ------------------------------------------------------------------------------------------------
# The fast path against checking every event

_EVENTS: list[Event] = [
    TurnStarting(),
    ModelRequest("m", max_tokens=10),
    ModelResponse("m", 10, 5),
    ToolCall("t"),
    ToolResult("t", "ok"),
    TurnEnded(),
    RunEnded(),
    RunStarted("again"),
]

_ANSWERS: list[Answer | Choice | None] = [
    Choice.CONTINUE,
    Choice.ABORT,
    Answer(Choice.EXTEND, 3),
    None,
]


def _checking_every_event(governor: Governor) -> Governor:
    """``governor`` with its fast path off: every time limit is checked at every event."""
    governor._set_due = governor._time_is_up  # type: ignore[method-assign]
    governor._set_due()
    return governor


def _summary(decision: Decision) -> tuple[Any, ...]:
    if isinstance(decision, Stop):
        outcome = decision.outcome
        return ("stop", outcome.status, outcome.reason, outcome.message, outcome.usage)
    if isinstance(decision, Ask):
        return ("ask", decision.question, decision.limit)
    return (type(decision).__name__, getattr(decision, "message", None))


@settings(max_examples=150, deadline=None)
@given(
    steps=st.lists(
        st.tuples(
            st.sampled_from(range(len(_EVENTS))),
            st.sampled_from([0.0, 0.5, 2.0, 4.0]),
            st.sampled_from(range(len(_ANSWERS))),
        ),
        max_size=40,
    ),
    policy=st.sampled_from(["abort", "ask", "synthesize"]),
    session=st.booleans(),
)
def test_the_fast_path_decides_as_checking_every_event_does(
    steps: list[tuple[int, float, int]], policy: str, session: bool
) -> None:
    def limits() -> Limit:
        return (
            max_tool_calls(6)
            | timeout(seconds=7, on_limit=policy)
            | timeout(seconds=15, scope="session" if session else "run")
        )

    clocks = FakeClock(), FakeClock()
    fast = Governor(limits(), clock=clocks[0])
    reference = _checking_every_event(Governor(limits(), clock=clocks[1]))
    fast.handle(RunStarted("task"))
    reference.handle(RunStarted("task"))
    for index, seconds, answer in steps:
        for clock in clocks:
            clock.advance(seconds)
        decisions = []
        for governor in (fast, reference):
            pending = governor.pending
            if pending is not None:
                decisions.append(_summary(governor.resolve(pending, _ANSWERS[answer])))
            else:
                decisions.append(_summary(governor.handle(_EVENTS[index])))
        assert decisions[0] == decisions[1]
