"""The cost gate (AUREUS's SPK), the plan-size cap and the session limits."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from haltwise import Governor, InvalidValueError, MemoryLedger, ModelRequest, RunStarted, Status
from haltwise.loops import Quote, Step, attempts, cost_gate, max_plan_size, session_limits
from haltwise.testing import FakeClock

COSTS = {"full": "12.00", "mid": "5.00", "small": "0.50", "phased": "4.00", "simple": "3.00"}


def estimate(work: str) -> str:
    return COSTS[work]


def reduce_scope(work: str) -> str:
    return "small"


def split_into_phases(work: str) -> str:
    return "phased"


def simpler_approach(work: str) -> str:
    return "simple"


def too_expensive(work: str) -> str:
    return "full"


GATE = cost_gate(proceed_below="1.00", reject_above="10.00")


def test_a_cheap_estimate_proceeds_without_asking() -> None:
    asked: list[Any] = []
    result = GATE.run("small", estimate, decide=asked.append, clock=FakeClock())

    assert result.status is Status.COMPLETED
    assert result.value == "small"
    assert asked == []
    assert result.outcome.message == "Approved: the estimate of $0.50 is below $1.00."


def test_in_between_a_human_decides() -> None:
    offered: list[tuple[Quote[str], ...]] = []

    def decide(quotes: tuple[Quote[str], ...]) -> bool:
        offered.append(quotes)
        return True

    result = GATE.run("mid", estimate, decide=decide, clock=FakeClock())

    assert result.value == "mid"
    assert offered == [(Quote("original", "mid", Decimal("5.00")),)]
    assert result.history[-1].summary == "chose 'original'"


def test_a_rejection_offers_only_cheaper_alternatives_and_the_human_picks_one() -> None:
    offered: list[tuple[Quote[str], ...]] = []

    def decide(quotes: tuple[Quote[str], ...]) -> int:
        offered.append(quotes)
        return 1

    result = GATE.run(
        "full",
        estimate,
        alternatives=[too_expensive, split_into_phases, simpler_approach],
        decide=decide,
        clock=FakeClock(),
    )

    assert [quote.label for quote in offered[0]] == ["split into phases", "simpler approach"]
    assert result.status is Status.COMPLETED
    assert result.value == "simple"
    assert "approved the alternative 'simpler approach' at an estimate of $3.00" in (
        result.outcome.message
    )


def test_rejecting_every_alternative_abandons_with_next_steps() -> None:
    result = GATE.run(
        "full",
        estimate,
        alternatives=[split_into_phases, simpler_approach],
        decide=lambda quotes: None,
        clock=FakeClock(),
    )

    assert result.status is Status.ABANDONED
    assert result.reason == "no_acceptable_alternative"
    assert result.value is None
    assert "Rephrase the request more specifically" in result.outcome.suggestions
    assert result.outcome.checkpoint is not None
    assert result.tried == (
        "quote 1: original: full (estimate 12.00)",
        "quote 2: split into phases: phased (estimate 4.00)",
        "quote 3: simpler approach: simple (estimate 3.00)",
        "decision 4: rejected split into phases at $4.00, simpler approach at $3.00",
    )


def test_at_most_three_alternatives_are_tried() -> None:
    tried: list[str] = []

    def proposal(name: str) -> Any:
        def alternative(work: str) -> str:
            tried.append(name)
            return "full"

        alternative.__name__ = name
        return alternative

    result = GATE.run(
        "full",
        estimate,
        alternatives=[proposal(f"idea_{n}") for n in range(5)],
        clock=FakeClock(),
    )

    assert tried == ["idea_0", "idea_1", "idea_2"]
    assert result.reason == "cost_rejected"
    assert "2 more were not tried: at most 3" in result.outcome.message


def test_the_alternative_cap_is_settable() -> None:
    gate = cost_gate("1", "10", max_alternatives=1)
    result = gate.run("full", estimate, alternatives=[too_expensive, reduce_scope])
    assert result.reason == "cost_rejected"
    assert repr(gate) == "cost_gate('1', '10', max_alternatives=1)"


def test_with_no_one_to_ask_only_a_cheap_alternative_proceeds() -> None:
    proceeds = GATE.run("full", estimate, alternatives=[split_into_phases, reduce_scope])
    assert proceeds.value == "small"
    assert "the alternative 'reduce scope' proceeds" in proceeds.outcome.message

    stuck = GATE.run("full", estimate, alternatives=[split_into_phases])
    assert stuck.reason == "no_acceptable_alternative"
    assert "no one was asked" in stuck.outcome.message

    unasked = GATE.run("mid", estimate)
    assert unasked.reason == "cost_rejected"
    assert "needs a human's approval, and no one was asked" in unasked.outcome.message


def test_an_unknown_estimate_is_never_zero() -> None:
    def broken(work: str) -> str:
        raise ConnectionError("pricing service down")

    asked: list[tuple[Quote[str], ...]] = []

    def decline(quotes: tuple[Quote[str], ...]) -> bool:
        asked.append(quotes)
        return False

    result = GATE.run("anything", broken, decide=decline)

    assert asked and asked[0][0].estimate is None
    assert result.reason == "cost_rejected"
    assert "could not be estimated" in result.outcome.message
    assert result.history[0].error == "estimate raised ConnectionError: pricing service down"

    nonsense = GATE.run("anything", lambda work: "a lot")
    assert nonsense.reason == "cost_rejected"
    assert nonsense.history[0].error == "estimate returned a lot, not an amount"


def test_a_raising_alternative_is_recorded_and_skipped() -> None:
    def crashes(work: str) -> str:
        raise RuntimeError("no idea")

    result = GATE.run("full", estimate, alternatives=[crashes, reduce_scope])

    assert result.value == "small"
    assert result.history[1].error == "RuntimeError: no idea"


@pytest.mark.parametrize("answer", [None, False, 7, -1, "yes", Quote("x", "y", None)])
def test_a_decision_that_is_not_a_choice_rejects(answer: Any) -> None:
    result = GATE.run("full", estimate, alternatives=[split_into_phases], decide=lambda q: answer)
    assert result.reason == "no_acceptable_alternative"


def test_the_chosen_quote_itself_is_a_choice() -> None:
    result = GATE.run(
        "full", estimate, alternatives=[split_into_phases], decide=lambda quotes: quotes[0]
    )
    assert result.value == "phased"


@pytest.mark.parametrize(
    ("low", "high"), [("-1", "10"), ("5", "1"), ("x", "10"), (1, float("inf")), (True, 10)]
)
def test_invalid_thresholds_are_refused(low: Any, high: Any) -> None:
    with pytest.raises(InvalidValueError, match="cost_gate"):
        cost_gate(low, high)


def test_band() -> None:
    assert GATE.band(Decimal("0.99")) == "proceed"
    assert GATE.band(Decimal("1.00")) == "decide"
    assert GATE.band(Decimal("10.00")) == "decide"
    assert GATE.band(Decimal("10.01")) == "reject"
    assert GATE.band(None) == "decide"
    assert repr(GATE) == "cost_gate('1.00', '10.00')"


# -- the plan cap ---------------------------------------------------------------------------


def test_too_large_a_plan_is_rejected_with_break_it_into_smaller_tasks() -> None:
    cap = max_plan_size(20)
    assert cap.check(["task"] * 20) is None
    outcome = cap.check(["task"] * 34)
    assert outcome is not None
    assert outcome.status is Status.ABANDONED
    assert outcome.reason == "plan_too_large"
    assert outcome.message == "The plan has 34 tasks, more than 20: break it into smaller tasks."
    assert outcome.suggestions[0] == "Break it into smaller tasks"
    assert repr(cap) == "max_plan_size(20)"


def test_the_plan_cap_as_a_judge_asks_for_a_smaller_plan() -> None:
    def plan(step: Step) -> list[str]:
        asked_smaller = any("smaller" in str(i) for done in step.history for i in done.issues)
        return ["task"] * (5 if asked_smaller else 50)

    result = attempts(2, accept=max_plan_size(20)).run(plan, clock=FakeClock())

    assert result.ok
    assert result.value is not None and len(result.value) == 5


def test_invalid_plan_caps_are_refused() -> None:
    with pytest.raises(InvalidValueError, match="max_plan_size"):
        max_plan_size(0)


# -- session limits -------------------------------------------------------------------------


def test_session_limits_are_core_limits() -> None:
    assert repr(session_limits()) == (
        "timeout(minutes=30, scope='session') | max_model_calls(50, scope='session') | "
        "max_tokens(total=500000, scope='session')"
    )
    assert repr(session_limits(minutes=None, model_calls=None, tokens=None, cost="10")) == (
        "max_cost('10', scope='session')"
    )


def test_session_limits_stop_the_agents_inside_a_loop() -> None:
    session = Governor(session_limits(model_calls=2), clock=FakeClock())

    def agent(step: Step) -> str:
        step.governor.handle(RunStarted("generate"))
        step.governor.handle(ModelRequest("m"))
        return "draft"

    result = attempts(5, accept=lambda _: False).run(agent, governor=session)

    assert result.status is Status.ABANDONED
    assert result.reason == "model_call_limit"
    assert result.iterations == 3  # the third attempt's model call was refused
    assert result.outcome.usage.model_calls == 2


def test_a_rejected_gate_resumes_with_a_bigger_budget() -> None:
    ledger = MemoryLedger()
    first = cost_gate("1", "10", ledger=ledger).run("full", estimate)
    assert first.reason == "cost_rejected"
    assert first.outcome.checkpoint is not None

    result = cost_gate("1", "20", ledger=ledger).resume(
        first.outcome.checkpoint, "full", estimate, decide=lambda quotes: True
    )

    assert result.value == "full"
    assert result.tried[0] == "quote 1: original: full (estimate 12.00)"
    assert len(result.tried) == 3
