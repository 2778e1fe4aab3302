"""``attempts(n)``: bounded retries that see what went before."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from haltwise import ConfigurationError, InvalidValueError, MemoryLedger, Status
from haltwise.loops import Issue, Review, Step, attempts, convergence
from haltwise.testing import FakeClock


def test_the_first_accepted_attempt_wins() -> None:
    result = attempts(3, accept=lambda value: value >= 2).run(
        lambda step: step.number, clock=FakeClock()
    )

    assert result.status is Status.COMPLETED
    assert result.reason == "completed"
    assert result.value == 2
    assert result.iterations == 2
    assert result.outcome.checkpoint is None
    assert result.outcome.message == "Attempt 2 of 3 was accepted."
    assert result.outcome.limit is None


def test_without_a_judge_whatever_returns_is_accepted() -> None:
    result = attempts(3).run(lambda step: "spec", clock=FakeClock())
    assert result.ok
    assert result.value == "spec"


def test_each_attempt_sees_what_went_before() -> None:
    seen: list[list[str]] = []

    def generate(step: Step) -> str:
        seen.append([str(issue) for done in step.history for issue in done.issues])
        return "spec" + "!" * step.number

    def accept(spec: str) -> str | bool:
        return True if spec.endswith("!!!") else f"{spec} is incomplete"

    result = attempts(5, accept=accept).run(generate, clock=FakeClock())

    assert result.value == "spec!!!"
    assert seen == [[], ["spec! is incomplete"], ["spec! is incomplete", "spec!! is incomplete"]]


def test_a_raising_attempt_is_a_failed_attempt_not_a_crash() -> None:
    def flaky(step: Step) -> str:
        if step.number < 3:
            raise TimeoutError(f"provider timed out ({step.number})")
        return "ok"

    result = attempts(3).run(flaky, clock=FakeClock())

    assert result.value == "ok"
    assert [iteration.failed for iteration in result.history] == [True, True, False]
    assert result.history[0].error == "TimeoutError: provider timed out (1)"


def test_exhausted_attempts_list_everything_that_was_tried() -> None:
    def generate(step: Step) -> str:
        if step.number == 2:
            raise ValueError("bad JSON")
        return f"draft {step.number}"

    result = attempts(3, accept=lambda draft: ["no acceptance tests"]).run(
        generate, clock=FakeClock()
    )

    assert result.status is Status.ABANDONED
    assert result.reason == "attempts_exhausted"
    assert result.tried == (
        "attempt 1: draft 1 -> no acceptance tests",
        "attempt 2 -> raised ValueError: bad JSON",
        "attempt 3: draft 3 -> no acceptance tests",
    )
    assert "Tried:" in result.outcome.message
    assert result.outcome.limit == "attempts(3, accept=<lambda>)"
    assert result.outcome.partial_output == "draft 3"
    assert result.outcome.suggestions[0].startswith("Address what the last attempt lacked")
    assert result.outcome.suggestions[-1] == f"Resume from checkpoint {result.outcome.checkpoint}"


@pytest.mark.parametrize(
    ("verdict", "accepted", "issues"),
    [
        (True, True, []),
        (None, True, []),
        (False, False, ["not accepted"]),
        ("too vague", False, ["too vague"]),
        ([], True, []),
        (["a", Issue("b", "critical")], False, ["a", "b (critical)"]),
        (Review(["c"], metrics={"loc": 3}), False, ["c"]),
    ],
)
def test_what_a_judge_may_return(verdict: Any, accepted: bool, issues: list[str]) -> None:
    result = attempts(1, accept=lambda _: verdict).run(lambda step: 1, clock=FakeClock())
    assert result.ok is accepted
    assert [str(issue) for issue in result.history[0].issues] == issues


def test_a_judge_that_raises_or_returns_nonsense_rejects_the_attempt() -> None:
    def judge(value: int) -> Any:
        if value == 1:
            raise RuntimeError("judge crashed")
        return 42  # not a verdict

    result = attempts(2, accept=judge).run(lambda step: step.number, clock=FakeClock())

    assert result.reason == "attempts_exhausted"
    assert result.history[0].error == "accept raised RuntimeError: judge crashed"
    assert result.history[1].error == "accept returned 42, which is not a verdict"
    assert result.history[1].summary == "2"


def test_convergence_gives_up_early_on_the_same_error() -> None:
    calls: list[int] = []

    def broken(step: Step) -> str:
        calls.append(step.number)
        raise KeyError("spec")

    result = attempts(10, converge=convergence()).run(broken, clock=FakeClock())

    assert calls == [1, 2, 3]
    assert result.status is Status.ABANDONED
    assert result.reason == "converged.same_issues"
    assert "KeyError" in result.outcome.message


def test_the_bound_wins_over_convergence_at_the_last_attempt() -> None:
    result = attempts(3, accept=lambda _: "same", converge=convergence()).run(
        lambda step: 0, clock=FakeClock()
    )
    assert result.reason == "attempts_exhausted"


def test_resume_goes_on_from_the_checkpoint() -> None:
    ledger = MemoryLedger()
    first = attempts(2, accept=lambda v: v == "yes", ledger=ledger).run(
        lambda step: "no", clock=FakeClock()
    )
    assert first.outcome.checkpoint is not None
    data = ledger.load_checkpoint(first.outcome.checkpoint)
    json.dumps(data)  # JSON-compatible
    assert data["kind"] == "attempts"
    assert data["values"]["last"] == "no"

    numbers: list[int] = []

    def again(step: Step) -> str:
        numbers.append(step.number)
        assert len(step.history) == step.number - 1
        return "yes" if step.number == 4 else "no"

    more = attempts(5, accept=lambda v: v == "yes", ledger=ledger)
    result = more.resume(first.outcome.checkpoint, again, clock=FakeClock())

    assert numbers == [3, 4]
    assert result.value == "yes"
    assert result.iterations == 4


def test_async_attempts_and_judges_are_awaited() -> None:
    async def generate(step: Step) -> int:
        await asyncio.sleep(0)
        return step.number

    async def accept(value: int) -> bool:
        await asyncio.sleep(0)
        return value == 2

    result = asyncio.run(attempts(3, accept=accept).arun(generate, clock=FakeClock()))

    assert result.value == 2
    assert result.iterations == 2


def test_an_async_callback_in_a_sync_run_is_refused_without_a_warning() -> None:
    async def generate(step: Step) -> int:
        return 1

    with pytest.raises(ConfigurationError, match="arun"):
        attempts(3).run(generate, clock=FakeClock())


@pytest.mark.parametrize("n", [0, -1, True, 1.5, "3"])
def test_invalid_attempt_counts_are_refused(n: Any) -> None:
    with pytest.raises(InvalidValueError, match="attempts"):
        attempts(n)


def test_repr_echoes_the_factory() -> None:
    def is_spec_complete(value: object) -> bool:
        return True

    assert repr(attempts(3)) == "attempts(3)"
    assert (
        repr(attempts(2, accept=is_spec_complete, converge=convergence(same_issues=2)))
        == "attempts(2, accept=is_spec_complete, converge=convergence(same_issues=2))"
    )
