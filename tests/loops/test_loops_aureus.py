"""The AUREUS document's own termination tests ("Verification: Test Cases for Termination"),
as haltwise loops, with a fake clock: nothing here sleeps."""

from __future__ import annotations

from dataclasses import dataclass, field

from haltwise import Governor, ModelRequest, ModelResponse, RunStarted, Status, timeout
from haltwise.loops import Issue, Iteration, Step, attempts, convergence, refine
from haltwise.testing import FakeClock


@dataclass
class Specification:
    success_criteria: list[str] = field(default_factory=list)
    max_loc: int = 0
    acceptance_tests: list[str] = field(default_factory=list)
    risk_level: str | None = None


def is_spec_complete(spec: Specification) -> bool:
    return (
        len(spec.success_criteria) > 0
        and spec.max_loc > 0
        and len(spec.acceptance_tests) > 0
        and spec.risk_level is not None
    )


def test_spec_generation_terminates_after_max_attempts() -> None:
    """GVUFD gives up after 3 failed spec generations (test_gvufd_terminates_after_max_attempts)."""
    calls: list[int] = []

    def generate(step: Step) -> Specification:
        # An ambiguous intent that can't be spec'd: every attempt is incomplete.
        calls.append(step.number)
        return Specification(success_criteria=["does something"])

    result = attempts(3, accept=is_spec_complete).run(generate, clock=FakeClock())

    assert calls == [1, 2, 3]  # tried exactly 3 times
    assert result.status is Status.ABANDONED
    assert result.reason == "attempts_exhausted"
    assert result.value is None
    assert len(result.tried) == 3
    assert result.outcome.suggestions  # what to try next
    assert result.outcome.checkpoint is not None


def test_refine_loop_terminates_after_max_iterations_and_still_returns() -> None:
    """UVUAS stops refining after 3 iterations (test_uvuas_terminates_after_max_iterations)."""
    reviews: list[str] = []

    def build(step: Step) -> str:
        return "impossible v0"

    def review(changes: str, step: Step) -> list[Issue]:
        # A critic that is never happy, with something new and critical each time.
        reviews.append(step.strictness)
        return [Issue(f"critical flaw #{step.number}", "critical")]

    def fix(changes: str, issues: tuple[Issue, ...], step: Step) -> str:
        return f"impossible v{step.number}"

    result = refine(3).run(build, review, fix, clock=FakeClock())

    assert result.iterations == 3  # stopped at the limit
    assert reviews == ["all", "significant", "critical"]  # strictness decays
    assert result.status is Status.COMPLETED_WITH_WARNINGS  # not perfect...
    assert result.reason == "iteration_limit"
    assert result.value is not None  # ...but returned anyway: the best effort
    assert result.ok


def test_session_terminates_on_timeout() -> None:
    """The session stops when its time is up (test_session_terminates_on_timeout)."""
    clock = FakeClock()
    session = Governor(timeout(1, scope="session"), clock=clock)

    def very_complex_task(step: Step) -> str:
        agent = step.governor  # the agent inside reports to a child of the session
        agent.handle(RunStarted("very complex task"))
        agent.handle(ModelRequest("some-model"))
        clock.advance(0.4)
        agent.handle(ModelResponse("some-model", input_tokens=100, output_tokens=10, cost=None))
        return "not good enough"

    result = attempts(10, accept=lambda _: False).run(very_complex_task, governor=session)

    assert result.status is Status.TIMED_OUT
    assert result.reason == "time_limit"
    assert result.outcome.usage.elapsed >= 1.0  # hit the timeout
    assert result.iterations == 3  # 0.4s each: the fourth never started
    assert result.outcome.usage.model_calls == 3
    assert result.outcome.checkpoint is not None


def test_convergence_detector_identifies_stuck_state() -> None:
    """The detector sees the same issue three times (test_convergence_detector_identifies_...)."""
    detector = convergence()
    history = [
        Iteration(1, issues=(Issue("god_object"),), metrics={"loc": 100}),
        Iteration(2, issues=(Issue("god_object"),), metrics={"loc": 100}),
        Iteration(3, issues=(Issue("god_object"),), metrics={"loc": 100}),
    ]

    assert detector.is_stuck(history)
    found = detector.check(history)
    assert found is not None
    assert found.reason == "converged.same_issues"
    assert "god_object" in found.message
    assert not detector.is_stuck(history[:2])


def test_refine_loop_stops_early_when_the_same_issue_comes_back() -> None:
    """The same detector inside a refine loop: stopped at 3 of 10, with the best effort."""
    result = refine(10).run(
        lambda step: "v0",
        lambda changes, step: [Issue("god_object", "critical")],
        lambda changes, issues, step: changes + "'",
        clock=FakeClock(),
    )

    assert result.iterations == 3
    assert result.reason == "converged.same_issues"
    assert result.status is Status.COMPLETED_WITH_WARNINGS
    assert result.value is not None
