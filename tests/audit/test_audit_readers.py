"""Readers of recorded runs: each format, detected per file, becomes the governor's event stream."""

from __future__ import annotations

import json
import re
import tempfile
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from haltwise import (
    Injected,
    ModelResponse,
    RunEnded,
    RunStarted,
    ToolCall,
    ToolResult,
    TurnEnded,
    TurnStarting,
)
from haltwise.audit import readers
from haltwise.audit.readers import _outputs, detect_format, find_files, read_paths
from haltwise.audit.runs import USAGE_ESTIMATED, USAGE_NONE, USAGE_PER_STEP, ReadError, Run

DATA = Path(__file__).parent / "data"


def _runs(path: Path, **options: object) -> list[Run]:
    found = list(read_paths([path], **options))  # type: ignore[arg-type]
    assert all(isinstance(item, Run) for item in found), found
    return [item for item in found if isinstance(item, Run)]


def _kinds(run: Run) -> list[str]:
    return [type(event).__name__ for event in run.events]


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("swe-agent/run1/demo__repo-1.traj", "swe-agent"),
        ("mini/demo__mini-1.traj.json", "mini-swe-agent"),
        ("tau/gpt-4o-airline.json", "tau-bench"),
        ("openai/support-42.json", "openai"),
        ("haltwise/session.jsonl", "haltwise"),
        ("broken/notes.json", None),
    ],
)
def test_formats_are_detected_from_each_file(name: str, kind: str | None) -> None:
    assert detect_format(DATA / name) == kind


def test_sidecar_reports_are_not_taken_for_runs() -> None:
    names = {path.name for path, _ in find_files([DATA / "swe-agent", DATA / "mini"])}
    assert names == {"demo__repo-1.traj", "demo__repo-2.traj", "demo__mini-1.traj.json"}


def test_the_corpus_is_the_first_folder_under_the_path_given() -> None:
    corpora = {corpus for _, corpus in find_files([DATA])}
    assert corpora == {
        "swe-agent",
        "mini",
        "tau",
        "openai",
        "haltwise",
        "broken",
        "transcripts",
        "chat-only",
    }
    assert {corpus for _, corpus in find_files([DATA / "tau" / "gpt-4o-airline.json"])} == {"tau"}


def test_swe_agent_trajectories() -> None:
    runs = {run.meta.run_id: run for run in _runs(DATA / "swe-agent")}
    # The corpus is the first folder under the path given: here "run1".
    looping, solved = runs["demo__repo-1"], runs["demo__repo-2"]
    assert looping.meta.corpus == "run1"
    meta = looping.meta
    assert meta.format == "swe-agent"
    assert meta.model == "gpt-4-0125-preview"  # from args.yaml beside the run
    assert meta.resolved is False
    assert solved.meta.resolved is True  # from final_report.json
    assert meta.exit_status == "exit_cost"
    assert meta.ended_on_limit
    assert meta.usage == USAGE_ESTIMATED
    assert meta.recorded_cost == Decimal("2.1")
    kinds = _kinds(looping)
    assert kinds[0] == "RunStarted"
    assert kinds[-1] == "RunEnded"
    # One turn per step; the harness's "exit_cost" pseudo-step is not a model call.
    assert kinds.count("TurnStarting") == 10
    responses = [event for event in looping.events if isinstance(event, ModelResponse)]
    assert sum(event.input_tokens for event in responses) == 200_000
    assert sum(event.output_tokens for event in responses) == 3_000
    # Later prompts carry the conversation so far: they are spread by prompt size.
    assert responses[-1].input_tokens > responses[0].input_tokens
    calls = [event for event in looping.events if isinstance(event, ToolCall)]
    assert calls[2].name == "find_file"
    assert calls[2].arguments == {"command": 'find_file "Lexer"\n'}


def test_a_model_can_be_named_when_files_do_not() -> None:
    (run,) = _runs(DATA / "tau" / "gpt-4o-airline.json", model="my-model")[:1]
    assert run.meta.model == "my-model"


def test_mini_swe_agent_trajectories() -> None:
    (run,) = _runs(DATA / "mini")
    meta = run.meta
    assert meta.model == "google/gemini-3-pro-preview"
    assert meta.usage == USAGE_PER_STEP
    assert meta.resolved is False
    responses = [event for event in run.events if isinstance(event, ModelResponse)]
    assert len(responses) == 9
    assert responses[0].input_tokens == 1000
    assert responses[0].cost == Decimal("0.003")
    # A format error is a turn with no tool call.
    assert responses[1].tool_calls == 0
    results = [event for event in run.events if isinstance(event, ToolResult)]
    assert results[0].exit_code == 0
    assert results[0].content == "setup.py\nsrc"
    assert results[1].exit_code == 1


#: What a mini-swe-agent message is made of near its output tags.
_MESSAGE_PARTS = st.sampled_from(
    [
        *("<output>", "</output>", "<output_head>", "</output_head>", "<output_tail>"),
        *("</output_tail>", "<output", "</output", "<outputs>", "\n", "x", "<", ">", "_head>"),
    ]
)


@given(st.lists(_MESSAGE_PARTS, max_size=16).map("".join))
def test_a_commands_output_is_read_between_its_tags_as_a_regular_expression_reads_it(
    message: str,
) -> None:
    # The definition: each tag, then what stands up to the first closing tag of its name.
    definition = re.compile(r"<(output|output_head|output_tail)>\n?(.*?)</\1>", re.DOTALL)
    assert _outputs(message) == [text for _, text in definition.findall(message)]


def test_tau_bench_results() -> None:
    runs = _runs(DATA / "tau", known_model=lambda name: name == "gpt-4o")
    assert [run.meta.run_id for run in runs] == ["task7-trial0", "task7-trial1"]
    assert [run.meta.resolved for run in runs] == [True, False]
    assert runs[0].meta.model == "gpt-4o"  # the file's name starts with a model's name
    assert runs[0].meta.usage == USAGE_NONE
    assert runs[0].meta.exit_status == "user_stop"
    events = runs[0].events
    assert isinstance(events[0], RunStarted)
    assert events[0].prompt == "Hi, change my flight."
    assert any(isinstance(event, Injected) for event in events)  # the user's later messages
    call = next(event for event in events if isinstance(event, ToolCall))
    result = next(event for event in events if isinstance(event, ToolResult))
    assert call.call_id == result.call_id == "call_0a"
    assert result.name == "get_reservation_details"
    # No usage: a model response with no model name, so that no price is guessed ($0).
    assert all(event.model == "" for event in events if isinstance(event, ModelResponse))


def test_openai_transcripts() -> None:
    (run,) = _runs(DATA / "openai")
    assert run.meta.run_id == "support-42"
    assert run.meta.model == "gpt-4o"
    assert run.meta.resolved is False
    assert run.meta.usage == USAGE_PER_STEP
    responses = [event for event in run.events if isinstance(event, ModelResponse)]
    assert [event.input_tokens for event in responses][:2] == [500, 600]
    assert all(event.model == "gpt-4o" for event in responses)
    assert _kinds(run)[:6] == [
        "RunStarted",
        "TurnStarting",
        "ModelRequest",
        "ModelResponse",
        "ToolCall",
        "ToolResult",
    ]


def test_a_bare_list_of_messages_is_one_run(tmp_path: Path) -> None:
    messages = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"},
    ]
    (tmp_path / "chat.json").write_text(json.dumps(messages))
    (run,) = _runs(tmp_path)
    assert _kinds(run) == [
        "RunStarted",
        "TurnStarting",
        "ModelRequest",
        "ModelResponse",
        "TurnEnded",
        "RunEnded",
    ]


def test_haltwise_event_logs() -> None:
    runs = _runs(DATA / "haltwise")
    assert [run.meta.run_id for run in runs] == ["log-1", "log-2"]
    first, second = runs
    assert first.meta.resolved is True
    assert first.meta.model == "gpt-4o-mini"
    assert second.meta.resolved is False
    assert second.meta.exit_status == "max_turns"
    assert isinstance(first.events[-1], RunEnded)
    assert isinstance(second.events[1], TurnStarting)
    assert isinstance(second.events[-1], TurnEnded)
    costs = [event.cost for event in first.events if isinstance(event, ModelResponse)]
    assert costs == [Decimal("0.0002")] * 3


def test_a_malformed_file_names_the_file_and_the_position_and_the_rest_still_runs() -> None:
    found = list(read_paths([DATA / "broken", DATA / "openai"]))
    errors = {Path(item.source).name: item for item in found if isinstance(item, ReadError)}
    assert set(errors) == {"truncated.traj", "bad-line.jsonl", "tau-gpt-4o.json", "notes.json"}
    assert errors["truncated.traj"].position.startswith("line 1, column")
    assert errors["bad-line.jsonl"].position == "line 2"
    assert "nme" in errors["bad-line.jsonl"].message
    assert errors["tau-gpt-4o.json"].position == "item 1"
    assert "truncated.traj" in str(errors["truncated.traj"])
    runs = [item for item in found if isinstance(item, Run)]
    # The good item of the broken tau file, and the transcript, are still read.
    assert {run.meta.run_id for run in runs} == {"task1-trial0", "support-42"}


def test_usage_no_event_can_carry_is_read_as_unknown_or_within_the_prompt(tmp_path: Path) -> None:
    """A transcript's impossible usage neither stops the audit nor reaches the governor: a
    count past 2^53 - 1 is unknown (0), and cached tokens are at most the prompt's."""

    def usage(prompt: int, cached: int) -> dict[str, object]:
        return {
            "prompt_tokens": prompt,
            "completion_tokens": 3,
            "prompt_tokens_details": {"cached_tokens": cached},
        }

    messages = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "one", "usage": usage(5, 10)},
        {"role": "user", "content": "again"},
        {"role": "assistant", "content": "two", "usage": usage(2**60, 0)},
    ]
    (tmp_path / "chat.json").write_text(json.dumps(messages))
    (run,) = _runs(tmp_path)
    responses = [event for event in run.events if isinstance(event, ModelResponse)]
    assert [(r.input_tokens, r.cache_read_tokens) for r in responses] == [(5, 5), (0, 0)]


def test_a_logged_event_with_a_bad_field_names_the_line_and_the_field(tmp_path: Path) -> None:
    lines = [
        {"type": "RunStarted", "prompt": "x"},
        {"type": "TurnStarting"},
        {"type": "ModelResponse", "model": "gpt-4o", "input_tokens": "12"},
    ]
    (tmp_path / "run.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    (error,) = [item for item in read_paths([tmp_path]) if isinstance(item, ReadError)]
    assert error.position == "line 3"
    assert error.message.startswith("ModelResponse.input_tokens='12' is not valid: a count")


def test_json_lists_are_read_item_by_item(tmp_path: Path) -> None:
    results = [
        {
            "task_id": index,
            "trial": 0,
            "reward": index % 2,
            "traj": [{"role": "user", "content": "x"}],
        }
        for index in range(50)
    ]
    path = tmp_path / "gpt-4o-retail.json"
    path.write_text(json.dumps(results, indent=2))
    runs = _runs(path)
    assert len(runs) == 50
    assert runs[-1].meta.run_id == "task49-trial0"


@pytest.mark.parametrize("ahead", [1, 2, 3, 7, 64])
def test_a_json_list_is_read_item_by_item_across_any_read_boundary(
    ahead: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Read a few characters ahead at a time: an item, a number above all, may go on past what
    # was read, and must be read whole, at any boundary.
    monkeypatch.setattr(readers, "_READ_AHEAD", ahead)
    monkeypatch.setattr(readers, "_READ_ON", ahead + 3)
    items = [{"a": [1, 2.5, "x y"]}, 12345678, "text, with ] and [", [], {}, -0.25e3, None, True]
    path = tmp_path / "list.json"
    path.write_text(" \n[ " + " ,\n\t".join(json.dumps(value) for value in items) + " ]\n ")
    assert [value for _, value in readers._iter_json_list(path)] == items
    path.write_text(json.dumps(items)[:-1] + ",")
    with pytest.raises(readers._Malformed, match="not closed|bad JSON"):
        list(readers._iter_json_list(path))
    path.write_text('[{"a": 1}, {"b": ]')
    with pytest.raises(readers._Malformed, match=r"item 1 \(character 17\)"):
        list(readers._iter_json_list(path))


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=8,
)


@given(st.lists(_JSON, max_size=6), st.integers(1, 40), st.sampled_from(["", " ", "\n\t "]))
def test_any_json_list_reads_as_json_loads_reads_it(
    items: list[Any], ahead: int, blank: str
) -> None:
    text = "[" + blank + f"{blank},{blank}".join(json.dumps(item) for item in items) + blank + "]"
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "list.json"
        path.write_text(text, encoding="utf-8")
        saved = readers._READ_AHEAD, readers._READ_ON
        readers._READ_AHEAD, readers._READ_ON = ahead, ahead + 1
        try:
            read = [value for _, value in readers._iter_json_list(path)]
        finally:
            readers._READ_AHEAD, readers._READ_ON = saved
    assert read == json.loads(text)


def test_what_python_json_reads_still_reads(tmp_path: Path) -> None:
    """A trajectory with values the fast decoder refuses (NaN, a lone surrogate) reads as it
    always has."""
    source = (DATA / "swe-agent" / "run1" / "demo__repo-1.traj").read_text(encoding="utf-8")
    data = json.loads(source)
    data["info"]["unused"] = [float("nan"), "\ud800"]
    odd = tmp_path / "run1" / "demo__repo-1.traj"
    odd.parent.mkdir()
    odd.write_text(json.dumps(data), encoding="utf-8")
    (plain,) = [run for run in _runs(DATA / "swe-agent") if run.meta.run_id == "demo__repo-1"]
    (read,) = _runs(tmp_path)
    assert _kinds(read) == _kinds(plain)
    assert read.meta.recorded_cost == plain.meta.recorded_cost
