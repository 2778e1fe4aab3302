"""``--suggest`` for ``stuck()``: thresholds fitted to an agent's own solved and failed runs, the
share of solved runs they cut with a Wilson interval, and the profile file they are written to."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_audit_replay import TablePricer, _run

from haltwise.audit.replay import RunResult, replay
from haltwise.audit.suggest import (
    STUCK_SCALES,
    format_stuck_suggestion,
    profile_document,
    stuck_candidates,
    stuck_thresholds,
    suggest_stuck,
    wilson_interval,
)
from haltwise.cli import main
from haltwise.engine.detectors import DEFAULTS, load_profile, stuck

GOOD = [str(Path(__file__).parent / "data" / name) for name in ("swe-agent", "tau")]


def _replayed(solved_retries: int, solved: int = 30, failed: int = 10) -> list[list[RunResult]]:
    """Solved runs that each retry one command ``solved_retries`` times, then finish; failed
    runs that loop on one command 30 times."""
    pricer = TablePricer()
    per_scale: list[list[RunResult]] = [[] for _ in STUCK_SCALES]
    runs = []
    for index in range(solved):
        steps = [(f"cat f{index}_{step}", f"content {index} {step}") for step in range(4)]
        steps += [("make build", "waiting for the lock")] * solved_retries
        steps += [(f"cat done{index}", f"built {index}")]
        runs.append(_run(steps, resolved=True))
    for index in range(failed):
        steps = [(f"cat g{index}", f"x {index}")] + [("pytest", "1 failed in 0.2s")] * 30
        runs.append(_run(steps))
    for run in runs:
        for index, result in enumerate(replay(run, stuck_candidates(), pricer=pricer)):
            per_scale[index].append(result)
    return per_scale


def test_the_defaults_scaled_by_one_are_the_defaults() -> None:
    assert stuck_thresholds(1.0) == DEFAULTS
    tight, loose = stuck_thresholds(STUCK_SCALES[0]), stuck_thresholds(STUCK_SCALES[-1])
    for name, value in DEFAULTS.items():
        low, high = tight[name], loose[name]
        if value is None:
            assert low is None and high is None
        else:
            assert low is not None and high is not None
            assert low <= value <= high


def test_an_agent_that_never_retries_gets_the_tightest_thresholds() -> None:
    fitted = suggest_stuck(_replayed(solved_retries=1))
    assert fitted is not None
    assert fitted.scale == STUCK_SCALES[0]
    assert fitted.solved_cut == 0
    assert fitted.within_budget
    assert fitted.saved_tokens > 0


def test_an_agent_whose_solved_runs_retry_a_lot_gets_looser_thresholds() -> None:
    fitted = suggest_stuck(_replayed(solved_retries=6))
    assert fitted is not None
    assert fitted.scale > 1.0
    assert fitted.solved_cut == 0
    assert fitted.low == 0.0 and 0 < fitted.high < 0.15
    assert fitted.saved_tokens > 0  # the failed runs' 30 repeats are still stopped
    assert "solved runs (0.0%, 95% interval 0.0% to" in format_stuck_suggestion(fitted)


def test_too_few_solved_runs_give_no_stuck_suggestion() -> None:
    assert suggest_stuck(_replayed(solved_retries=1, solved=5)) is None
    assert "no suggestion" in format_stuck_suggestion(None)


def test_the_profile_written_is_the_one_stuck_loads(tmp_path: Path) -> None:
    fitted = suggest_stuck(_replayed(solved_retries=6))
    assert fitted is not None
    path = tmp_path / "profile.json"
    path.write_text(json.dumps(profile_document(fitted)), encoding="utf-8")
    assert load_profile(path) == fitted.thresholds
    loaded = {repr(leaf) for leaf in stuck(profile=path).leaves()}
    assert loaded == {repr(leaf) for leaf in stuck(**fitted.thresholds).leaves()}  # type: ignore[arg-type]


@given(st.integers(0, 400), st.integers(1, 400))
def test_the_wilson_interval_holds_the_share(successes: int, n: int) -> None:
    successes = min(successes, n)
    low, high = wilson_interval(successes, n)
    assert 0.0 <= low <= successes / n <= high <= 1.0


def test_write_profile_needs_suggest(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["audit", *GOOD, "--write-profile", "p.json", "--no-progress"]) == 2
    assert "--write-profile needs --suggest" in capsys.readouterr().err


def test_too_few_runs_write_no_profile(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "p.json"
    code = main(["audit", *GOOD, "--suggest", "--write-profile", str(path), "--no-progress"])
    assert code == 0
    captured = capsys.readouterr()
    assert "stuck() fitted to these runs" in captured.out
    assert "no profile written" in captured.err
    assert not path.exists()
