"""``haltwise run`` and ``haltwise demo`` as users meet them: exit codes, JSON lines, bad values,
Ctrl-C, a crash and its resume. Through the real ``openai`` client against ScriptedServer."""

from __future__ import annotations

import io
import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import pytest
from child_process import child_environ, default_signals
from misreported import MisreportedUsage

from haltwise.agent.store import Store
from haltwise.cli import main
from haltwise.eventlog import read_event_log
from haltwise.testing import ScriptedServer, ScriptEntry, ToolCall, reply, tool_call

#: The workspace, the store and the isolation from the user's environment.
pytest_plugins = ["agent_fixtures"]

MODEL = "scripted-model"


def read(path: str = "a.txt") -> ScriptEntry:
    return reply(f"Reading {path}.", tool_calls=[tool_call("read_file", {"path": path})])


def run_args(server: ScriptedServer, workspace: Path, store: Path, *more: str) -> list[str]:
    return [
        "run",
        "--base-url",
        server.base_url,
        "--model",
        MODEL,
        "--workspace",
        str(workspace),
        "--store",
        str(store),
        *more,
    ]


def json_lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def test_run_prints_the_answer_and_exits_0(
    workspace: Path, store_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with ScriptedServer([read(), reply("Three letters.")], model=MODEL) as server:
        code = main(run_args(server, workspace, store_path, "What is in a.txt?"))
    captured = capsys.readouterr()
    assert code == 0
    assert captured.out == "Three letters.\n"
    assert "Turns: 1/25" in captured.err and "read_file" in captured.err


def test_run_at_a_limit_exits_3_with_json_lines(
    workspace: Path, store_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = [read(), read("sub/b.py"), read()]
    with ScriptedServer(script, model=MODEL) as server:
        args = run_args(server, workspace, store_path, "Read.", "--json", "-q", "--max-turns", "2")
        code = main(args)
    captured = capsys.readouterr()
    assert code == 3
    assert captured.err == ""
    lines = json_lines(captured.out)
    label = lines[-1]
    assert label["type"] == "Label" and label["exit_code"] == 3
    assert label["outcome"]["reason"] == "turn_limit"
    assert label["outcome"]["usage"]["turns"] == 2
    # The log reads back as haltwise's event log: events, each followed by its decision.
    logged = list(read_event_log(io.StringIO(captured.out)))
    events = [line.event for line in logged if line.event is not None]
    decisions = [line.decision for line in logged if line.decision is not None]
    assert type(events[0]).__name__ == "RunStarted"
    assert len(events) == len(decisions)
    assert decisions[-1] is not None and decisions[-1]["type"] == "Stop"
    assert [type(e).__name__ for e in events].count("TurnStarting") == 3


def test_run_synthesizes_where_the_policy_says(
    workspace: Path, store_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = [read(), read("sub/b.py"), reply("Partial answer: alpha.")]
    with ScriptedServer(script, model=MODEL) as server:
        limits = ["--max-tool-calls", "1", "--on-limit", "synthesize"]
        code = main(run_args(server, workspace, store_path, "Read.", *limits))
    captured = capsys.readouterr()
    assert code == 3  # stopped at a limit, with an answer
    assert captured.out == "Partial answer: alpha.\n"
    assert "wrapping up" in captured.err


def test_shell_commands_without_yes_are_refused_headless(
    workspace: Path, store_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script: list[ScriptEntry] = [
        reply(tool_calls=[tool_call("run_command", {"command": "touch made"})]),
        "ok",
    ]
    with ScriptedServer(script, model=MODEL) as server:
        assert main(run_args(server, workspace, store_path, "Touch.", "--json", "-q")) == 0
    results = [line for line in json_lines(capsys.readouterr().out) if line["type"] == "ToolResult"]
    assert results[0]["is_error"] is True and "--yes" in results[0]["content"]
    assert not (workspace / "made").exists()
    with ScriptedServer(script, model=MODEL) as server:
        assert main(run_args(server, workspace, store_path, "Touch.", "--yes", "-q")) == 0
    assert (workspace / "made").exists()


def test_run_escaping_the_workspace_is_a_tool_error(
    workspace: Path, store_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script: list[ScriptEntry] = [
        reply(tool_calls=[tool_call("write_file", {"path": "../x", "content": "x"})]),
        "ok",
    ]
    with ScriptedServer(script, model=MODEL) as server:
        assert main(run_args(server, workspace, store_path, "Write.", "--json", "-q")) == 0
        sent = server.requests[1]["messages"][-1]["content"]
    assert sent.startswith("error: path '../x' is outside the workspace")
    assert not (workspace.parent / "x").exists()


@pytest.mark.parametrize(
    ("more", "environ", "expected"),
    [
        (["--max-turns", "abc"], {}, "--max-turns='abc' is not valid"),
        (["--timeout", "soon"], {}, "--timeout='soon' is not valid"),
        (["--max-cost", "-1"], {}, "--max-cost='-1' is not valid"),
        (["--on-limit", "pray"], {}, "--on-limit='pray' is not valid"),
        (["--command-timeout", "0"], {}, "--command-timeout='0' is not valid"),
        ([], {"HALTWISE_MAX_TURNS": "lots"}, "HALTWISE_MAX_TURNS='lots' is not valid"),
        ([], {"HALTWISE_MAX_TRUNS": "5"}, "did you mean 'HALTWISE_MAX_TURNS'"),
        (["--workspace", "/no/such/folder"], {}, "--workspace='/no/such/folder' is not valid"),
    ],
)
def test_bad_values_are_one_line_and_exit_2(
    more: list[str],
    environ: dict[str, str],
    expected: str,
    store_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    args = ["run", "Go.", "--base-url", "http://127.0.0.1:9/v1", "--model", "m"]
    code = main([*args, "--store", str(store_path), *more])
    err = capsys.readouterr().err
    assert code == 2
    assert expected in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_no_endpoint_at_all_says_what_to_set(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "Go."]) == 2
    err = capsys.readouterr().err
    assert "no model endpoint: set OPENAI_API_KEY" in err and "haltwise demo" in err


def test_an_unreachable_endpoint_exits_1(
    store_path: Path, workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["run", "Go.", "--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--json"]
    code = main([*args, "--store", str(store_path), "--workspace", str(workspace)])
    captured = capsys.readouterr()
    assert code == 1
    assert "cannot reach the model endpoint at http://127.0.0.1:9/v1" in captured.err
    assert json_lines(captured.out)[-1]["outcome"]["reason"] == "error"


def test_the_model_is_taken_from_the_server_when_it_has_one(
    workspace: Path, store_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with ScriptedServer(["hello"], model="the-only-one") as server:
        args = run_args(server, workspace, store_path, "Hi.")
        args.remove("--model")
        args.remove(MODEL)
        assert main(args) == 0
        assert server.requests[0]["model"] == "the-only-one"


def spawn(
    args: list[str], store: Path, preexec: Callable[[], None] = default_signals
) -> subprocess.Popen[str]:
    environ = child_environ(HALTWISE_STORE=str(store))
    return subprocess.Popen(
        [sys.executable, "-m", "haltwise", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environ,
        preexec_fn=preexec,
    )


def wait_for_requests(server: ScriptedServer, count: int, process: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 20
    while len(server.requests) < count:
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "the agent never made its request"
        time.sleep(0.02)


@pytest.mark.parametrize(
    ("stop", "code", "said"),
    [
        (signal.SIGINT, 130, "interrupted (Ctrl-C)"),
        (signal.SIGTERM, 143, "terminated (SIGTERM)"),
        (signal.SIGHUP, 129, "the terminal hung up (SIGHUP)"),
    ],
)
def test_a_stop_signal_cancels_cleanly(
    stop: signal.Signals, code: int, said: str, workspace: Path, store_path: Path
) -> None:
    with ScriptedServer([read(), reply("late", delay=30)], model=MODEL) as server:
        process = spawn(run_args(server, workspace, store_path, "Go.", "--json"), store_path)
        wait_for_requests(server, 2, process)
        process.send_signal(stop)
        out, err = process.communicate(timeout=10)
    assert process.returncode == code, err
    lines = json_lines(out)
    assert [line["type"] for line in lines].count("Label") == 1
    label = lines[-1]
    assert label["type"] == "Label" and label["exit_code"] == code
    assert label["outcome"]["status"] == "cancelled"
    assert label["outcome"]["message"] == f"The run was cancelled: {said}."
    assert "Traceback" not in err
    with Store(store_path) as store:
        record = store.load_run(label["outcome"]["run_id"])
    assert (record.status, record.reason) == ("cancelled", "cancelled")
    assert record.checkpoint is not None and record.checkpoint["run"]["model_calls"] == 2


def test_a_signal_ignored_at_start_stays_ignored(workspace: Path, store_path: Path) -> None:
    def hang_up_ignored() -> None:  # as under nohup
        default_signals()
        signal.signal(signal.SIGHUP, signal.SIG_IGN)

    with ScriptedServer([read(), reply("Done.", delay=1)], model=MODEL) as server:
        args = run_args(server, workspace, store_path, "Go.", "-q")
        process = spawn(args, store_path, hang_up_ignored)
        wait_for_requests(server, 2, process)
        process.send_signal(signal.SIGHUP)
        out, err = process.communicate(timeout=10)
    assert (process.returncode, out, err) == (0, "Done.\n", "")


def test_a_crash_loses_nothing_that_was_checkpointed(
    workspace: Path, store_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = [read(), read("sub/b.py"), reply("never", delay=30)]
    with ScriptedServer(script, model=MODEL) as server:
        process = spawn(run_args(server, workspace, store_path, "Read both."), store_path)
        wait_for_requests(server, 3, process)
        process.kill()  # no cleanup of any kind
        process.communicate(timeout=10)
    with Store(store_path) as store:
        run_id = store.latest_run()
        assert run_id is not None
        record = store.load_run(run_id)
    assert record.status is None  # it never ended
    # The third request was stored as in flight before it was sent, so the kill loses nothing.
    assert record.checkpoint is not None and record.checkpoint["run"]["turns"] == 3
    assert record.checkpoint["run"]["model_calls"] == 3
    assert len(record.checkpoint["in_flight"]) == 1
    assert [m["role"] for m in record.messages][-4:] == ["assistant", "tool", "assistant", "tool"]
    with ScriptedServer([reply("Both read: done.")], model=MODEL) as server:
        args = run_args(server, workspace, store_path, "Finish.", "--resume", run_id, "--json")
        assert main([*args, "-q"]) == 0
        assert server.requests[0]["messages"][: len(record.messages)] == record.messages
    label = json_lines(capsys.readouterr().out)[-1]
    assert label["outcome"]["run_id"] == run_id
    # Served 3 + 1 model calls; counted as many: the unanswered one at its reservation.
    assert label["outcome"]["usage"]["model_calls"] == 4
    assert label["outcome"]["usage"]["turns"] == 4
    assert label["outcome"]["partial_output"] == "Both read: done."


def test_resume_of_an_unknown_run_is_a_clear_error(
    store_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["run", "Go.", "--base-url", "http://127.0.0.1:9/v1", "--resume", "nope"]
    assert main([*args, "--store", str(store_path)]) == 2
    assert "no run 'nope'" in capsys.readouterr().err


def test_demo_runs_offline_and_ends_with_the_pointer(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    assert "Turns: 1/25" in out and "Turns: 4/25" in out
    assert "haltwise → model: You seem to be stuck" in out
    assert "abandoned (stuck." in out
    assert "What the stop saved" in out and "Not spent:" in out
    # Its store is a temporary one: no checkpoint is promised from it.
    assert "checkpointed (sqlite:" not in out and "were temporary and are gone" in out
    assert out.rstrip().splitlines()[-3].lstrip().startswith("haltwise chat --base-url")


def test_demo_with_a_small_turn_limit_stops_at_it(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--max-turns", "3", "--no-stuck"]) == 0
    out = capsys.readouterr().out
    assert "Turn 3 of 3" in out and "abandoned (turn_limit)" in out


def test_a_cost_limit_on_an_unpriced_model_fails_before_spending(
    workspace: Path, store_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with ScriptedServer(["hi"], model=MODEL) as server:
        code = main(run_args(server, workspace, store_path, "Hi.", "--max-cost", "1"))
        assert server.requests == []
    assert code == 2
    assert "no price is known for model 'scripted-model'" in capsys.readouterr().err


# --------------------------------------------------------------------------------------------
# What a misbehaving model or endpoint sends ends the run as any answer does


def test_a_deeply_nested_tool_call_is_shown_as_it_came(
    workspace: Path, store_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    nested = '{"path":' + "[" * 5000 + "]" * 5000 + "}"
    script = [reply(tool_calls=[ToolCall("read_file", nested)]), reply("done")]
    with ScriptedServer(script, model=MODEL) as server:
        code = main(run_args(server, workspace, store_path, "Read."))  # the chat's view too
    captured = capsys.readouterr()
    assert code == 0 and captured.out == "done\n"
    assert 'read_file({"path":[[[[' in captured.err
    assert "the arguments are not valid JSON: nested too deeply" in captured.err


@pytest.mark.parametrize("json_flag", [["--json"], []])
def test_a_lone_surrogate_from_the_model_ends_the_run_with_its_label(
    workspace: Path,
    store_path: Path,
    capsys: pytest.CaptureFixture[str],
    escaping_server: None,
    json_flag: list[str],
) -> None:
    unnamed = reply("Let me look \ud800.", tool_calls=[ToolCall("read\ud800", "{}")])
    with ScriptedServer([unnamed, reply("done \ud800")], model=MODEL) as server:
        code = main(run_args(server, workspace, store_path, "Read.", *json_flag))
    captured = capsys.readouterr()  # UTF-8, strict, as a pipe is
    assert code == 0
    if not json_flag:
        assert captured.out == "done \ufffd\n"
        return
    lines = json_lines(captured.out)
    assert [line["type"] for line in lines].count("Label") == 1
    assert lines[-1]["outcome"]["partial_output"] == "done \ufffd"
    calls = [line for line in lines if line["type"] == "ToolCall"]
    assert calls[0]["name"] == "read\ufffd"


def test_an_answer_stdout_cannot_encode_is_escaped(
    workspace: Path, store_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for json_flag in ([], ["--json"]):
        stdout = io.TextIOWrapper(io.BytesIO(), encoding="ascii")
        monkeypatch.setattr(sys, "stdout", stdout)
        with ScriptedServer([reply("café ✓")], model=MODEL) as server:
            code = main(run_args(server, workspace, store_path, "Hi.", "-q", *json_flag))
        stdout.flush()
        written = stdout.buffer.getvalue().decode("ascii")
        assert code == 0
        if json_flag:
            assert json_lines(written)[-1]["outcome"]["partial_output"] == "café ✓"
        else:
            assert written == "caf\\xe9 \\u2713\n"


def test_usage_that_is_not_a_count_is_a_warning_not_an_error(
    workspace: Path, store_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    usage = MisreportedUsage(cast(int, "x"), 1)
    with ScriptedServer([reply("done", usage=usage)], model=MODEL) as server:
        code = main(run_args(server, workspace, store_path, "Hi.", "--json"))
        endpoint = server.base_url
    captured = capsys.readouterr()
    assert code == 0
    said = f"the model endpoint at {endpoint} reported usage.prompt_tokens='x', which is not"
    assert said in captured.err
    lines = json_lines(captured.out)
    [response] = [line for line in lines if line["type"] == "ModelResponse"]
    # Counted at an estimate from the sizes of its prompt and reply, never as free.
    assert response.get("answered", True) is True
    assert response["input_tokens"] > 0 and response["output_tokens"] == 1
    [warning] = lines[-1]["warnings"]
    assert warning.startswith(said)
