"""Limits with ``key=``: every governor naming the key on one ledger spends one budget."""

from __future__ import annotations

from datetime import datetime, timezone
from decimal import Decimal
from typing import Any

import pytest

from haltwise import (
    CONTINUE,
    Answer,
    Ask,
    Choice,
    Continue,
    Governor,
    Guard,
    InvalidValueError,
    ModelRequest,
    ModelResponse,
    Prices,
    RunStarted,
    Status,
    Stop,
    ToolCall,
    TurnStarting,
    max_cost,
    max_tokens,
    max_tool_calls,
    max_turns,
)
from haltwise.engine.errors import LedgerError
from haltwise.engine.ledger import Budget, Grant, MemoryLedger
from haltwise.engine.limits import Limit
from haltwise.testing import FakeClock

PRICES = Prices({"m": {"input": "1", "output": "10"}})  # $1 / $10 per million tokens


def governor(limits: Limit, ledger: Any, **options: Any) -> Governor:
    governed = Governor(limits, ledger=ledger, pricer=PRICES, **options)
    assert governed.handle(RunStarted("task")) is CONTINUE
    return governed


def spent(ledger: Any, key: str) -> dict[str, int]:
    return {s.budget.metric: s.spent for s in ledger.budgets() if s.budget.key == key}


def test_two_governors_spend_one_turn_budget() -> None:
    ledger = MemoryLedger()
    one = governor(max_turns(3, key="alice"), ledger)
    two = governor(max_turns(3, key="alice"), ledger)
    assert [g.handle(TurnStarting()) for g in (one, two, one)] == [CONTINUE] * 3
    stop = two.handle(TurnStarting())
    assert isinstance(stop, Stop)
    assert stop.outcome.reason == "turn_limit"
    assert stop.outcome.message == (
        "Shared budget 'alice' spent: 3 turns of 3 turns used (max_turns(3, key='alice'))"
    )
    assert (one.usage.turns, two.usage.turns) == (2, 1)
    assert spent(ledger, "alice") == {"turns": 3}


def test_a_request_is_refused_before_it_is_sent_when_its_worst_case_does_not_fit() -> None:
    ledger = MemoryLedger()
    # $0.01 a day: 1,000 prompt tokens ($0.001) + 500 output tokens ($0.005) = $0.006 worst case.
    one = governor(max_cost("0.01", key="team", per="day"), ledger)
    two = governor(max_cost("0.01", key="team", per="day"), ledger)
    request = ModelRequest("m", max_tokens=500, input_tokens=1_000)
    assert one.handle(request) is CONTINUE
    stop = two.handle(request)  # $0.006 held by one's request in flight
    assert isinstance(stop, Stop)
    assert stop.provider_called is False
    assert "would be exceeded: $0.0060 of $0.01 used, and this needs $0.0060" in (
        stop.outcome.message
    )
    one.handle(ModelResponse("m", input_tokens=1_000, output_tokens=100))  # cost $0.002
    assert spent(ledger, "team") == {"nano_usd": 2_000_000}
    three = governor(max_cost("0.01", key="team", per="day"), ledger)
    assert three.handle(request) is CONTINUE  # $0.002 + $0.006 fits


def test_a_token_budget_lowers_max_tokens_to_what_is_left() -> None:
    ledger = MemoryLedger()
    first = governor(max_tokens(2_000, key="nightly"), ledger)
    assert first.handle(ModelRequest("m", max_tokens=800, input_tokens=1_000)) is CONTINUE
    first.handle(ModelResponse("m", input_tokens=1_000, output_tokens=500))
    second = governor(max_tokens(2_000, key="nightly"), ledger)
    decision = second.handle(ModelRequest("m", max_tokens=800, input_tokens=300))
    assert decision == Continue(max_tokens=200)  # 1,500 used, 300 prompt: 200 left to write
    second.handle(ModelResponse("m", input_tokens=300, output_tokens=200))
    assert spent(ledger, "nightly") == {"total_tokens": 2_000}


def test_shared_and_local_limits_together_and_a_refusal_spends_nothing() -> None:
    ledger = MemoryLedger()
    local = governor(max_tool_calls(2) | max_tool_calls(10, key="fleet"), ledger)
    assert local.handle(ToolCall("t")) is CONTINUE
    assert local.handle(ToolCall("t")) is CONTINUE
    assert isinstance(local.handle(ToolCall("t")), Stop)  # the local cap, before the ledger
    assert spent(ledger, "fleet") == {"tool_calls": 2}
    both = governor(max_tool_calls(10, key="fleet") | max_turns(1, key="turns"), ledger)
    both.handle(TurnStarting())
    assert isinstance(both.handle(TurnStarting()), Stop)
    assert spent(ledger, "turns") == {"turns": 1}


def test_asking_at_a_shared_limit_extends_this_governor_only() -> None:
    ledger = MemoryLedger()
    asking = governor(max_turns(2, key="k", on_limit="ask"), ledger)
    strict = governor(max_turns(2, key="k"), ledger)
    asking.handle(TurnStarting())
    asking.handle(TurnStarting())
    ask = asking.handle(TurnStarting())
    assert isinstance(ask, Ask)
    assert asking.resolve(ask, Answer(Choice.EXTEND, 2)) is CONTINUE  # the third turn
    assert asking.handle(TurnStarting()) is CONTINUE
    assert isinstance(asking.handle(TurnStarting()), Ask)
    assert isinstance(strict.handle(TurnStarting()), Stop)  # still 2 for the other one
    again = asking.pending
    assert again is not None
    assert asking.resolve(again, Choice.CONTINUE) is CONTINUE  # a new round: 2 more
    assert asking.handle(TurnStarting()) is CONTINUE
    assert isinstance(asking.handle(TurnStarting()), Ask)


def test_a_request_never_answered_spends_what_it_held() -> None:
    ledger = MemoryLedger()
    run = governor(max_cost("1", key="team"), ledger)
    run.handle(ModelRequest("m", max_tokens=1_000, input_tokens=1_000))
    run.handle(ModelResponse("m", answered=False))
    assert spent(ledger, "team") == {"nano_usd": 11_000_000}  # $0.001 + $0.010


def test_a_checkpoint_carries_the_holds_of_requests_in_flight() -> None:
    ledger = MemoryLedger()
    run = governor(max_cost("1", key="team"), ledger)
    run.handle(ModelRequest("m", max_tokens=1_000, input_tokens=1_000))
    saved = run.checkpoint()
    resumed = Governor(max_cost("1", key="team"), ledger=ledger, pricer=PRICES)
    resumed.restore(saved)
    assert spent(ledger, "team") == {"nano_usd": 11_000_000}
    (state,) = ledger.budgets()
    assert state.reserved == 0


def test_windows_start_afresh() -> None:
    ledger = MemoryLedger()
    now = [datetime(2026, 11, 23, 23, 59, tzinfo=timezone.utc).timestamp()]
    run = governor(max_turns(1, key="k", per="day"), ledger, wall_clock=lambda: now[0])
    assert run.handle(TurnStarting()) is CONTINUE
    assert isinstance(run.handle(TurnStarting()), Stop)
    run.handle(RunStarted("next"))
    now[0] += 120  # past midnight UTC: a new day, a new budget
    assert run.handle(TurnStarting()) is CONTINUE
    windows = sorted(s.budget.window for s in ledger.budgets())
    assert windows == ["2026-11-23", "2026-11-24"]


def test_a_sub_agent_spends_its_own_shared_budget_and_its_parents() -> None:
    ledger = MemoryLedger()
    parent = governor(max_tool_calls(3, key="team"), ledger)
    child = parent.child(max_tool_calls(2, key="helper"))
    child.handle(RunStarted("sub"))
    assert child.handle(ToolCall("t")) is CONTINUE
    assert child.handle(ToolCall("t")) is CONTINUE
    assert isinstance(child.handle(ToolCall("t")), Stop)  # the child's own budget
    assert parent.handle(ToolCall("t")) is CONTINUE
    assert isinstance(parent.handle(ToolCall("t")), Stop)
    assert spent(ledger, "team") == {"tool_calls": 3}
    assert spent(ledger, "helper") == {"tool_calls": 2}


class Flaky(MemoryLedger):
    """A memory ledger that can be made unreachable."""

    def __init__(self) -> None:
        super().__init__()
        self.down = False

    def _check(self) -> None:
        if self.down:
            raise LedgerError("connection refused")

    def charge(self, budget: Budget, amount: int, limit: int) -> Grant:
        self._check()
        return super().charge(budget, amount, limit)

    def reserve(self, budget: Budget, amount: int, limit: int, **options: Any) -> Grant:
        self._check()
        return super().reserve(budget, amount, limit, **options)

    def spend(self, budget: Budget, amount: int, op_id: str) -> int:
        self._check()
        return super().spend(budget, amount, op_id)

    def save_checkpoint(self, run_id: str, data: dict[str, Any]) -> str:
        self._check()
        return super().save_checkpoint(run_id, data)

    def __repr__(self) -> str:
        return "flaky://ledger"


def test_an_unreachable_ledger_stops_the_run_by_default() -> None:
    ledger = Flaky()
    run = governor(max_turns(5, key="k"), ledger)
    ledger.down = True
    stop = run.handle(TurnStarting())
    assert isinstance(stop, Stop)
    assert stop.outcome.reason == "ledger_unavailable"
    assert stop.outcome.status is Status.ABANDONED
    assert "flaky://ledger: connection refused" in stop.outcome.message
    assert "checkpoint could not be saved" in stop.outcome.message


def test_failing_open_goes_on_and_settles_every_spend_once_the_ledger_is_back() -> None:
    ledger = Flaky()
    clock = FakeClock()
    limits = max_cost("1", key="team") | max_tool_calls(5, key="team")
    run = governor(limits, ledger, on_ledger_error="open", clock=clock)
    run.handle(ModelRequest("m", max_tokens=100, input_tokens=1_000))
    ledger.down = True
    run.handle(ModelResponse("m", input_tokens=1_000, output_tokens=100))  # commit fails
    assert run.handle(ModelRequest("m", max_tokens=100, input_tokens=1_000)) is CONTINUE
    run.handle(ModelResponse("m", input_tokens=1_000, output_tokens=100))
    assert run.handle(ToolCall("t")) is CONTINUE
    assert len(run.checkpoint()["unsettled"]) == 3  # kept, in order, to be settled
    ledger.down = False
    clock.advance(3)  # the ledger is tried again a little later
    run.handle(ModelRequest("m", max_tokens=100, input_tokens=1_000))  # settles first
    run.handle(ModelResponse("m", input_tokens=1_000, output_tokens=100))
    # Three responses of $0.002 each, every one in the shared budget, none twice.
    assert spent(ledger, "team") == {"nano_usd": 6_000_000, "tool_calls": 1}
    assert run.usage.cost == Decimal("0.006")
    assert run.checkpoint()["unsettled"] == []


def test_a_run_ending_soon_after_the_ledger_is_back_settles_what_it_spent_meanwhile() -> None:
    ledger = Flaky()
    guard = Guard(
        max_turns(10, key="team"),
        ledger=ledger,
        on_ledger_error="open",
        live=True,
        heartbeat=60.0,
        clock=FakeClock(),
    )
    with guard.run("task") as run:
        run.turn()
        ledger.down = True
        run.turn()  # under the local limits alone, to be settled
        run.turn()
        ledger.down = False  # back, and the run ends before it would try the ledger again
    assert run.outcome is not None
    assert run.outcome.status is Status.COMPLETED
    assert spent(ledger, "team") == {"turns": 3}


def test_spends_that_still_cannot_be_settled_as_the_run_ends_are_said() -> None:
    ledger = Flaky()
    guard = Guard(
        max_turns(10, key="team"), ledger=ledger, on_ledger_error="open", live=True, heartbeat=60.0
    )

    def through_an_outage_that_outlasts_the_run() -> None:
        with guard.run("task") as run:
            run.turn()
            ledger.down = True
            run.turn()
            run.turn()

    with pytest.warns(
        RuntimeWarning,
        match=r"2 spend\(s\) made while the ledger was unreachable could not be settled as "
        r"the run ended \(connection refused\); the shared budgets will not count them",
    ):
        through_an_outage_that_outlasts_the_run()
    assert spent(ledger, "team") == {"turns": 1}


def test_shared_limits_refuse_what_cannot_be_shared() -> None:
    with pytest.raises(InvalidValueError, match=r"max_turns\(per\)"):
        max_turns(3, per="day")
    with pytest.raises(InvalidValueError, match=r"max_cost\(shadow\)"):
        max_cost("1", key="k", shadow=True)
    with pytest.raises(InvalidValueError, match=r"max_turns\(tz\).*IANA"):
        max_turns(3, key="k", tz="Mars/Olympus")
    with pytest.raises(InvalidValueError, match=r"max_turns\(key\)"):
        max_turns(3, key="")
    assert repr(max_cost("20", key="team-a", per="day", tz="Europe/Paris")) == (
        "max_cost('20', key='team-a', per='day', tz='Europe/Paris')"
    )
