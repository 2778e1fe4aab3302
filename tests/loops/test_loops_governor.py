"""Loops and the core engine: session limits, cancellation, questions, notes, checkpoints."""

from __future__ import annotations

import asyncio
import sys
import threading
from decimal import Decimal
from typing import Any

import pytest

from haltwise import (
    Answer,
    Ask,
    Choice,
    ConfigurationError,
    Governor,
    HaltSignal,
    MemoryLedger,
    ModelRequest,
    ModelResponse,
    RunCancelled,
    RunStarted,
    Status,
    Stop,
    max_model_calls,
    max_tokens,
    max_turns,
    timeout,
)
from haltwise.engine.errors import error_for
from haltwise.loops import Step, attempts, refine
from haltwise.testing import FakeClock


def spend(step: Step, *, tokens: int = 100, cost: str = "0.01", start: bool = True) -> None:
    """An agent inside the loop: one model call, reported to the step's child governor."""
    agent = step.governor
    if start:
        agent.handle(RunStarted("agent"))
    decision = agent.handle(ModelRequest("m"))
    if isinstance(decision, Stop):
        raise error_for(decision.outcome)
    agent.handle(ModelResponse("m", input_tokens=tokens, output_tokens=0, cost=Decimal(cost)))


def test_cancel_from_a_callback_stops_the_loop_at_its_next_step() -> None:
    session = Governor(clock=FakeClock())

    def attempt(step: Step) -> str:
        if step.number == 2:
            session.cancel("the user pressed stop")
        return "draft"

    result = attempts(5, accept=lambda _: False).run(attempt, governor=session)

    assert result.status is Status.CANCELLED
    assert result.reason == "cancelled"
    assert result.iterations == 2
    assert "the user pressed stop" in result.outcome.message
    assert result.outcome.checkpoint is not None


def test_cancel_from_another_thread() -> None:
    session = Governor(clock=FakeClock())
    started = threading.Event()
    cancelled = threading.Event()

    def canceller() -> None:
        started.wait(5)
        session.cancel()
        cancelled.set()

    thread = threading.Thread(target=canceller)
    thread.start()

    def attempt(step: Step) -> str:
        started.set()
        cancelled.wait(5)
        return "x"

    result = attempts(100, accept=lambda _: False).run(attempt, governor=session)
    thread.join()

    assert result.status is Status.CANCELLED
    assert result.iterations == 1


def test_cancelled_during_the_last_attempt_says_cancelled_not_exhausted() -> None:
    session = Governor(clock=FakeClock())

    def attempt(step: Step) -> str:
        session.cancel()
        raise RuntimeError("interrupted by the cancel")

    result = attempts(1).run(attempt, governor=session)

    assert result.status is Status.CANCELLED
    assert result.history[0].error == "RuntimeError: interrupted by the cancel"


def test_an_agent_refused_by_the_session_ends_the_loop_with_the_session_reason() -> None:
    session = Governor(max_tokens(250, scope="session"), clock=FakeClock())

    def build(step: Step) -> str:
        spend(step)
        return f"v{step.number}"

    result = refine(10, converge=None).run(
        build, lambda c, s: ["flaw"], lambda c, i, s: build(s), governor=session
    )

    assert result.status is Status.ABANDONED
    assert result.reason == "token_limit"
    assert result.value is not None  # the best effort is kept
    # The third request is refused before it is sent: its prompt alone would pass the limit.
    assert result.outcome.usage.total_tokens == 200
    assert "best effort is kept" in result.outcome.message


def test_step_limits_bound_one_pass_without_ending_the_loop() -> None:
    session = Governor(clock=FakeClock())
    refusals: list[str] = []

    def attempt(step: Step) -> str:
        spend(step)
        try:
            spend(step, start=False)  # a second call in the same run: over the step's limit
        except Exception as error:
            refusals.append(type(error).__name__)
            raise
        return "never"

    loop = attempts(3, step_limits=max_model_calls(1))
    result = loop.run(attempt, governor=session)

    assert refusals == ["ModelCallLimitExceeded"] * 3
    assert result.reason == "attempts_exhausted"
    assert result.history[0].error is not None
    assert "model_call_limit" in result.history[0].error
    assert session.stopped is None  # the session goes on
    assert repr(loop) == "attempts(3, step_limits=max_model_calls(1))"


def test_the_outcome_counts_what_the_loop_spent() -> None:
    session = Governor(clock=FakeClock())
    session.handle(RunStarted("session"))
    session.handle(ModelRequest("m"))
    session.handle(ModelResponse("m", input_tokens=1000, cost=Decimal("1")))

    def attempt(step: Step) -> str:
        spend(step, tokens=10, cost="0.25")
        return "ok"

    run_id = session.run_id
    result = attempts(1).run(attempt, governor=session)

    assert session.run_id == run_id  # a loop inside a run does not start another
    assert result.outcome.usage.model_calls == 1
    assert result.outcome.usage.input_tokens == 10
    assert result.outcome.usage.cost == Decimal("0.25")
    assert session.usage.model_calls == 2


def test_a_session_already_stopped_runs_nothing() -> None:
    clock = FakeClock()
    session = Governor(timeout(1, scope="session"), clock=clock)
    session.handle(RunStarted("session"))
    clock.advance(2)
    calls: list[int] = []

    result = attempts(3).run(lambda step: calls.append(step.number), governor=session)

    assert calls == []
    assert result.status is Status.TIMED_OUT
    assert result.iterations == 0


def test_a_limit_that_asks_goes_to_the_prompter() -> None:
    clock = FakeClock()
    session = Governor(timeout(10, scope="session", on_limit="ask"), clock=clock)
    questions: list[str] = []

    def prompter(ask: Ask) -> Answer:
        questions.append(ask.question)
        return Answer(Choice.EXTEND, 100)

    def attempt(step: Step) -> int:
        clock.advance(6)
        return step.number

    result = attempts(4, accept=lambda n: n == 4).run(attempt, governor=session, prompter=prompter)

    assert result.value == 4
    assert len(questions) == 1
    assert questions[0].startswith("This run has taken")


@pytest.mark.parametrize("answer", [None, Choice.ABORT, False, "whatever", Choice.EXTEND])
def test_no_answer_or_a_refusal_stops_the_loop(answer: Any) -> None:
    clock = FakeClock()
    session = Governor(timeout(10, scope="session", on_limit="ask"), clock=clock)

    def attempt(step: Step) -> int:
        clock.advance(6)
        return step.number

    result = attempts(4, accept=lambda n: False).run(
        attempt, governor=session, prompter=lambda ask: answer
    )

    assert not result.ok
    assert result.reason in ("time_limit", "declined")
    assert result.iterations == 2


def test_a_raising_prompter_is_no_answer() -> None:
    clock = FakeClock()
    session = Governor(timeout(1, scope="session", on_limit="ask"), clock=clock)

    def prompter(ask: Ask) -> Answer:
        raise EOFError

    def attempt(step: Step) -> int:
        clock.advance(2)
        return 1

    result = attempts(3, accept=lambda n: False).run(attempt, governor=session, prompter=prompter)
    assert result.status is Status.TIMED_OUT


def test_soft_limit_notes_reach_the_next_step() -> None:
    clock = FakeClock()
    session = Governor(timeout(10, scope="session", warn_at=0.5), clock=clock)
    notes: list[list[str]] = []

    def attempt(step: Step) -> int:
        notes.append(list(step.notes))
        clock.advance(3)
        return step.number

    attempts(3, accept=lambda n: False).run(attempt, governor=session)

    assert notes[0] == [] and notes[1] == []
    assert len(notes[2]) == 1 and "wrap up soon" in notes[2][0]


def test_a_halt_signal_from_a_callback_is_a_failed_attempt() -> None:
    stopped = Governor().stop("killed", "killed from the dashboard")

    def attempt(step: Step) -> str:
        raise HaltSignal(RunCancelled(stopped.outcome))

    result = attempts(2).run(attempt, clock=FakeClock())

    assert result.reason == "attempts_exhausted"
    assert result.history[0].error == "HaltSignal (killed): killed from the dashboard"


@pytest.mark.skipif(sys.version_info < (3, 11), reason="exception notes need Python 3.11")
def test_an_interrupt_propagates_after_saving_a_checkpoint() -> None:
    ledger = MemoryLedger()

    def attempt(step: Step) -> str:
        if step.number == 2:
            raise KeyboardInterrupt
        return "draft"

    with pytest.raises(KeyboardInterrupt) as caught:
        attempts(3, accept=lambda _: False, ledger=ledger).run(attempt, clock=FakeClock())

    note = getattr(caught.value, "__notes__")[0]  # noqa: B009 (mypy targets 3.10)
    ref = note.rsplit(" ", 1)[1]
    saved = ledger.load_checkpoint(ref)
    assert saved["reason"] == "interrupted"
    assert len(saved["history"]) == 1

    result = attempts(3, accept=lambda v: v == "fine", ledger=ledger).resume(
        ref, lambda step: "fine", clock=FakeClock()
    )
    assert result.value == "fine"
    assert result.iterations == 2


def test_a_cancelled_task_propagates_after_saving_a_checkpoint() -> None:
    ledger = MemoryLedger()

    async def attempt(step: Step) -> str:
        if step.number == 2:
            raise asyncio.CancelledError
        return "draft"

    async def main() -> None:
        await attempts(3, accept=lambda _: False, ledger=ledger).arun(attempt, clock=FakeClock())

    with pytest.raises(asyncio.CancelledError):
        asyncio.run(main())


def test_resume_with_a_fresh_governor_keeps_the_session_counts() -> None:
    ledger = MemoryLedger()
    clock = FakeClock()
    session = Governor(timeout(10, scope="session"), clock=clock, ledger=ledger)

    def slow(step: Step) -> str:
        clock.advance(4)
        return "draft"

    first = attempts(2, accept=lambda _: False, ledger=ledger).run(slow, governor=session)
    assert first.outcome.checkpoint is not None

    later = Governor(timeout(10, scope="session"), clock=clock, ledger=ledger)
    result = attempts(5, accept=lambda _: False, ledger=ledger).resume(
        first.outcome.checkpoint, slow, governor=later
    )

    assert result.status is Status.TIMED_OUT  # 8s were spent before; 4s more hits 10s
    assert result.iterations == 3
    assert result.outcome.usage.elapsed == pytest.approx(12)


def test_resume_refuses_another_loops_checkpoint() -> None:
    ledger = MemoryLedger()
    first = attempts(1, accept=lambda _: False, ledger=ledger).run(lambda s: 1)
    assert first.outcome.checkpoint is not None
    with pytest.raises(ConfigurationError, match="not a refine loop's"):
        refine(3, ledger=ledger).resume(
            first.outcome.checkpoint, lambda s: 1, lambda c, s: [], lambda c, i, s: c
        )


def test_a_clock_belongs_to_the_governor() -> None:
    with pytest.raises(ConfigurationError, match="give the clock to the Governor"):
        attempts(1).run(lambda s: 1, governor=Governor(), clock=FakeClock())


def test_step_reports_where_the_loop_is() -> None:
    steps: list[str] = []

    def attempt(step: Step) -> int:
        steps.append(f"{step!r} remaining={step.remaining} last={step.last}")
        assert step.previous is (step.history[-1] if step.history else None)
        return 0

    attempts(2, accept=lambda _: False).run(attempt)

    assert steps == [
        "Step(1/2, strictness='all') remaining=1 last=False",
        "Step(2/2, strictness='all') remaining=0 last=True",
    ]


def test_each_pass_is_a_turn_of_the_loops_governor() -> None:
    session = Governor(max_turns(4, scope="session"), clock=FakeClock())
    spec = attempts(3, accept=lambda v: v == 2).run(lambda step: step.number, governor=session)
    assert spec.outcome.usage.turns == 2

    result = refine(5, converge=None).run(
        lambda step: "v", lambda c, s: ["flaw"], lambda c, i, s: c, governor=session
    )

    assert result.reason == "turn_limit"  # two passes left for the session's last loop
    assert result.iterations == 2
    assert session.usage.turns == 4


# -- loops that share one governor concurrently -------------------------------------------------


def spend_each(step: Step) -> str:
    """One model call of 10 tokens and $0.25, reported to the step's child governor."""
    spend(step, tokens=10, cost="0.25")
    return "draft"


def assert_each_counts_its_own(session: Governor, results: dict[int, Any]) -> None:
    """Loop ``n`` made ``n`` passes of one call each; the session counted them all once."""
    for n, result in results.items():
        usage = result.outcome.usage
        assert (usage.turns, usage.model_calls, usage.input_tokens) == (n, n, 10 * n)
        assert usage.cost == Decimal("0.25") * n
    total = session.session_usage
    assert (total.turns, total.model_calls, total.input_tokens) == (6, 6, 60)
    assert total.cost == Decimal("1.50")


def test_loops_sharing_a_governor_in_threads_each_count_what_they_spent() -> None:
    session = Governor(clock=FakeClock())
    # Every loop has spent on its first pass before any goes on: they overlap, whatever the
    # scheduler does.
    together = threading.Barrier(3, timeout=10)
    results: dict[int, Any] = {}

    def attempt(step: Step) -> str:
        spent = spend_each(step)
        if step.number == 1:
            together.wait()
        return spent

    def run(n: int) -> None:
        results[n] = attempts(n, accept=lambda _: False).run(attempt, governor=session)

    threads = [threading.Thread(target=run, args=(n,)) for n in (1, 2, 3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert sorted(results) == [1, 2, 3]
    assert_each_counts_its_own(session, results)


def test_loops_sharing_a_governor_in_tasks_each_count_what_they_spent() -> None:
    session = Governor(clock=FakeClock())
    results: dict[int, Any] = {}

    async def main() -> None:
        started: list[int] = []
        everyone = asyncio.Event()

        async def attempt(step: Step) -> str:
            spent = spend_each(step)
            if step.number == 1:
                started.append(step.limit)
                if len(started) == 3:
                    everyone.set()
                await everyone.wait()
            await asyncio.sleep(0)  # let the other loops run between passes
            return spent

        async def run(n: int) -> None:
            loop = attempts(n, accept=lambda _: False)
            results[n] = await loop.arun(attempt, governor=session)

        await asyncio.gather(*(run(n) for n in (1, 2, 3)))

    asyncio.run(main())

    assert_each_counts_its_own(session, results)


def test_loops_stopped_by_a_limit_they_share_count_only_their_own_calls() -> None:
    session = Governor(max_model_calls(5, scope="session"), clock=FakeClock())
    together = threading.Barrier(3, timeout=10)
    sent: dict[int, int] = {}  # calls each loop's agents got through, by thread
    results: dict[int, Any] = {}

    def attempt(step: Step) -> str:
        spend_each(step)  # a refused call raises: it was not sent
        sent[threading.get_ident()] += 1
        if step.number == 1:
            together.wait()  # three calls sent, one each: two are left for all three loops
        return "draft"

    def run() -> None:
        sent[threading.get_ident()] = 0
        loop = attempts(3, accept=lambda _: False)
        results[threading.get_ident()] = loop.run(attempt, governor=session)

    threads = [threading.Thread(target=run) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert session.session_usage.model_calls == 5
    assert {ident: result.outcome.usage.model_calls for ident, result in results.items()} == sent
    assert sum(sent.values()) == 5


def test_what_a_callback_reports_to_the_shared_governor_itself_is_the_sessions() -> None:
    session = Governor(clock=FakeClock())

    def attempt(step: Step) -> str:
        spend_each(step)
        session.handle(ModelRequest("m"))  # not through step.governor: no loop's own
        session.handle(ModelResponse("m", input_tokens=1000, cost=Decimal("1")))
        return "draft"

    result = attempts(1).run(attempt, governor=session)

    assert result.outcome.usage.model_calls == 1
    assert result.outcome.usage.input_tokens == 10
    assert session.session_usage.model_calls == 2
