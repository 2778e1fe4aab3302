"""Replay of recorded runs, the totals it reports, the --limits parser, and --suggest."""

from __future__ import annotations

import json
import math
from decimal import Decimal
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from haltwise.audit.expr import parse_limits, scaled
from haltwise.audit.readers import read_paths
from haltwise.audit.replay import RunResult, replay
from haltwise.audit.report import Totals, format_table, run_record
from haltwise.audit.runs import Run, RunMeta
from haltwise.audit.suggest import quantile_interval, suggest
from haltwise.engine.detectors import stuck
from haltwise.engine.errors import InvalidValueError
from haltwise.engine.events import (
    ModelRequest,
    ModelResponse,
    RunEnded,
    RunStarted,
    ToolCall,
    ToolResult,
    TurnEnded,
    TurnStarting,
)
from haltwise.engine.limits import max_cost, max_turns

DATA = Path(__file__).parent / "data"


class TablePricer:
    """$1 per 1,000 tokens for "priced-model"; nothing else has a price."""

    def cost(
        self,
        model: str,
        *,
        input_tokens: int,
        output_tokens: int,
        cache_read_tokens: int = 0,
        cache_write_tokens: int = 0,
    ) -> Decimal | None:
        if model != "priced-model":
            return None
        return Decimal(input_tokens + output_tokens) / 1000

    def describe_missing(self, model: str) -> str:
        return f"give {model} a price"


def _run(
    steps: list[tuple[str, str]], *, model: str = "priced-model", resolved: bool = False
) -> Run:
    events: list[object] = [RunStarted(prompt="p", run_id="r")]
    for index, (command, output) in enumerate(steps):
        events += [
            TurnStarting(),
            ModelRequest(model=model),
            ModelResponse(
                model=model, input_tokens=100 * (index + 1), output_tokens=10, tool_calls=1
            ),
            ToolCall("bash", {"command": command}, call_id=str(index)),
            ToolResult("bash", output, call_id=str(index)),
            TurnEnded(),
        ]
    events.append(RunEnded())
    meta = RunMeta(
        run_id="r",
        corpus="c",
        model=model,
        source="memory",
        format="haltwise",
        resolved=resolved,
        exit_status="exit_cost",
        ended_on_limit=True,
    )
    return Run(meta, events)  # type: ignore[arg-type]


LOOP = [("ls", "a b")] + [("make", "make: *** Error 2")] * 9


def test_where_the_run_would_have_stopped_and_what_that_saves() -> None:
    (result,) = replay(_run(LOOP), [stuck()], pricer=TablePricer())
    assert result.steps == 10
    # Warned at the 4th step (3rd make), refused the 5th, stopped at the 6th.
    assert result.warn_step == 4
    assert result.blocked == 1
    assert result.stop_step == 6
    assert result.stop_reason == "stuck.repeat"
    assert result.onset_step == 2
    assert result.steps_after_onset == 4
    assert result.saved_steps == 4
    spent = sum(100 * step + 10 for step in range(1, 7))
    total = sum(100 * step + 10 for step in range(1, 11))
    assert result.tokens == total
    assert result.saved_tokens == total - spent
    assert result.cost == Decimal(total) / 1000
    assert result.saved_cost == Decimal(total - spent) / 1000
    assert len(result.tokens_by_step) == 10


def test_a_run_that_never_trips_saves_nothing() -> None:
    steps = [(f"cat part{index}.txt", f"part {index}: something new") for index in range(8)]
    (result,) = replay(_run(steps, resolved=True), [stuck()], pricer=TablePricer())
    assert result.stop_step is None
    assert result.saved_steps == result.saved_tokens == 0
    assert result.saved_cost == 0


def test_a_stop_before_a_turn_saves_that_turn() -> None:
    (result,) = replay(_run(LOOP), [max_turns(3)], pricer=TablePricer())
    assert result.stop_step == 3
    assert result.stop_reason == "turn_limit"
    assert result.saved_steps == 7


def test_several_sets_of_limits_in_one_pass() -> None:
    results = replay(_run(LOOP), [stuck(), max_turns(2), max_turns(50)], pricer=TablePricer())
    assert [result.stop_step for result in results] == [6, 2, None]


def test_unknown_cost_is_unknown_never_zero() -> None:
    (result,) = replay(_run(LOOP, model="mystery"), [stuck()], pricer=TablePricer())
    assert result.cost is None
    assert result.saved_cost is None
    record = run_record(result)
    assert record["cost"] is None
    assert record["saved_cost"] is None


def test_a_cost_limit_on_an_unpriced_model_is_reported_per_run() -> None:
    (result,) = replay(_run(LOOP, model="mystery"), [max_cost("1")], pricer=TablePricer())
    assert result.error is not None
    assert "mystery" in result.error
    totals = Totals()
    totals.add(result)
    assert totals.errors == 1


def test_totals_separate_solved_cuts_from_savings_on_unsolved_runs() -> None:
    pricer = TablePricer()
    results = [
        *replay(_run(LOOP, resolved=False), [stuck()], pricer=pricer),
        *replay(_run(LOOP, resolved=True), [stuck()], pricer=pricer),
    ]
    totals = Totals()
    for result in results:
        totals.add(result)
    assert totals.solved_cut == 1
    assert totals.unsolved.stopped == 1
    assert totals.on_limit.saved_steps == 4
    record = totals.record()
    assert record["solved_cut"] == 1
    assert record["unsolved_on_limit"]["saved_steps"] == 4
    assert record["stop_reasons"] == {"stuck.repeat": 2}
    table = format_table([("all", totals)])
    assert "1/1" in table


def test_the_fixture_corpus_replays() -> None:
    pricer = TablePricer()
    results: list[RunResult] = []
    for item in read_paths([DATA]):
        if isinstance(item, Run):
            results += replay(item, [stuck()], pricer=pricer)
    stopped = {result.meta.run_id.split("/")[-1] for result in results if result.stopped}
    assert {"demo__repo-1", "demo__mini-1", "support-42", "log-2", "task7-trial1"} <= stopped
    assert "demo__repo-2" not in stopped  # scrolling through a file is progress


# --------------------------------------------------------------------------------------------
# --limits


@pytest.mark.parametrize(
    "text",
    [
        "stuck()",
        "max_turns(30) | stuck()",
        "max_cost('2.00') & timeout(minutes=30)",
        "stuck(repeat=4, no_progress=None) | repeats(2, polling_tools={'tail'})",
        "max_turns(unlimited) | cycles(2, max_period=12)",
    ],
)
def test_limit_expressions_parse_and_echo(text: str) -> None:
    assert repr(parse_limits(text)) == text.replace("'", "'")


@pytest.mark.parametrize(
    "text",
    [
        "__import__('os').system('true')",
        "open('x')",
        "max_turns(30) + 1",
        "stuck().leaves()",
        "max_turns(*[3])",
        "[max_turns(3)]",
        "lambda: 1",
        "max_turns(",
        "max_turns(-1)",
    ],
)
def test_anything_else_is_refused_with_the_valid_forms(text: str) -> None:
    with pytest.raises(InvalidValueError):
        parse_limits(text)


def test_thresholds_scale() -> None:
    doubled = scaled("max_turns(30) | stuck()", 2)
    assert doubled.startswith("max_turns(60) | stuck(repeat=6, same_error=6, same_tool_error=8")
    assert scaled("max_cost('2.00')", 0.5) == "max_cost('1.00')"
    assert scaled("repeats(3)", 0.1) == "repeats(2)"  # never below what the factory accepts
    assert scaled("stuck(cycle=None)", 2).count("cycle") == 1
    parse_limits(scaled("stuck() | max_turns(25)", 0.5))


def _profile(tmp_path: Path, thresholds: dict[str, int | None]) -> str:
    path = tmp_path / "profile.json"
    path.write_text(json.dumps({"stuck": thresholds}), encoding="utf-8")
    return str(path)


def _leaves(text: str) -> set[str]:
    return {repr(leaf) for leaf in parse_limits(text).leaves()}


def test_a_profile_is_scaled_not_the_defaults(tmp_path: Path) -> None:
    path = _profile(tmp_path, {"repeat": 6, "same_error": 5, "no_progress": 7, "cycle": None})
    doubled = scaled(f"stuck(profile={path!r})", 2)
    assert "profile" not in doubled  # every threshold is spelled out instead
    assert _leaves(doubled) == _leaves(
        "stuck(repeat=12, same_error=10, same_tool_error=8, cycle=None, scattered=8, "
        "no_progress=14, monologue=16, degenerate=20)"
    )
    assert not any(leaf.startswith("cycles(") for leaf in _leaves(doubled))  # off stays off


def test_a_threshold_given_in_the_call_wins_over_the_profile(tmp_path: Path) -> None:
    path = _profile(tmp_path, {"repeat": 6, "no_progress": 7, "monologue": 12, "paging": 8})
    text = f"stuck(profile={path!r}, repeat=5, no_progress=None, window=10)"
    assert _leaves(scaled(text, 2)) == _leaves(
        "stuck(repeat=10, same_error=6, same_tool_error=8, cycle=4, scattered=8, "
        "no_progress=None, monologue=24, degenerate=20, paging=16, window=10)"
    )


def test_a_scaled_profile_threshold_equal_to_the_default_is_kept(tmp_path: Path) -> None:
    """With ``profile=`` kept, ``repeat=3`` (the default) would bring the file's 4 back."""
    path = _profile(tmp_path, {"repeat": 4})
    assert "repeats(3)" in _leaves(scaled(f"stuck(profile={path!r})", 0.75))


def test_a_profile_threshold_is_scaled_down_to_its_own_minimum(tmp_path: Path) -> None:
    path = _profile(tmp_path, {"no_progress": 1, "monologue": 1})
    halved = _leaves(scaled(f"stuck(profile={path!r})", 0.5))
    assert {"no_progress(1)", "monologue(1)"} <= halved


@pytest.mark.parametrize(
    "call",
    [
        "stuck()",
        "stuck(cycle=None, paging=5)",
        "stuck(profile={path!r})",
        "stuck(profile={path!r}, repeat=3, same_error=None)",  # 3 is the default: the file's
        "stuck(profile={path!r}, repeat=8, paging=None, window=10)",
        "stuck(profile=None, scattered=6) | max_turns(30)",
    ],
)
def test_scaled_by_one_replays_as_written(tmp_path: Path, call: str) -> None:
    """The sweep's point scaled by 1 is the audit's own result: the same detectors as ``stuck()``
    resolves the expression to, profile and all."""
    path = _profile(tmp_path, {"repeat": 5, "same_error": 6, "cycle": None, "paging": 9})
    text = call.format(path=path)
    assert _leaves(scaled(text, 1.0)) == _leaves(text)


def test_a_profile_that_cannot_be_loaded_is_left_for_the_parser(tmp_path: Path) -> None:
    text = f"stuck(profile={str(tmp_path / 'missing.json')!r})"
    assert scaled(text, 2) == text
    with pytest.raises(InvalidValueError, match="missing.json"):
        parse_limits(scaled(text, 2))


def test_an_expression_that_does_not_parse_is_left_for_the_parser() -> None:
    assert scaled("max_turns(", 2) == "max_turns("


# --------------------------------------------------------------------------------------------
# --suggest


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(1, 500), min_size=20, max_size=300), st.sampled_from([0.5, 0.9, 0.95]))
def test_the_quantile_lies_inside_its_interval(values: list[int], q: float) -> None:
    point, low, high = quantile_interval([float(value) for value in values], q)
    assert low <= point <= high
    ordered = sorted(values)
    assert point == ordered[max(1, math.ceil(q * len(values))) - 1]
    assert sum(1 for value in values if value <= point) >= q * len(values)


def test_suggestions_come_from_solved_runs() -> None:
    pricer = TablePricer()
    results = []
    for length in range(5, 35):
        steps = [(f"cat f{index}", f"content {index}") for index in range(length)]
        results += replay(_run(steps, resolved=True), [stuck()], pricer=pricer)
    results += replay(_run([(f"cat g{i}", f"x {i}") for i in range(80)]), [stuck()], pricer=pricer)
    found = {item.measure: item for item in suggest(results)}
    assert set(found) == {"turns", "tokens", "dollars"}
    turns = found["turns"]
    assert turns.expression == "max_turns(33)"
    assert turns.solved_cut <= 0.05 * turns.solved_runs + 1
    assert turns.unsolved_saved > 0
    assert found["dollars"].expression.startswith("max_cost('")


def test_too_few_solved_runs_give_no_suggestion() -> None:
    pricer = TablePricer()
    results = replay(_run([("ls", "a")], resolved=True), [stuck()], pricer=pricer)
    assert suggest(results) == []
