"""The turn limit: a test per row of DESIGN.md's table, then the Allium spec as state machines."""

from __future__ import annotations

from typing import ClassVar

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from haltwise import (
    CONTINUE,
    UNLIMITED,
    Answer,
    Ask,
    Choice,
    ConfigurationError,
    Decision,
    Governor,
    Injected,
    Limit,
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


def test_a_limit_changed_while_asked_is_the_one_answered() -> None:
    governor = started(2, on_limit="ask")
    run_turns(governor, 2)
    ask = governor.handle(TurnStarting())
    assert isinstance(ask, Ask)
    governor.set_limit(max_turns(5, on_limit="ask"))
    assert governor.resolve(ask, Answer(Choice.EXTEND, 1)) is CONTINUE
    assert governor.turns() == (3, 6)  # the new limit, extended; the old one is gone


def test_a_new_value_drops_an_extension() -> None:
    governor = started(2, on_limit="ask")
    run_turns(governor, 2)
    ask = governor.handle(TurnStarting())
    assert isinstance(ask, Ask)
    governor.resolve(ask, Answer(Choice.EXTEND, 3))
    governor.set_limit(max_turns(10, on_limit="ask"))
    assert governor.turns() == (3, 10)


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


# The spec as state machines: haltwise against a plain model of the table above, one machine
# where a human answers every question and one with the default policy (no UI).

#: A turn limit as the model holds it: None is unlimited. 0 (approval mode) and the spec's
#: default of 25 are both in range.
turn_limits = st.one_of(st.none(), st.integers(min_value=0, max_value=30))


class TurnLimitMachine(RuleBasedStateMachine):
    """``max_turns(n, on_limit="ask")``, where a human gives every answer the dialog offers."""

    #: The turn limit's policy; the answer rules only fire under "ask".
    on_limit: ClassVar[str] = "ask"
    governor: Governor

    def __init__(self) -> None:
        super().__init__()
        #: The configured limit (None: unlimited) and what "extend by N" added this round.
        self.limit: int | None = None
        self.extension = 0
        #: Turns admitted this round (what the limit counts) and this run (``usage.turns``).
        self.count = 0
        self.run_turns = 0
        #: Why the run stopped (None while it is live), and whether it stopped to wrap up.
        self.stop_reason: str | None = None
        self.wrapping_up = False
        #: The question waiting for the human.
        self.pending: Ask | None = None

    @property
    def cap(self) -> int | None:
        """The limit of this round: the configured one raised by any extension."""
        return None if self.limit is None else self.limit + self.extension

    @property
    def live(self) -> bool:
        return self.stop_reason is None and self.pending is None

    def turn_limit(self, limit: int | None) -> Limit:
        return max_turns(UNLIMITED if limit is None else limit, on_limit=self.on_limit)

    @initialize(limit=turn_limits)
    def start(self, limit: int | None) -> None:
        self.governor = Governor(self.turn_limit(limit), clock=FakeClock())
        assert self.governor.handle(RunStarted("first")) is CONTINUE
        self.limit = limit

    # Turns and messages

    @precondition(lambda self: self.pending is None)
    @rule()
    def turn(self) -> None:
        decision = self.governor.handle(TurnStarting())
        if self.stop_reason is not None:
            # A stopped run stays stopped, whatever comes, until the next prompt.
            assert decision is self.governor.stopped
        else:
            self.admit_or_reach_the_boundary(decision)

    @precondition(lambda self: self.live)
    @rule(turns=st.integers(min_value=1, max_value=60))
    def many_turns(self, turns: int) -> None:
        # In bulk, so that limits are reached often and unlimited runs go well past the
        # spec's default of 25.
        for _ in range(turns):
            self.admit_or_reach_the_boundary(self.governor.handle(TurnStarting()))
            if not self.live:
                break

    @precondition(lambda self: self.pending is None)
    @rule()
    def inject(self) -> None:
        decision = self.governor.handle(Injected("also, use tabs"))
        if self.stop_reason is not None:
            assert decision is self.governor.stopped
        else:
            assert decision is CONTINUE

    @rule()
    def new_prompt(self) -> None:
        moot = self.pending
        assert self.governor.handle(RunStarted("again")) is CONTINUE
        if moot is not None:
            with pytest.raises(ConfigurationError, match="not this governor's open question"):
                self.governor.resolve(moot, True)
        self.count = self.run_turns = self.extension = 0
        self.stop_reason = None
        self.wrapping_up = False
        self.pending = None

    # A question open while the limit changes is a row test of its own
    # (test_a_limit_changed_while_asked_is_the_one_answered).
    @precondition(lambda self: self.pending is None)
    @rule(new=turn_limits)
    def set_limit(self, new: int | None) -> None:
        self.governor.set_limit(self.turn_limit(new))
        if self.limit is None and new is not None:
            # The spec's LimitReEnabled, even between runs: a limit switched on starts afresh.
            self.count = 0
        # The new value is the limit: an extension of the old one does not carry over.
        self.extension = 0
        self.limit = new

    # The human's answers

    @precondition(lambda self: self.pending is not None)
    @rule(event=st.sampled_from([TurnStarting(), Injected("are you there?")]))
    def event_while_asked(self, event: TurnStarting | Injected) -> None:
        # The dialog blocks the turn: nothing else goes on until it is answered.
        with pytest.raises(ConfigurationError, match="still unanswered"):
            self.governor.handle(event)

    @precondition(lambda self: self.pending is not None)
    @rule()
    def no_answer(self) -> None:
        stop = self.expect_stop(self.answer(None), "turn_limit")
        assert "No answer came" in stop.outcome.message
        assert not stop.synthesize

    @precondition(lambda self: self.pending is not None)
    @rule(reply=st.sampled_from([False, Choice.ABORT, Answer(Choice.ABORT)]))
    def decline(self, reply: bool | Choice | Answer) -> None:
        stop = self.expect_stop(self.answer(reply), "declined")
        assert "declined" in stop.outcome.message

    @precondition(lambda self: self.pending is not None)
    @rule(reply=st.sampled_from([True, Choice.CONTINUE, Answer(Choice.CONTINUE)]))
    def confirm(self, reply: bool | Choice | Answer) -> None:
        assert self.answer(reply) is CONTINUE
        # A new round, whose first turn is the one that waited, even under max_turns(0).
        self.count = 1
        self.extension = 0
        self.run_turns += 1

    @precondition(lambda self: self.pending is not None)
    @rule(amount=st.integers(min_value=1, max_value=10))
    def extend(self, amount: int) -> None:
        decision = self.answer(Answer(Choice.EXTEND, amount))
        self.extension += amount
        # The waiting turn tries again; below a lowered limit one extension may not be enough.
        self.admit_or_reach_the_boundary(decision)

    @precondition(lambda self: self.pending is not None)
    @rule(reply=st.sampled_from([Choice.WRAP_UP, Answer(Choice.WRAP_UP)]))
    def wrap_up(self, reply: Choice | Answer) -> None:
        stop = self.expect_stop(self.answer(reply), "turn_limit")
        assert stop.synthesize
        self.wrapping_up = True

    # The model's transitions, shared by the rules

    def admit_or_reach_the_boundary(self, decision: Decision) -> None:
        if self.cap is None or self.count < self.cap:
            assert decision is CONTINUE
            self.count += 1
            self.run_turns += 1
        elif self.on_limit == "ask":
            assert isinstance(decision, Ask)
            assert decision.question.startswith(f"You've used {self.count} turn")
            assert decision.reason == "turn_limit"
            self.pending = decision
        else:
            stop = self.expect_stop(decision, "turn_limit")
            assert f"{self.count} of {self.cap} turns" in stop.outcome.message

    def answer(self, reply: Answer | Choice | bool | None) -> Decision:
        assert self.pending is not None
        question, self.pending = self.pending, None
        return self.governor.resolve(question, reply)

    def expect_stop(self, decision: Decision, reason: str) -> Stop:
        assert isinstance(decision, Stop)
        assert decision.outcome.status is Status.ABANDONED
        assert decision.outcome.reason == reason
        self.stop_reason = reason
        return decision

    # What the governor shows must always be what the model says

    @invariant()
    def counts_agree(self) -> None:
        assert self.governor.turns() == (self.count, self.cap)
        assert self.governor.usage.turns == self.run_turns

    @invariant()
    def stop_agrees(self) -> None:
        stop = self.governor.stopped
        if self.stop_reason is None:
            assert stop is None
        else:
            assert stop is not None
            assert stop.outcome.reason == self.stop_reason
            assert stop.synthesize == self.wrapping_up

    @invariant()
    def question_agrees(self) -> None:
        assert self.governor.pending is self.pending


class TurnLimitWithoutUiMachine(TurnLimitMachine):
    """The default ``max_turns(n)``: no UI, so the boundary itself stops the run."""

    on_limit = "abort"


# Each rule is switched off in some examples (Hypothesis's swarm testing), and a human is only
# asked at a boundary: the asking machine needs more examples to answer often enough.
TurnLimitMachine.TestCase.settings = settings(
    max_examples=300, stateful_step_count=60, deadline=None
)
test_turn_limit_spec = TurnLimitMachine.TestCase
TurnLimitWithoutUiMachine.TestCase.settings = settings(
    max_examples=150, stateful_step_count=60, deadline=None
)
test_turn_limit_without_ui_spec = TurnLimitWithoutUiMachine.TestCase
