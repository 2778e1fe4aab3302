"""The governor's checks, policies and outcomes, event by event."""

from __future__ import annotations

import threading
from decimal import Decimal
from typing import Any

import pytest

from haltwise import (
    CONTINUE,
    Answer,
    Ask,
    Block,
    Choice,
    ConfigurationError,
    Governor,
    MemoryLedger,
    ModelRequest,
    ModelResponse,
    Prices,
    RunEnded,
    RunStarted,
    Status,
    Stop,
    ToolCall,
    ToolResult,
    TurnEnded,
    TurnStarting,
    UnpricedModelError,
    Warn,
    max_cost,
    max_model_calls,
    max_tokens,
    max_tool_calls,
    max_turns,
    timeout,
)
from haltwise.engine.errors import LedgerError, QuestionOpen
from haltwise.engine.ledger import Budget
from haltwise.engine.limits import Limit
from haltwise.testing import FakeClock


def governed(limits: Limit, clock: FakeClock | None = None) -> Governor:
    governor = Governor(limits, clock=clock or FakeClock())
    assert governor.handle(RunStarted("task")) is CONTINUE
    return governor


def test_model_calls_would_exceed_before_the_call_is_sent() -> None:
    governor = governed(max_model_calls(2))
    assert governor.handle(ModelRequest("gpt-4o")) is CONTINUE
    assert governor.handle(ModelRequest("gpt-4o")) is CONTINUE
    stop = governor.handle(ModelRequest("gpt-4o"))
    assert isinstance(stop, Stop)
    assert stop.outcome.reason == "model_call_limit"
    assert (
        stop.outcome.message
        == "Model calls limit reached: 2 of 2 model calls used (max_model_calls(2))"
    )
    assert stop.provider_called is False
    assert governor.usage.model_calls == 2


def test_tool_budget_refuses_the_next_call_before_it_runs() -> None:
    governor = governed(max_tool_calls(2))
    for _ in range(2):
        assert governor.handle(ToolCall("grep", {"q": "x"})) is CONTINUE
    stop = governor.handle(ToolCall("grep", {"q": "y"}))
    assert isinstance(stop, Stop)
    assert stop.outcome.reason == "tool_call_limit"
    assert "2 of 2 tool calls" in stop.outcome.message
    assert governor.usage.tool_calls == 2


def test_per_tool_cap_blocks_only_that_tool() -> None:
    governor = governed(max_tool_calls(1, tool="web_search") | max_tool_calls(10))
    assert governor.handle(ToolCall("web_search", {"q": "a"})) is CONTINUE
    block = governor.handle(ToolCall("web_search", {"q": "b"}))
    assert isinstance(block, Block)
    assert "Budget for web_search spent: 1 of 1" in block.reason
    assert governor.handle(ToolCall("read_file", {"path": "a"})) is CONTINUE
    assert governor.usage.tool_calls == 2


def test_tokens_exceeded_after_usage_arrives_with_the_numbers() -> None:
    governor = governed(max_tokens(output=100))
    decision = governor.handle(ModelResponse("gpt-4o", input_tokens=10, output_tokens=59))
    assert decision is CONTINUE
    stop = governor.handle(ModelResponse("gpt-4o", input_tokens=10, output_tokens=59))
    assert isinstance(stop, Stop)
    assert stop.outcome.message == (
        "Exceeded the output token limit of 100: output_tokens=118 (max_tokens(output=100))"
    )
    assert stop.provider_called is True
    assert governor.usage.output_tokens == 118  # nothing lost


def test_tokens_would_exceed_when_none_are_left() -> None:
    governor = governed(max_tokens(100))
    governor.handle(ModelResponse("gpt-4o", input_tokens=60, output_tokens=40))
    stop = governor.handle(ModelRequest("gpt-4o"))
    assert isinstance(stop, Stop)
    assert "total_tokens=100 has reached the limit of 100" in stop.outcome.message


def test_cost_reserves_the_worst_case_of_max_tokens() -> None:
    prices = Prices({"house-model": {"input": "1000000", "output": "1000000"}})  # $1 a token
    governor = Governor(max_cost("10"), clock=FakeClock(), pricer=prices)
    governor.handle(RunStarted())
    assert governor.handle(ModelRequest("house-model", max_tokens=4, input_tokens=5)) is CONTINUE
    stop = governor.handle(ModelRequest("house-model", max_tokens=6, input_tokens=5))
    assert isinstance(stop, Stop)
    assert stop.outcome.reason == "cost_limit"
    assert "could cost up to $11.00" in stop.outcome.message


def test_cost_exceeded_after_usage_uses_the_pricer_and_decimal() -> None:
    prices = Prices({"house-model": {"input": "1000000", "output": "2000000"}})
    governor = Governor(max_cost("5.00", warn_at=0.5), clock=FakeClock(), pricer=prices)
    governor.handle(RunStarted())
    warn = governor.handle(ModelResponse("house-model", input_tokens=1, output_tokens=1))
    assert isinstance(warn, Warn)
    assert warn.message == "$3.00 of $5.00 spent: $2.00 left; wrap up soon."
    stop = governor.handle(ModelResponse("house-model", input_tokens=1, output_tokens=1))
    assert isinstance(stop, Stop)
    assert stop.outcome.message == (
        "Exceeded the cost limit of $5.00: $6.00 spent (max_cost('5.00', warn_at=0.5))"
    )
    assert stop.outcome.cost == Decimal("6")


def test_billed_cost_is_used_as_given() -> None:
    governor = governed(max_cost("1"))
    governor.handle(ModelResponse("anything", cost=Decimal("0.25")))
    assert governor.usage.cost == Decimal("0.25")


def test_an_unpriced_model_with_a_cost_limit_is_a_configuration_error() -> None:
    governor = governed(max_cost("1"))
    with pytest.raises(UnpricedModelError, match="no price is known for model 'my-local-llama'"):
        governor.handle(ModelResponse("my-local-llama", input_tokens=10, output_tokens=5))
    assert governor.usage.input_tokens == 10  # counted before the error
    assert governor.usage.cost is None  # unknown, never $0


def test_an_unpriced_model_without_a_cost_limit_is_cost_unknown() -> None:
    governor = governed(max_turns(5))
    governor.handle(ModelResponse("my-local-llama", input_tokens=10, output_tokens=5))
    assert governor.usage.cost is None


def test_timeout_starts_with_the_run_not_at_construction() -> None:
    clock = FakeClock()
    governor = Governor(timeout(minutes=1), clock=clock)
    clock.advance(3600)
    governor.handle(RunStarted())
    clock.advance(59)
    assert governor.handle(TurnStarting()) is CONTINUE
    clock.advance(1)
    stop = governor.handle(TurnStarting())
    assert isinstance(stop, Stop)
    assert stop.outcome.status is Status.TIMED_OUT
    assert stop.outcome.reason == "time_limit"
    assert stop.outcome.message == "Time limit of 60.0s reached: 60.0s elapsed (timeout(minutes=1))"


def test_session_scope_counts_across_prompts() -> None:
    governor = governed(max_turns(3, scope="session"))
    governor.handle(TurnStarting())
    governor.handle(TurnStarting())
    governor.handle(RunStarted("second prompt"))
    assert governor.handle(TurnStarting()) is CONTINUE
    assert isinstance(governor.handle(TurnStarting()), Stop)


def test_all_of_trips_only_when_every_part_has() -> None:
    prices = Prices({"m": {"input": "1000000", "output": "0"}})
    governor = Governor(max_turns(2) & max_cost("3"), clock=FakeClock(), pricer=prices)
    governor.handle(RunStarted())
    for _ in range(4):
        assert governor.handle(TurnStarting()) is CONTINUE
    governor.handle(ModelResponse("m", input_tokens=3))
    stop = governor.handle(TurnStarting())
    assert isinstance(stop, Stop)
    assert "Turn limit reached: 4 of 2" in stop.outcome.message


def test_synthesize_policy_and_the_final_outcome() -> None:
    governor = governed(max_tool_calls(1, on_limit="synthesize"))
    governor.handle(ToolCall("search", {"q": "a"}))
    stop = governor.handle(ToolCall("search", {"q": "b"}))
    assert isinstance(stop, Stop)
    assert stop.synthesize
    outcome = governor.synthesized("Probably 42; the second search did not run.")
    assert outcome.status is Status.COMPLETED_WITH_WARNINGS
    assert outcome.partial_output == "Probably 42; the second search did not run."


def test_the_synthesis_pass_is_admitted_once_and_every_request_after_it_refused() -> None:
    """One tools-free pass answers from the evidence; more requests (other threads' calls,
    a loop that goes on) would spend what the limit was there to save."""
    governor = governed(max_model_calls(2, on_limit="synthesize"))
    for _ in range(2):
        governor.handle(ModelRequest("", max_tokens=100, input_tokens=100))
        governor.handle(ModelResponse("", 100, 100))
    stop = governor.handle(ModelRequest("", max_tokens=100, input_tokens=100))
    assert isinstance(stop, Stop) and stop.synthesize
    assert governor.handle(ModelRequest("", max_tokens=100, input_tokens=100)) is CONTINUE
    assert governor.handle(ModelResponse("", 100, 60)) is CONTINUE
    for _ in range(3):
        refused = governor.handle(ModelRequest("", max_tokens=100, input_tokens=100))
        assert isinstance(refused, Stop)
        assert not refused.synthesize  # no pass of its own
        assert refused.outcome is stop.outcome
    assert governor.usage.model_calls == 3
    outcome = governor.synthesized("From the evidence: 42.")
    assert outcome.status is Status.COMPLETED_WITH_WARNINGS
    assert outcome.usage.model_calls == 3
    assert outcome.usage.output_tokens == 100 + 100 + 60


def test_a_claimed_synthesis_pass_is_admitted_only_to_its_synthesizer() -> None:
    """A driver whose synthesizer makes the pass claims it: a request from another thread,
    made after the stop, cannot take its place."""
    governor = governed(max_model_calls(1, on_limit="synthesize"))
    governor.claim_synthesis()
    governor.handle(ModelRequest("", max_tokens=10))
    stop = governor.handle(ModelRequest("", max_tokens=10))
    assert isinstance(stop, Stop) and stop.synthesize
    stray = governor.handle(ModelRequest("", max_tokens=10))
    assert isinstance(stray, Stop) and not stray.synthesize
    assert governor.synthesis_request(ModelRequest("", max_tokens=10)) is CONTINUE
    again = governor.synthesis_request(ModelRequest("", max_tokens=10))
    assert isinstance(again, Stop) and not again.synthesize
    assert governor.usage.model_calls == 2
    governor.handle(RunStarted("next"))  # a claim is for one run
    governor.handle(ModelRequest("", max_tokens=10))
    governor.handle(ModelRequest("", max_tokens=10))
    assert governor.handle(ModelRequest("", max_tokens=10)) is CONTINUE


class Unreachable(MemoryLedger):
    """A memory ledger that fails to save checkpoints while ``down``."""

    down = False

    def save_checkpoint(self, run_id: str, data: dict[str, Any]) -> str:
        if self.down:
            raise LedgerError("connection refused")
        return super().save_checkpoint(run_id, data)


def stopped_for_synthesis(
    answer: str | None, ledger: MemoryLedger | None = None, *, early: bool = False
) -> tuple[Governor, Stop]:
    """A run stopped by ``max_model_calls(2, on_limit="synthesize")`` after two calls (100 in,
    100 out each), whose tools-free pass was sent and answered (100 in, 60 out) with
    ``answer``, or, with None, with a tool call. ``early``: a third request was sent before
    the stop, and is still unanswered."""
    governor = Governor(max_model_calls(3, on_limit="synthesize"), clock=FakeClock(), ledger=ledger)
    governor.handle(RunStarted("task", "r1"))
    for number in range(2):
        governor.handle(ModelRequest("", max_tokens=100, input_tokens=100, request_id=f"{number}"))
        governor.handle(ModelResponse("", 100, 100, text="Partial: 41.", request_id=f"{number}"))
    if early:
        governor.handle(ModelRequest("", max_tokens=100, input_tokens=100, request_id="early"))
    else:
        governor.handle(ModelRequest("", max_tokens=100, input_tokens=100, request_id="2"))
        governor.handle(ModelResponse("", 100, 100, request_id="2"))
    stop = governor.handle(ModelRequest("", max_tokens=100, input_tokens=100))
    assert isinstance(stop, Stop) and stop.synthesize
    synthesis = ModelRequest("", max_tokens=100, input_tokens=100, request_id="pass")
    assert governor.handle(synthesis) is CONTINUE
    calls = 1 if answer is None else 0
    response = ModelResponse("", 100, 60, text=answer, tool_calls=calls, request_id="pass")
    assert governor.handle(response) is CONTINUE
    return governor, stop


def saved_counts(governor: Governor, checkpoint: str | None) -> tuple[int, int]:
    """The model calls and output tokens of the run in the checkpoint ``checkpoint``."""
    assert checkpoint is not None
    run = governor.ledger.load_checkpoint(checkpoint)["run"]
    return run["model_calls"], run["output_tokens"]


def test_a_synthesis_pass_with_no_answer_leaves_the_stop_counting_the_pass() -> None:
    """The model answered the tools-free pass with a tool call (or blanks, or the call
    failed): there is no answer, and the stop stands. Its outcome, and the checkpoint saved
    at the stop, count the pass's model call, so that a run resumed from it cannot spend that
    call twice; no second pass is admitted."""
    governor, stop = stopped_for_synthesis(None)
    assert saved_counts(governor, stop.outcome.checkpoint) == (3, 300)  # before the pass

    outcome = governor.synthesis_unanswered()

    assert outcome.status is Status.ABANDONED
    assert outcome.reason == "model_call_limit"
    assert outcome.message == stop.outcome.message
    assert outcome.partial_output == "Partial: 41."
    assert outcome.checkpoint == stop.outcome.checkpoint
    usage = outcome.usage
    assert (usage.model_calls, usage.input_tokens, usage.output_tokens) == (4, 400, 360)
    assert governor.outcome == outcome
    assert saved_counts(governor, outcome.checkpoint) == (4, 360)
    refused = governor.handle(ModelRequest("", max_tokens=100))
    assert isinstance(refused, Stop) and not refused.synthesize
    assert refused.outcome == outcome
    assert governor.synthesis_unanswered() == outcome  # closed once: it stays as it is
    resumed = Governor(max_model_calls(5), clock=FakeClock(), ledger=governor.ledger)
    resumed.restore(str(outcome.checkpoint))
    assert resumed.usage.model_calls == 4


def test_a_synthesized_answer_and_its_checkpoint_count_the_pass() -> None:
    governor, stop = stopped_for_synthesis("From the evidence: 42.")

    outcome = governor.synthesized("From the evidence: 42.")

    assert outcome.status is Status.COMPLETED_WITH_WARNINGS
    assert outcome.usage.model_calls == 4
    assert outcome.checkpoint == stop.outcome.checkpoint
    assert saved_counts(governor, outcome.checkpoint) == (4, 360)


def test_a_call_answered_after_an_unanswered_pass_counts_in_the_outcome_too() -> None:
    governor, stop = stopped_for_synthesis(None, early=True)
    governor.synthesis_unanswered()

    late = governor.handle(ModelResponse("", 100, 10, request_id="early"))

    assert isinstance(late, Stop)
    assert late.outcome.reason == stop.outcome.reason
    assert late.outcome.usage.output_tokens == 200 + 60 + 10
    assert governor.outcome == late.outcome
    assert saved_counts(governor, late.outcome.checkpoint) == (4, 270)


def test_a_checkpoint_the_ledger_cannot_bring_up_to_date_is_said_once_not_raised() -> None:
    ledger = Unreachable()
    governor, stop = stopped_for_synthesis(None, ledger, early=True)
    ledger.down = True

    outcome = governor.synthesis_unanswered()
    late = governor.handle(ModelResponse("", 100, 10, request_id="early"))

    assert outcome.usage.model_calls == 4
    behind = " Its checkpoint could not be brought up to date: connection refused."
    assert outcome.message == stop.outcome.message + behind
    assert isinstance(late, Stop) and late.outcome.message == outcome.message
    assert late.outcome.usage.output_tokens == 270
    ledger.down = False
    assert saved_counts(governor, outcome.checkpoint) == (3, 200)  # the one saved at the stop
    assert governor.checkpoint()["run"]["output_tokens"] == 270  # the governor has them


def test_an_event_while_a_question_is_open_raises_question_open_with_the_question() -> None:
    governor = governed(max_turns(0, on_limit="ask"))
    ask = governor.handle(TurnStarting())
    assert isinstance(ask, Ask)
    with pytest.raises(QuestionOpen, match="still unanswered") as raised:
        governor.handle(ToolCall("search", {}))
    assert raised.value.ask is ask
    assert isinstance(raised.value, ConfigurationError)
    assert governor.resolve(ask, True) is CONTINUE


def test_deadline_listeners_hear_when_the_deadline_moves() -> None:
    clock = FakeClock()
    governor = governed(max_turns(5), clock)
    heard: list[float | None] = []
    unsubscribe = governor.on_deadline(lambda: heard.append(governor.deadline()))
    governor.set_limit(max_turns(9))  # no deadline moved
    governor.set_limit(timeout(seconds=30))
    governor.set_limit(timeout(seconds=60))
    unsubscribe()
    governor.set_limit(timeout(seconds=90))
    assert heard == [30.0, 60.0]


def test_best_effort_finishes_with_warnings_and_the_partial_output() -> None:
    governor = governed(max_turns(1, on_limit="best_effort"))
    governor.handle(TurnStarting())
    governor.handle(TurnEnded("a draft answer"))
    stop = governor.handle(TurnStarting())
    assert isinstance(stop, Stop)
    assert stop.outcome.status is Status.COMPLETED_WITH_WARNINGS
    assert stop.outcome.partial_output == "a draft answer"


def test_wrap_up_asks_the_driver_to_synthesize() -> None:
    governor = governed(max_turns(1, on_limit="ask"))
    governor.handle(TurnStarting())
    ask = governor.handle(TurnStarting())
    assert isinstance(ask, Ask)
    stop = governor.resolve(ask, Choice.WRAP_UP)
    assert isinstance(stop, Stop)
    assert stop.synthesize


def test_cancel_from_another_thread_stops_the_next_event() -> None:
    governor = governed(max_turns(10))
    thread = threading.Thread(target=governor.cancel, args=("user pressed stop",))
    thread.start()
    thread.join()
    stop = governor.handle(TurnStarting())
    assert isinstance(stop, Stop)
    assert stop.outcome.status is Status.CANCELLED
    assert stop.outcome.message == "The run was cancelled: user pressed stop."


def test_completed_run_outcome() -> None:
    governor = governed(max_turns(10))
    governor.handle(TurnStarting())
    stop = governor.handle(RunEnded("done"))
    assert isinstance(stop, Stop)
    assert stop.outcome.status is Status.COMPLETED
    assert stop.outcome.partial_output == "done"
    assert stop.outcome.checkpoint is None


def test_a_child_cannot_escape_its_parents_budget() -> None:
    parent = governed(max_tool_calls(3))
    child = parent.child(max_tool_calls(10))
    child.handle(RunStarted("sub-task"))
    parent.handle(ToolCall("a"))
    assert child.handle(ToolCall("b")) is CONTINUE
    assert child.handle(ToolCall("c")) is CONTINUE
    stop = child.handle(ToolCall("d"))
    assert isinstance(stop, Stop)
    assert stop.outcome.reason == "tool_call_limit"
    assert parent.usage.tool_calls == 3
    assert child.usage.tool_calls == 2


def test_a_child_may_be_tighter_than_its_parent() -> None:
    parent = governed(max_tool_calls(10))
    child = parent.child(max_tool_calls(1))
    child.handle(RunStarted())
    assert child.handle(ToolCall("a")) is CONTINUE
    assert isinstance(child.handle(ToolCall("b")), Stop)
    assert parent.handle(ToolCall("c")) is CONTINUE


def test_checkpoint_and_restore_keep_the_counts() -> None:
    ledger = MemoryLedger()
    governor = Governor(max_turns(3), clock=FakeClock(), ledger=ledger)
    governor.handle(RunStarted("long task", run_id="r1"))
    for _ in range(3):
        governor.handle(TurnStarting())
    governor.handle(ToolResult("grep", "found"))
    stop = governor.handle(TurnStarting())
    assert isinstance(stop, Stop)
    assert stop.outcome.checkpoint == "memory:r1"
    assert any("memory:r1" in text for text in stop.outcome.suggestions)

    resumed = Governor(max_turns(5), clock=FakeClock(), ledger=ledger)
    resumed.restore("memory:r1")
    assert resumed.run_id == "r1"
    assert resumed.usage.turns == 3
    assert resumed.handle(TurnStarting()) is CONTINUE
    assert resumed.handle(TurnStarting()) is CONTINUE
    assert isinstance(resumed.handle(TurnStarting()), Stop)


def test_shadow_mode_records_and_does_not_enforce() -> None:
    governor = governed(max_turns(1, shadow=True))
    for _ in range(3):
        assert governor.handle(TurnStarting()) is CONTINUE
    assert len(governor.shadow_trips) == 1
    assert governor.shadow_trips[0].limit == "max_turns(1, shadow=True)"


def test_warnings_come_once_per_round() -> None:
    governor = governed(max_turns(4, warn_at=0.5))
    assert governor.handle(TurnStarting()) is CONTINUE
    warn = governor.handle(TurnStarting())
    assert isinstance(warn, Warn)
    assert warn.message == "Turn 2 of 4: 2 turns left; wrap up soon."
    assert governor.handle(TurnStarting()) is CONTINUE


def test_resolve_rejects_a_foreign_ask_and_bad_answers() -> None:
    governor = governed(max_turns(0, on_limit="ask"))
    other = governed(max_turns(0, on_limit="ask"))
    ask = other.handle(TurnStarting())
    mine = governor.handle(TurnStarting())
    assert isinstance(ask, Ask) and isinstance(mine, Ask)
    with pytest.raises(ConfigurationError, match="not this governor's open question"):
        governor.resolve(Ask("?", "turn_limit", "x", owner=governor), True)
    with pytest.raises(ConfigurationError, match="answer="):
        governor.resolve(mine, Choice.EXTEND)
    with pytest.raises(ConfigurationError, match="Answer.amount=0"):
        Answer(Choice.EXTEND, 0)


def test_unknown_events_are_refused_clearly() -> None:
    governor = governed(max_turns(1))
    with pytest.raises(ConfigurationError) as refused:
        governor.handle("TurnStarting")  # type: ignore[arg-type]
    # The module named is one that exists, and the classes are reachable from haltwise itself.
    assert "one of the events in haltwise.engine.events" in str(refused.value)
    assert "haltwise.TurnStarting()" in str(refused.value)


def test_a_childs_own_refusal_spends_nothing_of_its_parents() -> None:
    parent = governed(max_model_calls(10))
    child = parent.child(max_model_calls(1))
    child.handle(RunStarted())
    assert child.handle(ModelRequest("m")) is CONTINUE
    for _ in range(3):
        assert isinstance(child.handle(ModelRequest("m")), Stop)
    assert parent.usage.model_calls == 1
    assert child.usage.model_calls == 1


def test_dollars_are_exact_through_a_continue_a_checkpoint_and_a_restore() -> None:
    # The engine counts money in integer units; what users see stays exact Decimal USD, and a
    # checkpoint keeps a cost limit's round (its baseline and extension) in dollars.
    prices = Prices({"m": {"input": "0.0375", "output": "1.2"}})
    governor = Governor(max_cost("0.001", on_limit="ask"), clock=FakeClock(), pricer=prices)
    governor.handle(RunStarted("task", run_id="c1"))
    billed = Decimal(0)
    for given in (None, Decimal("0.000123456789")):
        governor.handle(ModelRequest("m"))
        response = ModelResponse("m", input_tokens=3_000, output_tokens=700, cost=given)
        ask = governor.handle(response)
        price = prices.cost("m", input_tokens=3_000, output_tokens=700)
        billed += given if given is not None else price  # type: ignore[operator]
        if isinstance(ask, Ask):
            assert governor.resolve(ask, Answer(Choice.EXTEND, 0.0005)) is CONTINUE
    assert governor.usage.cost == billed == Decimal("0.001075956789")
    saved = governor.checkpoint()
    assert saved["run"]["cost"] == "0.001075956789"
    assert saved["slots"][0]["extra"] == "0.0005"
    resumed = Governor(max_cost("0.001", on_limit="ask"), clock=FakeClock(), pricer=prices)
    resumed.restore(saved)
    assert resumed.usage.cost == billed
    (standing,) = resumed.standing()
    assert (standing.used, standing.cap) == (Decimal("0.001075956789"), Decimal("0.0015"))


class _Unreachable(MemoryLedger):
    """A memory ledger whose spends fail while ``down``."""

    down = False

    def charge(self, budget: Budget, amount: int, limit: int) -> Any:
        if self.down:
            raise LedgerError("connection refused")
        return super().charge(budget, amount, limit)

    def spend(self, budget: Budget, amount: int, op_id: str) -> int:
        if self.down:
            raise LedgerError("connection refused")
        return super().spend(budget, amount, op_id)


def _turns_spent(ledger: MemoryLedger) -> int:
    return sum(state.spent for state in ledger.budgets() if state.budget.metric == "turns")


@pytest.mark.parametrize("ending", ["completed", "stopped", "killed"])
def test_a_run_ending_settles_what_it_spent_while_the_ledger_was_down(ending: str) -> None:
    ledger = _Unreachable()
    governor = Governor(
        max_turns(10, key="team"), clock=FakeClock(), ledger=ledger, on_ledger_error="open"
    )
    governor.handle(RunStarted("task", run_id="plain"))
    assert governor.handle(TurnStarting()) is CONTINUE
    ledger.down = True
    assert governor.handle(TurnStarting()) is CONTINUE  # local limits alone: waits to settle
    assert governor.handle(TurnStarting()) is CONTINUE
    assert len(governor.checkpoint()["unsettled"]) == 2
    ledger.down = False  # back, and the run ends before it would try the ledger again
    if ending == "completed":
        stop = governor.handle(RunEnded("done"))
    elif ending == "stopped":
        stop = governor.stop("error", "the agent crashed")
    else:
        governor.kill("enough")
        stop = governor.handle(TurnStarting())
    assert isinstance(stop, Stop)
    assert _turns_spent(ledger) == 3  # no driver settled them: the governor's stop did
    assert governor.checkpoint()["unsettled"] == []
    if stop.outcome.checkpoint is not None:  # and the checkpoint holds none to settle twice
        assert ledger.load_checkpoint(stop.outcome.checkpoint)["unsettled"] == []


def test_settle_waiting_says_what_the_ledger_still_cannot_take() -> None:
    ledger = _Unreachable()
    governor = Governor(
        max_turns(10, key="team"), clock=FakeClock(), ledger=ledger, on_ledger_error="open"
    )
    governor.handle(RunStarted("task"))
    assert governor.settle_waiting() is None  # nothing waits
    ledger.down = True
    governor.handle(TurnStarting())
    error = governor.settle_waiting()
    assert isinstance(error, LedgerError)
    assert str(error) == "connection refused"
    assert len(governor.checkpoint()["unsettled"]) == 1
    ledger.down = False
    assert governor.settle_waiting() is None
    assert (_turns_spent(ledger), governor.checkpoint()["unsettled"]) == (1, [])
