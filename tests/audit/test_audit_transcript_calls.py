"""Tool calls in transcripts, wherever a transcript keeps them: ``tool_calls``, the legacy
``function_call``, or written into the assistant's text (``<function=...>`` blocks, a fenced
shell block) with the result in the next user message; and the warning for a corpus with none."""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from haltwise import Injected, ModelResponse, ToolCall, ToolResult
from haltwise.audit.readers import Reader, ReadWarning, find_files, read_paths
from haltwise.audit.runs import Run
from haltwise.cli import main

DATA = Path(__file__).parent / "data"
TRANSCRIPTS = DATA / "transcripts"


def _read(path: Path) -> tuple[Run, list[ReadWarning]]:
    reader = Reader()
    found = [item for file, corpus in find_files([path]) for item in reader.read(file, corpus)]
    assert len(found) == 1, found
    (run,) = found
    assert isinstance(run, Run), run
    return run, reader.warnings()


def _calls(run: Run) -> list[ToolCall]:
    return [event for event in run.events if isinstance(event, ToolCall)]


def _results(run: Run) -> list[ToolResult]:
    return [event for event in run.events if isinstance(event, ToolResult)]


def test_legacy_function_calls_with_their_function_results() -> None:
    run, warnings = _read(TRANSCRIPTS / "legacy-function-call.json")
    assert [(call.name, call.arguments) for call in _calls(run)] == [
        ("count_tickets", '{"queue": "billing"}')
    ] * 2
    results = _results(run)
    assert [result.content for result in results] == ['{"open": 12}'] * 2
    assert [result.call_id for result in results] == [call.call_id for call in _calls(run)]
    assert warnings == []


def test_parallel_tool_calls_get_their_results_by_id() -> None:
    run, _ = _read(TRANSCRIPTS / "parallel-calls.json")
    calls = _calls(run)
    assert [call.call_id for call in calls] == ["m1", "m2"]
    by_call = {result.call_id: result.content for result in _results(run)}
    assert by_call == {"m1": "mirror-a: 12 ms", "m2": "mirror-b: 40 ms"}
    assert all(result.name == "ping" for result in _results(run))
    (response,) = [event for event in run.events if isinstance(event, ModelResponse)][:1]
    assert response.tool_calls == 2


def test_calls_written_as_function_blocks_are_answered_by_the_next_user_message() -> None:
    run, warnings = _read(TRANSCRIPTS / "xml-calls.json")
    calls = _calls(run)
    assert [call.name for call in calls] == ["run_shell", "edit_file", "run_shell"]
    assert calls[0].arguments == {"command": "grep -rn 'def load' src/"}
    # Values keep their inner lines; the newlines around them are the format's, not the value's.
    assert calls[1].arguments == {
        "path": "src/conf.py",
        "old": "if value:\n    keep(key)",
        "new": "keep(key)",
    }
    # The last block was cut at "</function>" by the harness: it is still a call.
    assert calls[2].arguments == {"command": "pytest -q tests/test_conf.py"}
    results = _results(run)
    assert [result.content for result in results] == [
        "src/conf.py:14:def load(path):",
        "Edited src/conf.py.",
        "3 passed",
    ]
    assert [result.call_id for result in results] == [call.call_id for call in calls]
    # A user message that answers a call is a result, not a message injected into the run.
    assert not any(isinstance(event, Injected) for event in run.events)
    assert warnings == []


def test_one_fenced_shell_block_is_one_bash_call() -> None:
    run, warnings = _read(TRANSCRIPTS / "fenced-shell.json")
    calls = _calls(run)
    assert [call.arguments for call in calls] == [
        {"command": "ls src"},
        {"command": "python -m pytest -q tests"},  # beside a python block, which is no call
        {"command": "cat src/dates.py"},
    ]
    assert {call.name for call in calls} == {"bash"}
    results = _results(run)
    assert [(result.content, result.exit_code) for result in results] == [
        ("dates.py", 0),
        ("1 failed", 1),
        ("def parse(text): ...", 0),
    ]
    # Two blocks in one message: the harness refused it, no tool ran, and its complaint is
    # a message to the model.
    responses = [event for event in run.events if isinstance(event, ModelResponse)]
    assert [response.tool_calls for response in responses] == [1, 1, 0, 1]
    (injected,) = [event for event in run.events if isinstance(event, Injected)]
    assert "EXACTLY ONE" in injected.text
    assert warnings == []


def test_of_two_copies_of_a_conversation_the_recorded_calls_are_read_once() -> None:
    run, _ = _read(TRANSCRIPTS / "two-copies.json")
    calls = _calls(run)
    # The history's tool_calls, not the calls the other copy writes in its text, and not both.
    assert [(call.call_id, call.arguments) for call in calls] == [
        ("r1", {"path": "notes.txt"}),
        ("r2", {"path": "notes.txt"}),
    ]
    assert [result.content for result in _results(run)] == ["ship on Friday"] * 2
    assert len([event for event in run.events if isinstance(event, ModelResponse)]) == 3


def test_calls_that_cannot_be_read_are_one_warning_for_the_file() -> None:
    path = TRANSCRIPTS / "unreadable-blocks.json"
    run, warnings = _read(path)
    assert [call.arguments for call in _calls(run)] == [{"command": "grep -rn helper ."}]
    (warning,) = warnings
    assert warning.source == str(path)
    assert warning.position == "messages[3]"
    assert warning.message.startswith("2 tool call(s) written in the text could not be read")
    assert str(warning).startswith(f"{path} at messages[3]: 2 tool call(s)")


def test_a_native_tool_calling_transcript_is_not_searched_for_calls_in_its_text(
    tmp_path: Path,
) -> None:
    messages = [
        {"role": "user", "content": "How do I list files?"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "d1", "function": {"name": "search_docs", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "d1", "content": "ls lists files"},
        {"role": "assistant", "content": "Run this:\n```bash\nls -la\n```"},
        {"role": "user", "content": "Thanks!"},
    ]  # fmt: skip
    (tmp_path / "help.json").write_text(json.dumps({"messages": messages}))
    run, _ = _read(tmp_path / "help.json")
    assert [call.name for call in _calls(run)] == ["search_docs"]
    assert [event.text for event in run.events if isinstance(event, Injected)] == ["Thanks!"]


def test_a_corpus_with_no_tool_call_is_one_warning_naming_it_its_format_and_what_was_expected() -> (
    None
):
    reader = Reader()
    runs = [
        item
        for path, corpus in find_files([DATA / "chat-only", TRANSCRIPTS])
        for item in reader.read(path, corpus)
    ]
    assert all(isinstance(item, Run) for item in runs)
    assert len(runs) == 8
    (warning,) = reader.warnings()[1:]  # the first is unreadable-blocks.json's
    assert warning.source == str((DATA / "chat-only").resolve())
    assert "no tool calls found in the 2 openai runs of corpus 'chat-only'" in warning.message
    assert '"tool_calls", a legacy "function_call"' in warning.message
    # Asked again, the same warnings: nothing is said twice within one list.
    assert len(reader.warnings()) == 2


def test_each_format_with_calls_gives_no_warning() -> None:
    reader = Reader()
    for path, corpus in find_files(
        [DATA / name for name in ("swe-agent", "mini", "tau", "openai", "haltwise")]
    ):
        for _ in reader.read(path, corpus):
            pass
    assert reader.warnings() == []


def test_a_bare_list_of_messages_with_written_calls(tmp_path: Path) -> None:
    messages = [
        {"role": "user", "content": "Count the lines."},
        {"role": "assistant", "content": "```sh\nwc -l data.csv\n```"},
        {"role": "user", "content": "41 data.csv"},
    ]
    (tmp_path / "lines.json").write_text(json.dumps(messages))
    run, _ = _read(tmp_path / "lines.json")
    assert [call.arguments for call in _calls(run)] == [{"command": "wc -l data.csv"}]
    assert [result.content for result in _results(run)] == ["41 data.csv"]


# --------------------------------------------------------------------------------------------
# Model-written text is hostile input


_PIECES = st.sampled_from(
    [
        "<function=",
        "<function=run>",
        "</function>",
        "<parameter=",
        "<parameter=k>",
        "</parameter>",
        "```",
        "```bash",
        "```sh\n",
        "\n```",
        "\n",
        ">",
        "<",
        "=",
        " ",
        "x",
        "<returncode>",
        "</returncode>",
        "9" * 5000,
    ]
)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(_PIECES, max_size=30).map("".join), min_size=1, max_size=4))
def test_no_written_text_makes_the_reader_raise_or_fail(texts: list[str]) -> None:
    messages: list[dict[str, str]] = [{"role": "user", "content": "go"}]
    for text in texts:
        messages += [{"role": "assistant", "content": text}, {"role": "user", "content": text}]
    reader = Reader()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "hostile.json"
        path.write_text(json.dumps({"messages": messages}))
        (run,) = reader.read(path, "hostile")
    assert isinstance(run, Run)
    # Results belong to calls found, one each.
    calls, results = _calls(run), _results(run)
    assert len({result.call_id for result in results}) == len(results)
    assert {result.call_id for result in results} <= {call.call_id for call in calls}
    # At most one warning for the file, beside the one for a corpus with no call.
    assert len([item for item in reader.warnings() if item.source == str(path)]) <= 1


@pytest.mark.parametrize(
    "text",
    [
        # Searched for from each tag to the end of the text, each of these takes from 5 seconds
        # to a minute; read in one pass, a fraction of a second.
        "<function=a>" * 30_000,
        "<function=a>" + "<parameter=k>" * 100_000,
        "<function=" * 300_000,
        "```" * 500_000,
    ],
)
def test_reading_written_calls_is_linear_in_the_text(tmp_path: Path, text: str) -> None:
    messages = [{"role": "user", "content": "go"}, {"role": "assistant", "content": text}]
    path = tmp_path / "long.json"
    path.write_text(json.dumps({"messages": messages}))
    started = time.perf_counter()
    found = list(read_paths([path]))
    assert time.perf_counter() - started < 2
    assert isinstance(found[0], Run)


def test_the_audit_prints_the_warning_once_for_the_corpus(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["audit", str(DATA / "chat-only"), "--no-progress"]) == 0
    err = capsys.readouterr().err
    (line,) = err.splitlines()
    assert line.startswith(f"haltwise audit: warning: {(DATA / 'chat-only').resolve()}: ")
    assert "no tool calls found in the 2 openai runs of corpus 'chat-only'" in line


# --------------------------------------------------------------------------------------------
# The real corpora (../shared/traces)


def test_every_real_corpus_yields_tool_calls(traces_dir: Path) -> None:
    reader = Reader()
    calls: dict[str, int] = {}
    for path, corpus in find_files([traces_dir]):
        for item in reader.read(path, corpus):
            assert isinstance(item, Run), str(item)
            calls[corpus] = calls.get(corpus, 0) + len(_calls(item))
    assert set(calls) >= {
        "mini-swe-agent-gemini3",
        "swe-agent-gpt4-lite",
        "swe-agent-java",
        "tau-bench-airline",
    }
    assert all(count > 0 for count in calls.values()), calls
    assert reader.warnings() == []


def test_the_real_conversations_read_as_plain_transcripts_give_the_same_calls(
    traces_dir: Path, tmp_path: Path
) -> None:
    """mini-swe-agent's messages (calls in ```bash blocks) and SWE-agent's history (calls in
    ``action``), taken out of their files into plain transcripts, give the calls their own
    readers give."""
    compared = 0
    for number, (path, corpus) in enumerate(find_files([traces_dir])):
        if number % 20 or corpus.startswith("tau"):
            continue
        data = json.loads(path.read_text(encoding="utf-8"))
        key = "messages" if "messages" in data else "history"
        copy = tmp_path / f"{number}.json"
        copy.write_text(json.dumps({key: data[key]}), encoding="utf-8")
        (own,) = Reader().read(path, corpus)
        (plain,) = Reader().read(copy, corpus)
        assert isinstance(own, Run)
        assert isinstance(plain, Run)
        assert plain.meta.format == "openai"
        expected = [(call.name, call.arguments) for call in _calls(own)]
        assert [(call.name, call.arguments) for call in _calls(plain)] == expected, path
        compared += 1
    assert compared >= 50


def test_a_mini_swe_agent_message_is_read_in_one_pass(tmp_path: Path) -> None:
    # Openers with no closing fence: a search from each to the end would take minutes.
    text = "```bash\nx" * 200_000
    messages = [{"role": "user", "content": "go"}, {"role": "assistant", "content": text}]
    path = tmp_path / "demo__long-1.traj.json"
    path.write_text(json.dumps({"messages": messages, "info": {}}))
    started = time.perf_counter()
    (run,) = read_paths([path])
    assert time.perf_counter() - started < 2
    assert isinstance(run, Run)
    assert run.meta.format == "mini-swe-agent"
    assert _calls(run) == []
