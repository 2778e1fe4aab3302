"""Laws of the limit algebra, as properties."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from haltwise import (
    CONTINUE,
    UNLIMITED,
    Governor,
    ModelRequest,
    RunStarted,
    Stop,
    ToolCall,
    TurnStarting,
    Warn,
    all_of,
    any_of,
    max_model_calls,
    max_tool_calls,
    max_turns,
)
from haltwise.engine.events import Event
from haltwise.engine.limits import Limit
from haltwise.testing import FakeClock

counts = st.integers(min_value=0, max_value=8)
events = st.lists(st.sampled_from([TurnStarting(), ModelRequest("m"), ToolCall("t")]), max_size=40)
leaves = (
    st.builds(max_turns, counts)
    | st.builds(max_model_calls, counts)
    | st.builds(max_tool_calls, counts)
)


def replay(limit: Limit, stream: list[Event]) -> tuple[int | None, Governor]:
    """Where a governor with ``limit`` stops ``stream`` (None: it never does), and the governor."""
    governor = Governor(limit, clock=FakeClock())
    governor.handle(RunStarted())
    for index, event in enumerate(stream):
        if isinstance(governor.handle(event), Stop):
            return index, governor
    return None, governor


def stop_index(limit: Limit, stream: list[Event]) -> int | None:
    return replay(limit, stream)[0]


@given(leaves, leaves, events)
def test_or_trips_at_the_first_trip_of_either(a: Limit, b: Limit, stream: list[Event]) -> None:
    stops = [i for i in (stop_index(a, stream), stop_index(b, stream)) if i is not None]
    assert stop_index(a | b, stream) == (min(stops) if stops else None)


@given(leaves, leaves, events)
def test_and_trips_iff_both_have_reached(a: Limit, b: Limit, stream: list[Event]) -> None:
    both, governor = replay(a & b, stream)
    alone = [stop_index(a, stream), stop_index(b, stream)]
    if None not in alone:
        # Counts never go down, so once each has tripped alone, together they have too.
        assert both is not None and both <= max(i for i in alone if i is not None)
    if both is not None:
        assert all(status.used >= status.cap for status in governor.standing())


@given(events)
def test_an_unlimited_limit_never_trips(stream: list[Event]) -> None:
    limit = max_turns(UNLIMITED) | max_tool_calls(UNLIMITED) | max_model_calls("unlimited")
    governor = Governor(limit, clock=FakeClock())
    governor.handle(RunStarted())
    assert all(governor.handle(event) is CONTINUE for event in stream)


@given(leaves, events)
def test_counts_never_decrease_within_a_round(limit: Limit, stream: list[Event]) -> None:
    governor = Governor(limit, clock=FakeClock())
    governor.handle(RunStarted())
    before = governor.usage
    for event in stream:
        decision = governor.handle(event)
        now = governor.usage
        assert now.turns >= before.turns
        assert now.model_calls >= before.model_calls
        assert now.tool_calls >= before.tool_calls
        assert decision is CONTINUE or isinstance(decision, Stop | Warn)
        before = now


@given(leaves, leaves, leaves)
def test_or_flattens_and_its_repr_echoes(a: Limit, b: Limit, c: Limit) -> None:
    nested = (a | b) | c
    flat = any_of(a, b, c)
    assert repr(nested) == repr(flat)
    assert all(" | " not in repr(member) for member in flat.members())


def test_repr_echoes_what_was_written() -> None:
    limit = (
        max_turns(20)
        | max_tool_calls(5, tool="web_search")
        | all_of(max_turns(3), max_model_calls(2))
    )
    assert repr(limit) == (
        "max_turns(20) | max_tool_calls(5, tool='web_search') | max_turns(3) & max_model_calls(2)"
    )
    assert repr((max_turns(1) | max_turns(2)) & max_model_calls(3)) == (
        "(max_turns(1) | max_turns(2)) & max_model_calls(3)"
    )


def test_a_plain_callable_is_a_limit() -> None:
    def too_many_tools(usage: object) -> bool:
        return getattr(usage, "tool_calls", 0) >= 2

    limit = max_turns(10) | too_many_tools
    assert repr(limit) == "max_turns(10) | test_a_plain_callable_is_a_limit.<locals>.too_many_tools"
    assert stop_index(limit, [ToolCall("a"), ToolCall("b"), ToolCall("c")]) == 1
