"""``simplify(n)``: simplification passes that stop at diminishing returns."""

from __future__ import annotations

from typing import Any

import pytest

from haltwise import InvalidValueError, MemoryLedger, Status
from haltwise.loops import Step, simplify
from haltwise.testing import FakeClock


def shrink_to(*sizes: int) -> Any:
    """A simplifier whose passes produce code of these sizes, in order."""
    queue = list(sizes)

    def simplify_pass(code: list[str], step: Step) -> list[str]:
        return ["line"] * queue.pop(0)

    return simplify_pass


def test_stops_at_diminishing_returns_and_keeps_the_small_gain() -> None:
    result = simplify(5).run(["line"] * 100, shrink_to(80, 78, 50), len, clock=FakeClock())

    assert result.status is Status.COMPLETED
    assert result.reason == "converged.no_improvement"
    assert result.iterations == 2
    assert result.value is not None and len(result.value) == 78
    assert "size went from 100 to 78" in result.outcome.message


def test_stops_after_its_passes() -> None:
    result = simplify(2).run(["line"] * 100, shrink_to(50, 25), len, clock=FakeClock())

    assert result.reason == "iteration_limit"
    assert result.status is Status.COMPLETED
    assert result.value is not None and len(result.value) == 25


def test_a_worse_proposal_is_not_kept() -> None:
    result = simplify(3).run(["line"] * 10, shrink_to(12), len, clock=FakeClock())

    assert result.value is not None and len(result.value) == 10
    assert result.reason == "converged.no_improvement"
    assert not result.history[0].accepted


def test_too_small_to_bother() -> None:
    calls: list[int] = []

    def never(code: list[str], step: Step) -> list[str]:
        calls.append(step.number)
        return code

    result = simplify(2, min_size=10, metric="lines").run(["x"] * 5, never, len)

    assert calls == []
    assert result.status is Status.COMPLETED
    assert result.outcome.message == "Too small to simplify: lines=5 is below 10."


def test_failing_passes_keep_the_candidate_and_warn() -> None:
    def broken(code: str, step: Step) -> str:
        raise RuntimeError("model refused")

    result = simplify(2).run("code", broken, len, clock=FakeClock())

    assert result.value == "code"
    assert result.status is Status.COMPLETED_WITH_WARNINGS
    assert [iteration.error for iteration in result.history] == [
        "RuntimeError: model refused",
        "RuntimeError: model refused",
    ]


def test_an_unmeasurable_proposal_is_a_failed_pass() -> None:
    def measure(code: str) -> Any:
        return len(code) if code == "long code" else "short"

    result = simplify(1).run("long code", lambda code, step: "x", measure)

    assert result.value == "long code"
    assert result.history[0].error == "measure returned short, not a number"


def test_an_unmeasurable_input_is_returned_as_is() -> None:
    def measure(code: str) -> int:
        raise ValueError("cannot parse")

    result = simplify(2).run("code", lambda code, step: code, measure)

    assert result.value == "code"
    assert result.reason == "measure_failed"
    assert result.status is Status.COMPLETED_WITH_WARNINGS


def test_resume_carries_the_best_candidate_and_its_size() -> None:
    ledger = MemoryLedger()

    def broken(code: str, step: Step) -> str:
        raise RuntimeError("x")

    first = simplify(1, ledger=ledger).run("aaaa", lambda code, step: "aaa", len)
    assert first.reason == "iteration_limit"
    assert first.outcome.checkpoint is None  # completed: nothing to resume
    warned = simplify(1, ledger=ledger).run("aaaa", broken, len)
    assert warned.outcome.checkpoint is not None

    result = simplify(3, ledger=ledger).resume(
        warned.outcome.checkpoint, "ignored", lambda code, step: code[:-1], len
    )
    assert result.value == "aa"


@pytest.mark.parametrize(
    "kwargs",
    [{"max_passes": 0}, {"min_size": -1}, {"metric": ""}, {"min_improvement": 2}],
)
def test_invalid_settings_are_refused(kwargs: dict[str, Any]) -> None:
    with pytest.raises(InvalidValueError, match="simplify"):
        simplify(**kwargs)


def test_repr() -> None:
    assert repr(simplify()) == "simplify(2)"
    assert repr(simplify(3, min_size=10, metric="lines")) == (
        "simplify(3, min_size=10, metric='lines')"
    )
