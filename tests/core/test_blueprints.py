"""A limit expression is installed from its blueprint (``governor._Blueprint``): made at the
first governor of that expression and kept, it holds the expression's leaves and checks, and
each governor binds them to slots and a context of its own."""

from __future__ import annotations

from typing import Any

import pytest

from haltwise import (
    Block,
    Governor,
    RunStarted,
    Stop,
    ToolCall,
    ToolResult,
    TurnStarting,
    max_tool_calls,
    max_turns,
    stuck,
    timeout,
)
from haltwise.engine import governor as governor_module
from haltwise.engine import hotpath
from haltwise.engine.limits import ALL_EVENTS
from haltwise.testing import FakeClock


def _failing_call(governor: Governor, index: int) -> Any:
    """The same failing test run again: what ``stuck()`` notices."""
    governor.handle(ToolCall("bash", {"command": "pytest -x"}, f"call_{index}"))
    return governor.handle(ToolResult("bash", "E   AssertionError: 1 != 2", f"call_{index}"))


def test_governors_of_one_expression_share_its_blueprint_and_count_apart() -> None:
    limits = max_turns(3) | max_tool_calls(50) | stuck()
    first, second = Governor(limits), Governor(limits)
    assert first._blueprint is second._blueprint
    for governor in (first, second):
        governor.handle(RunStarted("task"))
    decisions = [_failing_call(first, index) for index in range(12)]
    assert any(isinstance(decision, Stop | Block) for decision in decisions)
    # The other governor's detectors and counts saw none of it.
    assert not isinstance(_failing_call(second, 0), Stop | Block)
    assert second.usage.tool_calls == 1
    for _ in range(3):
        assert not isinstance(second.handle(TurnStarting()), Stop)
    assert isinstance(second.handle(TurnStarting()), Stop)
    assert first.usage.turns == 0


def test_a_check_is_one_object_in_every_table_it_is_in_and_holds_its_governors_slot() -> None:
    limits = max_turns(3) | stuck()
    first, second = Governor(limits), Governor(limits)
    for governor in (first, second):
        tables = governor._full_tables
        posts = [check for event_type in ALL_EVENTS for check in tables[event_type][1]]
        detector = posts[0][0]
        theirs = [check for check in posts if check[0] is detector]
        assert len(theirs) > 1  # a detector follows several kinds of event
        assert all(check is theirs[0] for check in theirs)
        _, slot, ctx, method = theirs[0]
        assert slot is governor._slots[detector]
        assert ctx is governor
        assert method == detector.post
    assert first._slots[detector] is not second._slots[detector]


def test_the_fast_tables_leave_the_time_limit_out_and_are_the_full_ones_elsewhere() -> None:
    governor = Governor(max_turns(3) | timeout(seconds=60) | stuck(), clock=FakeClock())
    full, fast = governor._full_tables, governor._fast_tables
    turn_checks = [repr(limit) for limit, *_ in full[TurnStarting][0]]
    assert turn_checks == ["max_turns(3)", "timeout(60)"]
    assert [repr(limit) for limit, *_ in fast[TurnStarting][0]] == ["max_turns(3)"]
    shared = 0
    for event_type in ALL_EVENTS:
        for before in (0, 1):
            if all(repr(limit) != "timeout(60)" for limit, *_ in full[event_type][before]):
                assert fast[event_type][before] is full[event_type][before]
                shared += bool(full[event_type][before])
    assert shared >= 3  # the detectors' tables after a turn ends, a call, progress...
    # With no time limit, each fast table is its full one, before an event and after.
    untimed = Governor(max_turns(3) | stuck())
    for event_type in ALL_EVENTS:
        assert untimed._fast_tables[event_type][0] is untimed._full_tables[event_type][0]
        assert untimed._fast_tables[event_type][1] is untimed._full_tables[event_type][1]


def test_a_phase_of_the_governors_own_expression_binds_the_phase() -> None:
    limits = max_turns(3)
    governor = Governor(limits)
    governor.handle(RunStarted("task"))
    governor.handle(TurnStarting())
    phase = governor.enter_phase("again", limits)
    contexts = [ctx for _, _, ctx, _ in governor._full_tables[TurnStarting][0]]
    assert contexts == [governor, phase]
    (leaf,) = governor._leaves
    slots = [slot for _, slot, _, _ in governor._full_tables[TurnStarting][0]]
    assert slots == [governor._slots[leaf], phase.slots[leaf]]
    # The run's limit trips first (four turns in all); the phase has seen three.
    assert not isinstance(governor.handle(TurnStarting()), Stop)
    assert not isinstance(governor.handle(TurnStarting()), Stop)
    stop = governor.handle(TurnStarting())
    assert isinstance(stop, Stop)
    assert stop.outcome.phase is None


def test_the_hot_path_source_is_written_once_for_an_expression(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    written: list[str] = []
    source = hotpath._Plan.source

    def counted(plan: Any) -> str:
        text = source(plan)
        written.append(text)
        return text

    monkeypatch.setattr(hotpath._Plan, "source", counted)
    limits = max_turns(25) | max_tool_calls(50)
    governors = [Governor(limits) for _ in range(3)]
    for governor in governors:
        governor.handle(RunStarted("task"))
    assert len(written) == 1
    assert all(hotpath.source(governor) == written[0] for governor in governors)
    # Each governor's handlers read its own counts.
    governors[0].handle(TurnStarting())
    assert [governor.usage.turns for governor in governors] == [1, 0, 0]


def test_the_blueprints_kept_are_bounded_and_a_forgotten_one_is_made_again() -> None:
    first = max_turns(2)
    governor_module._blueprint_of(first)
    for maximum in range(governor_module._BLUEPRINTS_KEPT + 10):
        Governor(max_turns(maximum + 10))
    assert len(governor_module._blueprints) <= governor_module._BLUEPRINTS_KEPT
    assert id(first) not in governor_module._blueprints
    governor = Governor(first)
    governor.handle(RunStarted("task"))
    for _ in range(2):
        assert not isinstance(governor.handle(TurnStarting()), Stop)
    assert isinstance(governor.handle(TurnStarting()), Stop)


def test_an_expression_a_governor_makes_itself_is_not_kept() -> None:
    kept = dict(governor_module._blueprints)

    def over_three_calls(usage: Any) -> bool:
        return bool(usage.tool_calls > 3)

    first, second = Governor(over_three_calls), Governor(over_three_calls)
    assert first._blueprint is not second._blueprint
    first.handle(RunStarted("task"))
    first.set_limit(max_turns(5))
    first.enter_phase("plan", over_three_calls)
    assert governor_module._blueprints == kept
    # They still work: the phase's callable and the limit set while running.
    for index in range(3):
        first.handle(ToolCall("bash", {"command": f"ls {index}"}, f"call_{index}"))
    assert isinstance(first.handle(ToolCall("bash", {"command": "ls"}, "call_4")), Stop)


def test_a_phase_of_an_expression_given_again_shares_its_blueprint() -> None:
    planning = max_tool_calls(2)
    governor = Governor(max_turns(10))
    governor.handle(RunStarted("task"))
    first = governor.enter_phase("plan", planning)
    governor.exit_phase(first)
    second = governor.enter_phase("plan", planning)
    assert first.blueprint is second.blueprint
    governor.handle(ToolCall("bash", {"command": "ls"}, "call_1"))
    governor.handle(ToolCall("bash", {"command": "ls -l"}, "call_2"))
    stop = governor.handle(ToolCall("bash", {"command": "ls -la"}, "call_3"))
    assert isinstance(stop, Stop)
    assert stop.outcome.phase == "plan"
