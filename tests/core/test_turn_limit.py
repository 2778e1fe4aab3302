"""The turn limit: a test per row of DESIGN.md's table, then the Allium spec as a state machine."""

from __future__ import annotations

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from haltwise import (
    CONTINUE,
    UNLIMITED,
    Answer,
    Ask,
    Choice,
    Governor,
    Injected,
    RunStarted,
    Status,
    Stop,
    TurnStarting,
    max_turns,
)
from haltwise.testing import FakeClock


def started(limit: int | object, **options: object) -> Governor:
    governor = Governor(max_turns(limit, **options), clock=FakeClock())  # type: ignore[arg-type]
    governor.handle(RunStarted("task"))
    return governor


def run_turns(governor: Governor, n: int) -> None:
    for _ in range(n):
        assert governor.handle(TurnStarting()) is CONTINUE


def test_n_turns_run_and_the_next_one_asks() -> None:
    governor = started(3, on_limit="ask")
    run_turns(governor, 3)
    decision = governor.handle(TurnStarting())
    assert isinstance(decision, Ask)
    assert decision.question == "You've used 3 turns. Continue?"
    assert governor.turns() == (3, 3)


def test_without_a_ui_the_boundary_stops_the_run() -> None:
    governor = started(3)
    run_turns(governor, 3)
    decision = governor.handle(TurnStarting())
    assert isinstance(decision, Stop)
    assert decision.outcome.status is Status.ABANDONED
    assert decision.outcome.reason == "turn_limit"
    assert "3 of 3 turns" in decision.outcome.message
    assert decision.outcome.checkpoint is not None


def test_count_resets_on_a_new_prompt() -> None:
    governor = started(3)
    run_turns(governor, 2)
    governor.handle(RunStarted("next task"))
    assert governor.turns() == (0, 3)
    run_turns(governor, 3)


def test_count_never_resets_on_an_injected_message() -> None:
    governor = started(3)
    run_turns(governor, 2)
    assert governor.handle(Injected("also, use tabs")) is CONTINUE
    assert governor.turns() == (2, 3)
    run_turns(governor, 1)
    assert isinstance(governor.handle(TurnStarting()), Stop)


def test_zero_asks_before_every_turn() -> None:
    governor = started(0, on_limit="ask")
    for _ in range(3):
        decision = governor.handle(TurnStarting())
        assert isinstance(decision, Ask)
        assert governor.resolve(decision, True) is CONTINUE
    assert governor.usage.turns == 3


def test_zero_without_a_ui_stops_at_once_with_a_reason() -> None:
    governor = started(0, on_limit="ask")
    decision = governor.handle(TurnStarting())
    assert isinstance(decision, Ask)
    stop = governor.resolve(decision, None)
    assert isinstance(stop, Stop)
    assert stop.outcome.reason == "turn_limit"
    assert "No answer came" in stop.outcome.message
    assert governor.usage.turns == 0


def test_unlimited_never_fires_and_still_counts() -> None:
    governor = started(UNLIMITED)
    run_turns(governor, 500)
    assert governor.turns() == (500, None)


def test_unlimited_to_n_resets_the_count() -> None:
    governor = started("unlimited")
    run_turns(governor, 40)
    governor.set_limit(max_turns(5))
    assert governor.turns() == (0, 5)
    run_turns(governor, 5)
    assert isinstance(governor.handle(TurnStarting()), Stop)


def test_n_to_m_keeps_the_count() -> None:
    governor = started(10)
    run_turns(governor, 4)
    governor.set_limit(max_turns(20))
    assert governor.turns() == (4, 20)


def test_lowering_below_the_count_fires_at_the_next_turn() -> None:
    governor = started(10)
    run_turns(governor, 6)
    governor.set_limit(max_turns(3))
    assert governor.turns() == (6, 3)
    assert isinstance(governor.handle(TurnStarting()), Stop)


def test_confirming_resets_the_count_and_the_turn_proceeds() -> None:
    governor = started(2, on_limit="ask")
    run_turns(governor, 2)
    ask = governor.handle(TurnStarting())
    assert isinstance(ask, Ask)
    assert governor.resolve(ask, Answer(Choice.CONTINUE)) is CONTINUE
    assert governor.turns() == (1, 2)
    run_turns(governor, 1)
    assert isinstance(governor.handle(TurnStarting()), Ask)  # every N turns, asked again


def test_declining_aborts_and_aborted_is_terminal_for_the_run() -> None:
    governor = started(1, on_limit="ask")
    run_turns(governor, 1)
    ask = governor.handle(TurnStarting())
    assert isinstance(ask, Ask)
    stop = governor.resolve(ask, False)
    assert isinstance(stop, Stop)
    assert stop.outcome.reason == "declined"
    assert stop.outcome.status is Status.ABANDONED
    assert governor.handle(TurnStarting()) is stop
    assert governor.handle(Injected("please go on")) is stop
    assert governor.handle(RunStarted("a new prompt")) is CONTINUE


def test_extend_by_n_raises_the_limit_for_this_round() -> None:
    governor = started(2, on_limit="ask")
    run_turns(governor, 2)
    ask = governor.handle(TurnStarting())
    assert isinstance(ask, Ask)
    assert governor.resolve(ask, Answer(Choice.EXTEND, 3)) is CONTINUE
    assert governor.turns() == (3, 5)
    run_turns(governor, 2)
    assert isinstance(governor.handle(TurnStarting()), Ask)


def test_the_dialog_blocks_the_turn_until_answered() -> None:
    governor = started(1, on_limit="ask")
    run_turns(governor, 1)
    ask = governor.handle(TurnStarting())
    assert isinstance(ask, Ask)
    with pytest.raises(Exception, match="still unanswered"):
        governor.handle(TurnStarting())
    assert governor.usage.turns == 1
    # A new prompt makes the open question moot.
    assert governor.handle(RunStarted("something else")) is CONTINUE
    assert governor.pending is None


# The spec as a state machine: haltwise against a plain model of the table above.


class TurnLimitMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.governor = Governor(max_turns(25, on_limit="ask"), clock=FakeClock())
        self.governor.handle(RunStarted("first"))
        self.limit: int | None = 25
        self.count = 0
        self.total = 0
        self.aborted = False
        self.pending: Ask | None = None

    @precondition(lambda self: self.pending is None and not self.aborted)
    @rule()
    def turn(self) -> None:
        decision = self.governor.handle(TurnStarting())
        if self.limit is not None and self.count >= self.limit:
            assert isinstance(decision, Ask)
            self.pending = decision
        else:
            assert decision is CONTINUE
            self.count += 1
            self.total += 1

    @precondition(lambda self: self.pending is not None)
    @rule(confirm=st.booleans())
    def answer(self, confirm: bool) -> None:
        assert self.pending is not None
        decision = self.governor.resolve(self.pending, confirm)
        self.pending = None
        if confirm:
            assert decision is CONTINUE
            self.count = 1
            self.total += 1
        else:
            assert isinstance(decision, Stop)
            self.aborted = True

    @precondition(lambda self: self.pending is None)
    @rule()
    def new_prompt(self) -> None:
        assert self.governor.handle(RunStarted("again")) is CONTINUE
        self.count = 0
        self.total = 0
        self.aborted = False

    @precondition(lambda self: self.pending is None)
    @rule()
    def inject(self) -> None:
        decision = self.governor.handle(Injected("more context"))
        assert isinstance(decision, Stop) if self.aborted else decision is CONTINUE

    @precondition(lambda self: self.pending is None and not self.aborted)
    @rule(new=st.one_of(st.none(), st.integers(min_value=0, max_value=30)))
    def set_limit(self, new: int | None) -> None:
        self.governor.set_limit(max_turns(UNLIMITED if new is None else new, on_limit="ask"))
        if self.limit is None and new is not None:
            self.count = 0  # LimitReEnabled
        self.limit = new

    @invariant()
    def counts_agree(self) -> None:
        if not self.aborted:
            assert self.governor.turns() == (self.count, self.limit)
        assert self.governor.usage.turns == self.total

    @invariant()
    def aborted_is_terminal(self) -> None:
        if self.aborted and self.pending is None:
            assert isinstance(self.governor.handle(TurnStarting()), Stop)


TurnLimitMachine.TestCase.settings = settings(max_examples=150, stateful_step_count=60)
test_turn_limit_spec = TurnLimitMachine.TestCase
