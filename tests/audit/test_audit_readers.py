"""Readers of recorded runs: each format, detected per file, becomes the governor's event stream."""

from __future__ import annotations

import codecs
import contextlib
import errno
import json
import os
import re
import shutil
import sys
import tempfile
import threading
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
from haltwise.engine.events import MAX_CALL_DOLLARS

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


def test_a_folder_the_search_cannot_go_into_is_named_and_the_rest_still_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """An unreadable folder (chmod 000, which root reads anyway: its refusal is simulated) and
    one gone since its parent was listed are read errors naming them, and the audit exits 1."""
    from haltwise.cli import main

    run = (DATA / "mini" / "demo__mini-1.traj.json").read_bytes()
    for folder in ("a", "closed", "gone", "z"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "run.traj.json").write_bytes(run)
    listed = os.scandir

    def scandir(path: Any) -> Any:
        if Path(path).name == "closed":
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        if Path(path).name == "gone":  # removed once listed in its parent, before it is searched
            (Path(path) / "run.traj.json").unlink()
            Path(path).rmdir()
        return listed(path)

    monkeypatch.setattr(os, "scandir", scandir)
    assert main(["audit", str(tmp_path), "--json", "--no-progress"]) == 1
    document = json.loads(capsys.readouterr().out)
    assert [(Path(error["source"]).name, error["message"]) for error in document["errors"]] == [
        ("closed", "is a folder that cannot be searched: Permission denied"),
        ("gone", "cannot be read: No such file or directory"),
    ]
    assert sorted(record["corpus"] for record in document["runs"]) == ["a", "z"]


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a chmod 000 folder: nothing to refuse")
def test_a_folder_without_read_permission_is_named(tmp_path: Path) -> None:
    closed = tmp_path / "closed"
    closed.mkdir()
    shutil.copy(DATA / "mini" / "demo__mini-1.traj.json", closed)
    closed.chmod(0)
    try:
        found = list(read_paths([tmp_path]))
    finally:
        closed.chmod(0o755)
    assert found == [
        ReadError(str(closed), "", "is a folder that cannot be searched: Permission denied")
    ]


def test_symlinked_folders_are_searched_each_once_and_a_link_up_the_tree_ends(
    tmp_path: Path,
) -> None:
    corpus, elsewhere = tmp_path / "corpus", tmp_path / "elsewhere"
    (corpus / "a").mkdir(parents=True)
    elsewhere.mkdir()
    shutil.copy(DATA / "mini" / "demo__mini-1.traj.json", corpus / "a" / "one.traj.json")
    shutil.copy(DATA / "mini" / "demo__mini-1.traj.json", elsewhere / "two.traj.json")
    (corpus / "linked").symlink_to(elsewhere)
    (corpus / "a" / "up").symlink_to(corpus)  # a loop
    (corpus / "same-as-a").symlink_to(corpus / "a")
    found = [(path.relative_to(corpus).as_posix(), name) for path, name in find_files([corpus])]
    assert found == [("a/one.traj.json", "a"), ("linked/two.traj.json", "linked")]


def test_what_is_not_a_regular_file_is_not_opened(tmp_path: Path) -> None:
    """A named pipe would block the audit forever when opened: as a run file it is refused
    unopened, as a corpus report beside the runs it is passed over."""
    pipes = [tmp_path / "pipe.json", tmp_path / "results_summary.json"]
    for pipe in pipes:
        os.mkfifo(pipe)
    shutil.copy(DATA / "mini" / "demo__mini-1.traj.json", tmp_path)

    done = threading.Event()

    def unblock() -> None:
        # Were a pipe opened after all, writers that come and go end each wait: the test then
        # fails on what was read rather than hangs.
        while not done.wait(5):
            for pipe in pipes:
                with contextlib.suppress(OSError):  # no reader waits on this one
                    os.close(os.open(pipe, os.O_WRONLY | os.O_NONBLOCK))

    watchdog = threading.Thread(target=unblock, daemon=True)
    watchdog.start()
    try:
        found = list(read_paths([tmp_path]))
    finally:
        done.set()
        watchdog.join()
    errors = [item for item in found if isinstance(item, ReadError)]
    assert errors == [
        ReadError(
            str(tmp_path / "pipe.json"),
            "",
            "is a named pipe (FIFO), not a regular file: not opened",
        )
    ]
    (run,) = [item for item in found if isinstance(item, Run)]
    assert run.meta.resolved is None  # no report to read


@pytest.mark.parametrize(
    "name", ["mini/demo__mini-1.traj.json", "tau/gpt-4o-airline.json", "openai/support-42.json"]
)
def test_a_byte_order_mark_is_read_past(name: str, tmp_path: Path) -> None:
    source = DATA / name
    marked = tmp_path / source.parent.name / source.name
    marked.parent.mkdir()
    marked.write_bytes(codecs.BOM_UTF8 + source.read_bytes())
    assert [_kinds(run) for run in _runs(marked)] == [_kinds(run) for run in _runs(source)]


@pytest.mark.parametrize(
    ("name", "text", "error"),
    [
        ("run.traj.json", "", ("", "is empty")),
        ("log.jsonl", "", ("", "is empty")),
        ("run.traj.json", "null", ("top level", 'expected an object with a "messages" list')),
    ],
)
def test_an_empty_file_or_one_holding_null_says_so(
    name: str, text: str, error: tuple[str, str], tmp_path: Path
) -> None:
    (tmp_path / name).write_text(text)
    assert list(read_paths([tmp_path])) == [ReadError(str(tmp_path / name), *error)]


@pytest.mark.parametrize("ahead", [1, 5, 64, 1 << 20])
@pytest.mark.parametrize(
    ("text", "position", "message"),
    [
        ("[1, 2] }}} not json", "character 7", "text after the list's closing ']'"),
        ("[1, 2]\n[3]", "character 7", "text after the list's closing ']'"),
        ("[1, 2 3]", "item 2 (character 6)", "expected ',' or ']' after an item"),
        ('[1, 2 {"a": 1}]', "item 2 (character 6)", "expected ',' or ']' after an item"),
        ("[1, 2, ]", "item 2 (character 7)", "Expecting value"),
        ("[1, 2,, 3]", "item 2 (character 6)", "Expecting value"),
    ],
)
def test_a_json_list_is_read_as_strictly_as_json_loads_reads_it(
    text: str,
    position: str,
    message: str,
    ahead: int,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What json.loads refuses is refused at its item and character, at any read boundary;
    the items before it are read."""
    monkeypatch.setattr(readers, "_READ_AHEAD", ahead)
    monkeypatch.setattr(readers, "_READ_ON", ahead + 3)
    path = tmp_path / "list.json"
    path.write_text(text)
    with pytest.raises(json.JSONDecodeError):
        json.loads(text)
    read = []
    with pytest.raises(readers._Malformed) as raised:
        for _, value in readers._iter_json_list(path):
            read.append(value)
    assert (raised.value.position, raised.value.message) == (position, f"bad JSON: {message}")
    assert read == [1, 2]


def test_tau_bench_results_with_text_after_the_list_are_named(tmp_path: Path) -> None:
    path = tmp_path / "tau" / "gpt-4o-airline.json"
    path.parent.mkdir()
    text = (DATA / "tau" / "gpt-4o-airline.json").read_text(encoding="utf-8").rstrip()
    path.write_text(text + " }}} not json\n", encoding="utf-8")
    found = list(read_paths([path]))
    error = ReadError(
        str(path), f"character {len(text) + 1}", "bad JSON: text after the list's closing ']'"
    )
    assert found[-1] == error
    assert len(found) - 1 == len(_runs(DATA / "tau" / "gpt-4o-airline.json"))


_DEEP = "[" * 5000 + "]" * 5000
_LONG = "9" * 5000
_TOO_LONG = f"bad JSON: an integer of more than {sys.get_int_max_str_digits()} digits"
_TOO_DEEP = "bad JSON: lists or objects nested too deeply to decode"


@pytest.mark.parametrize(
    ("name", "text", "position", "message"),
    [
        ("chat.json", '{"messages": ' + _DEEP + "}", "line 1, column 1038", _TOO_DEEP),
        ("chat.json", '{"messages": [], "n": ' + _LONG + "}", "line 1, column 23", _TOO_LONG),
        ("run.traj", '{"trajectory": [], "n": ' + _LONG + "}", "line 1, column 25", _TOO_LONG),
        ("chats.json", '[{"messages": []}, ' + _DEEP + "]", "item 1 (character 19)", _TOO_DEEP),
        ("chats.json", '[{"messages": []}, ' + _LONG + "]", "item 1 (character 19)", _TOO_LONG),
    ],
)
def test_json_nested_too_deeply_or_with_too_long_an_integer_is_malformed_where_it_is(
    name: str, text: str, position: str, message: str, tmp_path: Path
) -> None:
    """What Python's json cannot decode and says no more of than a RecursionError or a
    ValueError is the file's own error, with its position; not an internal error."""
    (tmp_path / name).write_text(text)
    errors = [item for item in read_paths([tmp_path]) if isinstance(item, ReadError)]
    assert errors == [ReadError(str(tmp_path / name), position, message)]


def test_a_corpus_report_too_deep_to_decode_is_passed_over(tmp_path: Path) -> None:
    shutil.copy(DATA / "mini" / "demo__mini-1.traj.json", tmp_path)
    (tmp_path / "results_summary.json").write_text('{"instances": ' + _DEEP + "}")
    (run,) = _runs(tmp_path)
    assert run.meta.resolved is None


def test_a_recorded_cost_no_call_can_have_is_read_as_unknown(tmp_path: Path) -> None:
    """Past the governor's bound for one call (MAX_CALL_DOLLARS), as a count past MAX_COUNT
    is: unknown, and the run still replays."""
    messages = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "one", "usage": {"prompt_tokens": 5, "cost": 1e20}},
        {"role": "user", "content": "again"},
        {"role": "assistant", "content": "two", "usage": {"prompt_tokens": 5, "cost": 0.25}},
    ]
    (tmp_path / "chat.json").write_text(json.dumps(messages))
    (run,) = _runs(tmp_path)
    costs = [event.cost for event in run.events if isinstance(event, ModelResponse)]
    assert costs == [None, Decimal("0.25")]
    assert readers._money(MAX_CALL_DOLLARS) == MAX_CALL_DOLLARS
    assert readers._money(Decimal(MAX_CALL_DOLLARS).next_plus()) is None
