"""haltwise's JSONL event log: events, decisions and outcomes as data, and back."""

from __future__ import annotations

import io
import json
from decimal import Decimal
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from haltwise import (
    Block,
    Governor,
    Injected,
    ModelRequest,
    ModelResponse,
    Progress,
    RunEnded,
    RunStarted,
    Stop,
    ToolCall,
    ToolResult,
    TurnEnded,
    TurnStarting,
    Warn,
    max_turns,
)
from haltwise.engine.decisions import CONTINUE, Ask
from haltwise.engine.errors import InvalidValueError
from haltwise.engine.events import Event
from haltwise.eventlog import (
    EVENT_TYPES,
    decision_to_dict,
    event_from_dict,
    event_to_dict,
    outcome_to_dict,
    read_event_log,
    write_line,
)
from haltwise.testing import FakeClock

text = st.text(max_size=30)
small = st.integers(min_value=0, max_value=10**9)
money = st.decimals(min_value=0, max_value=1000, places=6, allow_nan=False, allow_infinity=False)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-1000, 1000) | text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3),
    max_leaves=8,
)
events = st.one_of(
    st.builds(RunStarted, prompt=text, run_id=st.none() | text),
    st.just(TurnStarting()),
    st.builds(
        ModelRequest, model=text, max_tokens=st.none() | small, input_tokens=st.none() | small
    ),
    st.builds(
        ModelResponse,
        model=text,
        input_tokens=small,
        output_tokens=small,
        cache_read_tokens=small,
        cost=st.none() | money,
        text=st.none() | text,
        tool_calls=st.integers(0, 5),
    ).filter(lambda response: response.cache_read_tokens <= response.input_tokens),
    st.builds(
        ToolCall,
        name=text,
        arguments=text | st.dictionaries(text, json_values, max_size=4),
        call_id=text,
    ),
    st.builds(
        ToolResult,
        name=text,
        content=text,
        call_id=text,
        is_error=st.booleans(),
        exit_code=st.none() | st.integers(-1, 255),
    ),
    st.builds(TurnEnded, text=st.none() | text),
    st.builds(Injected, text=text),
    st.builds(Progress, metric=text, value=st.none() | st.floats(-1e6, 1e6), note=text),
    st.builds(RunEnded, output=st.none() | text),
)


@given(events)
def test_every_event_survives_a_round_trip_through_json(event: Event) -> None:
    data = json.loads(json.dumps(event_to_dict(event)))
    assert data["type"] == type(event).__name__
    assert event_from_dict(data) == event


def test_money_is_a_string_so_that_it_comes_back_exact() -> None:
    data = event_to_dict(ModelResponse(model="m", cost=Decimal("0.1234567")))
    assert data["cost"] == "0.1234567"
    assert event_from_dict(data) == ModelResponse(model="m", cost=Decimal("0.1234567"))


def test_defaults_are_left_out() -> None:
    assert event_to_dict(TurnStarting()) == {"type": "TurnStarting"}
    assert event_to_dict(ToolCall("ls")) == {"type": "ToolCall", "name": "ls"}


@pytest.mark.parametrize(
    ("data", "named"),
    [
        ({"type": "Teleport"}, "event type"),
        ({"name": "ls"}, "event type"),
        ({"type": "ToolCall", "nme": "ls"}, "ToolCall field"),
        ({"type": "ModelResponse", "cost": "a lot"}, "ModelResponse.cost"),
        ({"type": "ToolCall"}, "ToolCall"),
    ],
)
def test_bad_data_names_what_is_wrong(data: dict[str, object], named: str) -> None:
    with pytest.raises(InvalidValueError, match=named):
        event_from_dict(data)


def test_every_event_class_is_known() -> None:
    assert set(EVENT_TYPES) == {
        "RunStarted",
        "TurnStarting",
        "ModelRequest",
        "ModelResponse",
        "ToolCall",
        "ToolResult",
        "TurnEnded",
        "Injected",
        "Progress",
        "RunEnded",
    }


def test_decisions_and_outcomes_as_data() -> None:
    governor = Governor(max_turns(1), clock=FakeClock())
    governor.handle(RunStarted(run_id="r1"))
    governor.handle(TurnStarting())
    stop = governor.handle(TurnStarting())
    assert isinstance(stop, Stop)
    data = decision_to_dict(stop)
    assert data["type"] == "Stop"
    assert data["outcome"]["reason"] == "turn_limit"
    assert data["outcome"]["status"] == "abandoned"
    assert data["outcome"]["usage"]["turns"] == 1
    assert data["outcome"]["usage"]["cost"] == "0"
    json.dumps(data)
    assert outcome_to_dict(stop.outcome) == data["outcome"]
    assert decision_to_dict(CONTINUE) == {"type": "Continue"}
    assert decision_to_dict(Warn("careful", "x")) == {
        "type": "Warn",
        "message": "careful",
        "limit": "x",
    }
    block = decision_to_dict(Block(ToolCall("rm", {"path": "/"}), "no", "policy"))
    assert block["call"] == {"type": "ToolCall", "name": "rm", "arguments": {"path": "/"}}
    ask = decision_to_dict(Ask(question="Continue?", reason="turn_limit", limit="max_turns(1)"))
    assert ask["choices"] == ["continue", "extend", "wrap_up", "abort"]


def test_a_log_is_read_line_by_line(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    with path.open("w", encoding="utf-8") as stream:
        write_line(stream, event_to_dict(RunStarted(prompt="hi", run_id="r")))
        write_line(stream, decision_to_dict(CONTINUE))
        stream.write("\n")
        write_line(stream, {"type": "Label", "resolved": True})
        write_line(stream, event_to_dict(RunEnded(output="bye")))
    lines = list(read_event_log(path))
    assert [line.line for line in lines] == [1, 2, 4, 5]
    assert lines[0].event == RunStarted(prompt="hi", run_id="r")
    assert lines[1].decision == {"type": "Continue"}
    assert lines[2].label == {"type": "Label", "resolved": True}
    assert lines[3].event == RunEnded(output="bye")


def test_a_bad_line_names_the_file_and_the_line() -> None:
    stream = io.StringIO('{"type": "TurnStarting"}\nnot json\n')
    stream.name = "run.jsonl"
    with pytest.raises(InvalidValueError, match=r"run\.jsonl:2"):
        list(read_event_log(stream))
    stream = io.StringIO('{"type": "TurnStarting"}\n{"type": "ToolCall", "nme": "ls"}\n')
    with pytest.raises(InvalidValueError, match=r":2"):
        list(read_event_log(stream))


@pytest.mark.parametrize(
    ("line", "said"),
    [
        ("[" * 100_000 + "]" * 100_000, "lists or objects nested too deeply to decode"),
        ('{"type": "TurnStarting", "x": ' + "9" * 5_000 + "}", "an integer of more than"),
    ],
    ids=["nested too deeply", "an integer too long"],
)
def test_json_that_python_cannot_decode_is_a_bad_line(line: str, said: str) -> None:
    # Python's json raises RecursionError or a plain ValueError for these, with no position.
    stream = io.StringIO('{"type": "TurnStarting"}\n' + line + "\n")
    stream.name = "run.jsonl"
    with pytest.raises(InvalidValueError, match=r"run\.jsonl:2") as raised:
        list(read_event_log(stream))
    assert raised.value.valid.startswith(f"a JSON object (bad JSON: {said}")


@pytest.mark.parametrize(
    ("encoding", "text"),
    [("utf-8", "a lone \ud800 surrogate"), ("latin-1", "café ✓"), ("ascii", "café")],
)
def test_a_line_the_stream_cannot_encode_is_written_with_escapes(encoding: str, text: str) -> None:
    stream = io.TextIOWrapper(io.BytesIO(), encoding=encoding)
    write_line(stream, event_to_dict(RunEnded(output=text)))
    write_line(stream, {"type": "Label", "outcome": {"partial_output": text}})
    stream.seek(0)
    first, label = read_event_log(stream)
    assert first.event == RunEnded(output=text)
    assert label.label == {"type": "Label", "outcome": {"partial_output": text}}
