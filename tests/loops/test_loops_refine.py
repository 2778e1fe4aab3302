"""``refine(n)``: build, test, review, fix; decaying strictness; best effort at the bound."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from haltwise import InvalidValueError, MemoryLedger, Status
from haltwise.loops import Issue, Review, Step, convergence, refine
from haltwise.testing import FakeClock


def build(step: Step) -> str:
    return "v1"


def bump(changes: str, issues: tuple[Issue, ...], step: Step) -> str:
    return f"v{int(changes[1:]) + 1}"


def test_a_clean_review_is_accepted_at_once() -> None:
    result = refine(3).run(build, lambda c, s: [], bump, clock=FakeClock())

    assert result.status is Status.COMPLETED
    assert result.value == "v1"
    assert result.iterations == 1
    assert result.outcome.message == "Accepted at iteration 1 of 3 (strictness 'all')."


def test_failing_tests_are_fixed_before_any_review() -> None:
    reviewed: list[str] = []

    def test(changes: str, step: Step) -> list[str]:
        return ["test_add"] if changes == "v1" else []

    def review(changes: str, step: Step) -> list[str]:
        reviewed.append(changes)
        return []

    result = refine(3).run(build, review, bump, test=test, clock=FakeClock())

    assert result.value == "v2"
    assert reviewed == ["v2"]
    first = result.history[0]
    assert first.label == "test"
    assert first.issues == (Issue("test_add", "critical"),)
    assert first.metrics == {"failing_tests": 1.0, "issues": 1.0}


@pytest.mark.parametrize(
    ("test_result", "passes"),
    [(True, True), (None, True), ([], True), (False, False), ("test_x failed", False)],
)
def test_what_a_test_callback_may_return(test_result: Any, passes: bool) -> None:
    result = refine(1).run(build, lambda c, s: [], bump, test=lambda c, s: test_result)
    assert result.ok
    assert (result.status is Status.COMPLETED) is passes


def test_strictness_decays_so_lesser_issues_stop_blocking() -> None:
    def review(changes: str, step: Step) -> list[Issue]:
        return [Issue("naming", "minor"), Issue("long function", "significant")]

    result = refine(3).run(build, review, bump, clock=FakeClock())

    assert [iteration.strictness for iteration in result.history] == [
        "all",
        "significant",
        "critical",
    ]
    assert result.status is Status.COMPLETED
    assert result.iterations == 3
    assert "2 lesser issues left" in result.outcome.message


def test_the_schedule_is_settable() -> None:
    result = refine(3, strictness=("critical",)).run(
        build, lambda c, s: ["style"], bump, clock=FakeClock()
    )
    assert result.iterations == 1
    assert result.status is Status.COMPLETED


def test_a_review_is_capped_to_its_most_severe_issues() -> None:
    def review(changes: str, step: Step) -> list[Issue]:
        return [Issue(f"minor {n}", "minor") for n in range(20)] + [Issue("crash", "critical")]

    result = refine(1, max_issues=3).run(build, review, bump, clock=FakeClock())

    issues = result.history[0].issues
    assert len(issues) == 3
    assert issues[0] == Issue("crash", "critical")


def test_the_best_effort_is_the_candidate_with_the_fewest_issues() -> None:
    counts = {"v1": 3, "v2": 1, "v3": 2}

    def review(changes: str, step: Step) -> list[Issue]:
        return [Issue(f"{changes} flaw {n}", "critical") for n in range(counts[changes])]

    result = refine(3).run(build, review, bump, clock=FakeClock())

    assert result.status is Status.COMPLETED_WITH_WARNINGS
    assert result.reason == "iteration_limit"
    assert result.value == "v2"
    assert "from iteration 2" in result.outcome.message
    assert "1 issue left: v2 flaw 0 (critical)" in result.outcome.message
    assert result.outcome.suggestions[0].startswith("Fix what is left by hand")
    assert result.outcome.checkpoint is not None


def test_a_failing_fix_judges_the_same_candidate_again() -> None:
    fixes: list[int] = []

    def fix(changes: str, issues: tuple[Issue, ...], step: Step) -> str:
        fixes.append(step.number)
        if step.number == 1:
            raise RuntimeError("merge conflict")
        return "v9"

    def review(changes: str, step: Step) -> list[Issue]:
        return [] if changes == "v9" else [Issue(f"flaw {step.number}", "critical")]

    result = refine(3).run(build, review, fix, clock=FakeClock())

    assert result.value == "v9"
    assert result.history[0].error == "fix raised RuntimeError: merge conflict"
    assert result.history[1].summary == "v1"  # judged again
    assert fixes == [1, 2]


def test_raising_builds_reviews_and_tests_are_failed_iterations() -> None:
    calls: list[str] = []

    def flaky_build(step: Step) -> str:
        calls.append(f"build {step.number}")
        if step.number == 1:
            raise OSError("disk full")
        return "v1"

    def flaky_test(changes: str, step: Step) -> list[str]:
        calls.append(f"test {step.number}")
        if step.number == 2:
            raise RuntimeError("pytest crashed")
        return []

    def flaky_review(changes: str, step: Step) -> list[str]:
        calls.append(f"review {step.number}")
        return []

    result = refine(3).run(flaky_build, flaky_review, bump, test=flaky_test, clock=FakeClock())

    assert calls == ["build 1", "build 2", "test 2", "test 3", "review 3"]
    assert [iteration.label for iteration in result.history] == ["build", "test", "review"]
    assert result.history[0].error == "OSError: disk full"
    assert result.history[1].error == "test raised RuntimeError: pytest crashed"
    assert result.value == "v1"
    assert result.status is Status.COMPLETED


def test_nothing_built_abandons_with_the_errors() -> None:
    def broken(step: Step) -> str:
        raise ValueError(f"bad spec {step.number}")

    result = refine(3).run(broken, lambda c, s: [], bump, clock=FakeClock())

    assert result.status is Status.ABANDONED
    assert result.reason == "iteration_limit"
    assert result.value is None
    assert "nothing built" in result.outcome.message
    assert result.iterations == 3


def test_the_same_build_error_three_times_is_convergence() -> None:
    def broken(step: Step) -> str:
        raise ValueError("bad spec")

    result = refine(5).run(broken, lambda c, s: [], bump, clock=FakeClock())

    assert result.status is Status.ABANDONED
    assert result.reason == "converged.same_issues"
    assert result.iterations == 3


def test_a_metric_that_stops_improving_ends_the_loop_early() -> None:
    changed = iter([120, 118, 117, 116, 115])

    def review(changes: str, step: Step) -> Review:
        return Review(
            [Issue(f"flaw {step.number}", "critical")], metrics={"lines_changed": next(changed)}
        )

    loop = refine(5, converge=convergence(metric="lines_changed"))
    result = loop.run(build, review, bump, clock=FakeClock())

    assert result.reason == "converged.no_improvement"
    assert result.iterations == 3
    assert "lines_changed went from 120 to 117" in result.outcome.message


def test_resume_goes_on_with_the_saved_candidate() -> None:
    ledger = MemoryLedger()
    critic = {"v1": ["a"], "v2": ["b"], "v3": ["c"], "v4": []}

    def review(changes: str, step: Step) -> list[Issue]:
        return [Issue(text, "critical") for text in critic[changes]]

    first = refine(2, ledger=ledger).run(build, review, bump, clock=FakeClock())
    assert first.reason == "iteration_limit"
    assert first.outcome.checkpoint is not None

    built: list[int] = []

    def no_rebuild(step: Step) -> str:
        built.append(step.number)
        return "v1"

    more = refine(5, ledger=ledger)
    result = more.resume(first.outcome.checkpoint, no_rebuild, review, bump, clock=FakeClock())

    assert built == []
    assert result.value == "v4"
    assert [iteration.number for iteration in result.history] == [1, 2, 3, 4]


def test_resume_rebuilds_a_candidate_that_could_not_be_stored() -> None:
    ledger = MemoryLedger()

    class Changes:
        pass

    first = refine(1, ledger=ledger).run(
        lambda step: Changes(), lambda c, s: [Issue("x", "critical")], lambda c, i, s: c
    )
    assert first.outcome.checkpoint is not None
    built: list[int] = []

    def rebuild(step: Step) -> Changes:
        built.append(step.number)
        return Changes()

    result = refine(2, ledger=ledger).resume(
        first.outcome.checkpoint, rebuild, lambda c, s: [], lambda c, i, s: c
    )

    assert built == [2]
    assert result.status is Status.COMPLETED


def test_dump_and_load_store_any_candidate() -> None:
    ledger = MemoryLedger()
    loop = refine(1, ledger=ledger, dump=lambda c: sorted(c), load=set)
    first = loop.run(lambda s: {"b", "a"}, lambda c, s: ["x"], lambda c, i, s: c)
    assert first.outcome.checkpoint is not None
    assert ledger.load_checkpoint(first.outcome.checkpoint)["values"]["candidate"] == ["a", "b"]

    seen: list[Any] = []

    def review(changes: set[str], step: Step) -> list[str]:
        seen.append(changes)
        return []

    refine(2, ledger=ledger, dump=sorted, load=set).resume(
        first.outcome.checkpoint, lambda s: set(), review, lambda c, i, s: c
    )
    assert seen == [{"a", "b"}]


def test_async_callbacks_are_awaited_and_sync_ones_mixed_in() -> None:
    async def abuild(step: Step) -> str:
        await asyncio.sleep(0)
        return "v1"

    async def areview(changes: str, step: Step) -> list[str]:
        return [] if changes == "v2" else ["flaw"]

    result = asyncio.run(refine(3).arun(abuild, areview, bump, clock=FakeClock()))

    assert result.value == "v2"


@pytest.mark.parametrize(
    ("kwargs", "source"),
    [
        ({"max_iterations": 0}, "refine(max_iterations)"),
        ({"strictness": ()}, "refine(strictness)"),
        ({"strictness": ("lenient",)}, "refine(strictness)"),
        ({"max_issues": 0}, "refine(max_issues)"),
        ({"converge": 3}, "refine(converge)"),
    ],
)
def test_invalid_settings_are_refused(kwargs: dict[str, Any], source: str) -> None:
    with pytest.raises(InvalidValueError, match=source.replace("(", r"\(").replace(")", r"\)")):
        refine(**kwargs)


def test_repr_echoes_the_factory() -> None:
    assert repr(refine()) == "refine(3)"
    assert repr(refine(5, strictness=("all", "critical"), converge=None)) == (
        "refine(5, strictness=('all', 'critical'), converge=None)"
    )
