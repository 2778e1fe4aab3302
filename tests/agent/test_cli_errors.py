"""The ``haltwise`` command when things go wrong, as a user meets it in a real process: each bad
input (an extra not installed too) is one line on stderr and an exit code; a crash of ours, a
closed pipe and a second signal still end the run with its outcome; ``--version``;
``--on-ledger-error``; resume hints."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from child_process import child_environ, default_signals

from haltwise.agent.store import Store
from haltwise.cli import main
from haltwise.testing import ScriptedServer, ScriptEntry, raw, raw_stream, reply, tool_call

#: The workspace, the store and the isolation from the user's environment.
pytest_plugins = ["agent_fixtures"]

MODEL = "scripted-model"
#: Options that get a run past its endpoint's checks without a server (nothing is sent).
NO_SERVER = ["--base-url", "http://127.0.0.1:9/v1", "--model", "m"]
ROOT = hasattr(os, "geteuid") and os.geteuid() == 0


def haltwise_command(*args: str, prelude: str = "") -> list[str]:
    """``python -m haltwise ARGS``; with ``prelude``, that code runs first in the process (to
    plant a bug)."""
    if not prelude:
        return [sys.executable, "-m", "haltwise", *args]
    start = f"{prelude}\nimport sys\nfrom haltwise.cli import main\nsys.exit(main())"
    return [sys.executable, "-c", start, *args]


def run_haltwise(
    *args: str, cwd: Path, prelude: str = "", **environ: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        haltwise_command(*args, prelude=prelude),
        capture_output=True,
        text=True,
        cwd=cwd,
        env=child_environ(**environ),
        timeout=60,
        preexec_fn=default_signals,
    )


def json_lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


# --------------------------------------------------------------------------------------------
# One line and an exit code for each bad input


@dataclass(frozen=True)
class Case:
    """A command line (``{tmp}`` is the test's folder), the files it needs, and what it must
    print first on stderr (a regular expression) with which exit code."""

    args: list[str]
    first_line: str
    code: int = 2
    files: dict[str, bytes] = field(default_factory=dict)
    environ: dict[str, str] = field(default_factory=dict)
    #: Made read-only (and unreadable) before the command runs.
    locked: list[str] = field(default_factory=list)
    as_root_too: bool = True
    #: Modules the command cannot import, as if their extra were not installed.
    missing: list[str] = field(default_factory=list)


CASES: dict[str, Case] = {
    "config not UTF-8": Case(
        ["run", "Go.", "--config", "{tmp}/h.toml", *NO_SERVER],
        r"haltwise run: config file \S+/h\.toml is not UTF-8 text \(byte 0xff on line 2\); "
        r"save it as UTF-8$",
        files={"h.toml": b"max_turns = 5\n# caf\xff\n"},
    ),
    "haltwise.toml found here, not UTF-8": Case(
        ["run", "Go.", *NO_SERVER],
        r"haltwise run: config file haltwise\.toml is not UTF-8 text \(byte 0xe9 on line 1\)",
        files={"haltwise.toml": b"# \xe9t\xe9\n"},
    ),
    "config is a folder": Case(
        ["run", "Go.", "--config", "{tmp}", *NO_SERVER],
        r"haltwise run: config file \S+ is a folder; name the file in it, e.g. --config "
        r"\S+/haltwise\.toml$",
    ),
    "config missing": Case(
        ["run", "Go.", "--config", "{tmp}/nope.toml", *NO_SERVER],
        r"haltwise run: config file \S+/nope\.toml does not exist; name another with --config$",
    ),
    "config unreadable": Case(
        ["run", "Go.", "--config", "{tmp}/h.toml", *NO_SERVER],
        r"haltwise run: config file \S+/h\.toml cannot be read \(permission denied\); make it "
        r"readable \(chmod u\+r \S+\) or name another with --config$",
        files={"h.toml": b"max_turns = 5\n"},
        locked=["h.toml"],
        as_root_too=False,
    ),
    "config not TOML": Case(
        ["run", "Go.", "--config", "{tmp}/h.toml", *NO_SERVER],
        r"haltwise run: config file \S+/h\.toml: not valid TOML: .*\(at line 2, column 14\); "
        r"fix that line",
        files={"h.toml": b"max_turns = 5\nmax_tokens = \n"},
    ),
    "config bad value": Case(
        ["run", "Go.", "--config", "{tmp}/h.toml", *NO_SERVER],
        r"haltwise run: \S+/h\.toml: max_turns=-1 is not valid: expected a non-negative integer",
        files={"h.toml": b"max_turns = -1\n"},
    ),
    "audit config not UTF-8": Case(
        ["audit", "{tmp}", "--config", "{tmp}/h.toml"],
        r"haltwise audit: config file \S+/h\.toml is not UTF-8 text",
        files={"h.toml": b"\xff"},
    ),
    "audit --html in a missing folder": Case(
        ["audit", "{tmp}", "--html", "/no/such/dir/r.html"],
        r"haltwise audit: --html /no/such/dir/r\.html: the folder /no/such/dir does not exist; "
        r"create it \(mkdir -p /no/such/dir\) or choose another path with --html$",
    ),
    "audit --html is a folder": Case(
        ["audit", "{tmp}", "--html", "{tmp}"],
        r"haltwise audit: --html \S+: is a folder; name a file \(in it\) instead$",
    ),
    "audit --html in a folder that is a file": Case(
        ["audit", "{tmp}", "--html", "{tmp}/f.txt/r.html"],
        r"haltwise audit: --html \S+: \S+/f\.txt is not a folder; choose another path",
        files={"f.txt": b"x"},
    ),
    "audit --html not writable": Case(
        ["audit", "{tmp}", "--html", "{tmp}/out/r.html"],
        r"haltwise audit: --html \S+: \S+/out is not writable; choose another path with --html$",
        files={"out/keep": b""},
        locked=["out"],
        as_root_too=False,
    ),
    "audit path missing": Case(
        ["audit", "{tmp}/nothing"],
        r"haltwise audit: no such file or folder: \S+/nothing$",
    ),
    "store under a file": Case(
        ["run", "Go.", "--store", "{tmp}/f.txt/s.db", *NO_SERVER],
        r"haltwise run: cannot open the SQLite ledger",
        files={"f.txt": b"x"},
    ),
    "--on-ledger-error flag": Case(
        ["run", "Go.", "--on-ledger-error", "ajar", *NO_SERVER],
        r"haltwise run: --on-ledger-error='ajar' is not valid: expected 'closed' \(an "
        r"unreachable ledger stops the run\) or 'open'",
    ),
    "on_ledger_error in the config": Case(
        ["run", "Go.", "--config", "{tmp}/h.toml", *NO_SERVER],
        r"haltwise run: \S+/h\.toml: on_ledger_error=3 is not valid: expected 'closed'",
        files={"h.toml": b"on_ledger_error = 3\n"},
    ),
    "HALTWISE_ON_LEDGER_ERROR": Case(
        ["run", "Go.", *NO_SERVER],
        r"haltwise run: HALTWISE_ON_LEDGER_ERROR='shut' is not valid: expected 'closed'",
        environ={"HALTWISE_ON_LEDGER_ERROR": "shut"},
    ),
    "--max-output-tokens -1": Case(
        ["run", "Go.", "--max-output-tokens", "-1", *NO_SERVER],
        # Not "or 'unlimited'": the flag takes none (leaving it out is that).
        r"haltwise run: --max-output-tokens='-1' is not valid: expected a whole number from 1 "
        r"to [0-9,]+$",
    ),
    "--max-output-tokens unlimited": Case(
        ["run", "Go.", "--max-output-tokens", "unlimited", *NO_SERVER],
        r"haltwise run: --max-output-tokens='unlimited' is not valid: expected a whole number "
        r"from 1 to [0-9,]+$",
    ),
    "--resume of no run": Case(
        ["run", "Go.", "--resume", "nope", *NO_SERVER],
        r"haltwise run: no run 'nope' in the store '\S+/store\.db'; list its runs with "
        r"`haltwise runs --all --ledger sqlite://\S+/store\.db`$",
    ),
    "empty task": Case(
        ["run", " ", *NO_SERVER],
        r"haltwise run: the task is empty: say what the agent should do$",
    ),
    "no endpoint": Case(
        ["run", "Go."],
        r"haltwise run: no model endpoint: set OPENAI_API_KEY",
    ),
    "unreachable endpoint": Case(
        ["run", "Go.", *NO_SERVER, "-q"],
        r"haltwise run: cannot reach the model endpoint at http://127\.0\.0\.1:9/v1",
        code=1,
    ),
    "stop with no run": Case(
        ["stop"],
        r"haltwise stop: say which runs to stop: a run's id \(haltwise stop RUN; haltwise runs "
        r"lists them\), --all for every live run, or --all --key K for those spending budget K$",
    ),
    "stop with a run and --all": Case(
        ["stop", "r1", "--all"],
        r"haltwise stop: name one run \(haltwise stop RUN\) or say --all, not both$",
    ),
    "demo without the agent's extra": Case(
        ["demo"],
        r"haltwise demo: the agent needs its extra \(openai is missing\): pip install "
        r'"haltwise\[agent\]"$',
        missing=["openai"],
    ),
    "chat without the agent's extra": Case(
        ["chat", *NO_SERVER],
        r"haltwise chat: the agent needs its extra \(prompt_toolkit, rich are missing\): pip "
        r'install "haltwise\[agent\]"$',
        missing=["prompt_toolkit", "rich"],
    ),
    "run without the agent's extra": Case(
        ["run", "Go.", *NO_SERVER],
        r"haltwise run: the agent needs its extra \(re2 is missing\): pip install "
        r'"haltwise\[agent\]"$',
        missing=["re2"],
    ),
    "runs on Redis without its extra": Case(
        ["runs", "--ledger", "redis://127.0.0.1:9/0"],
        r"haltwise runs: the Redis ledger needs its extra \(redis is missing\): pip install "
        r'"haltwise\[redis\]"$',
        missing=["redis"],
    ),
    "dashboard without its extra": Case(
        ["dashboard", "--ledger", "memory:", "--port", "0"],
        r"haltwise dashboard: the dashboard needs its extra \(sse_starlette is missing\): pip "
        r'install "haltwise\[dashboard\]"$',
        missing=["sse_starlette"],
    ),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_a_bad_input_is_one_line_and_an_exit_code(case: Case, tmp_path: Path) -> None:
    if ROOT and not case.as_root_too:
        pytest.skip("permissions do not stop root")
    folder = tmp_path / "case"
    folder.mkdir()
    for name, data in case.files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(data)
    for name in case.locked:
        (folder / name).chmod(0o500 if (folder / name).is_dir() else 0o000)
    args = [arg.replace("{tmp}", str(folder)) for arg in case.args]
    environ = {"HALTWISE_STORE": str(tmp_path / "store.db"), **case.environ}
    hidden = "".join(f"sys.modules[{name!r}] = None\n" for name in case.missing)
    prelude = f"import sys\n{hidden}" if hidden else ""
    done = run_haltwise(*args, cwd=folder, prelude=prelude, **environ)
    for name in case.locked:
        (folder / name).chmod(0o700)
    assert done.returncode == case.code, done.stderr
    assert re.match(case.first_line, done.stderr), done.stderr
    assert done.stderr.count("\n") == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert not (folder / "r.html").exists()


def test_version_comes_from_the_package_metadata(tmp_path: Path) -> None:
    from importlib.metadata import version

    from haltwise import _compiled

    # The build in force follows: compiled or pure, and why.
    done = run_haltwise("--version", cwd=tmp_path)
    assert (done.returncode, done.stdout, done.stderr) == (
        0,
        f"haltwise {version('haltwise')} ({_compiled.BUILD}: {_compiled.REASON})\n",
        "",
    )
    done = run_haltwise("--version", cwd=tmp_path, HALTWISE_PURE="1")
    assert done.stdout == f"haltwise {version('haltwise')} (pure: HALTWISE_PURE is set)\n"


# --------------------------------------------------------------------------------------------
# Whatever ends a run, one outcome line


READ = tool_call("read_file", {"path": "a.txt"})


def read(path: str = "a.txt") -> ScriptEntry:
    return reply(f"Reading {path}.", tool_calls=[tool_call("read_file", {"path": path})])


def run_args(server: ScriptedServer, workspace: Path, *more: str) -> list[str]:
    base = ["run", "--base-url", server.base_url, "--model", MODEL, "--workspace", str(workspace)]
    return [*base, *more]


def start(args: list[str], store: Path, prelude: str = "", **popen: Any) -> subprocess.Popen[str]:
    return subprocess.Popen(
        haltwise_command(*args, prelude=prelude),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=child_environ(HALTWISE_STORE=str(store)),
        preexec_fn=default_signals,
        **popen,
    )


def wait_for(condition: Callable[[], bool], process: subprocess.Popen[str]) -> None:
    import time

    deadline = time.monotonic() + 20
    while not condition():
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "it never happened"
        time.sleep(0.02)


#: A tool with a bug of ours in it.
CRASHING_TOOL = """\
from haltwise.agent.tools import Toolbox
def read_file(self, **arguments):
    raise RuntimeError("a bug in read_file")
Toolbox.read_file = read_file"""

#: A tool that does not heed a cancel: only a second signal stops the wait.
DEAF_TOOL = """\
import sys, time
from haltwise.agent.tools import Toolbox, ToolOutput
def read_file(self, **arguments):
    sys.stderr.write("reading\\n")
    sys.stderr.flush()
    time.sleep(30)
    return ToolOutput("late")
Toolbox.read_file = read_file"""


def test_a_crash_in_a_tool_is_an_error_outcome_with_its_traceback_in_the_log(
    workspace: Path, store_path: Path
) -> None:
    with ScriptedServer([read(), reply("never")], model=MODEL) as server:
        args = run_args(server, workspace, "Read.", "--json", "-q", "--store", str(store_path))
        process = start(args, store_path, CRASHING_TOOL)
        out, err = process.communicate(timeout=30)
    assert process.returncode == 1
    lines = json_lines(out)
    assert [line["type"] for line in lines].count("Label") == 1
    label = lines[-1]
    assert (label["type"], label["exit_code"]) == ("Label", 1)
    outcome = label["outcome"]
    assert (outcome["status"], outcome["reason"]) == ("abandoned", "error")
    assert outcome["message"] == "The agent loop raised RuntimeError: a bug in read_file"
    log = store_path.parent / "haltwise.log"
    assert err == (
        "haltwise run: internal error (RuntimeError: a bug in read_file); this is a bug in "
        f"haltwise, please report it: the traceback is in {log}\n"
    )
    logged = log.read_text()
    assert "Traceback (most recent call last)" in logged
    assert logged.rstrip().endswith("RuntimeError: a bug in read_file")
    with Store(store_path) as store:
        record = store.load_run(outcome["run_id"])
    assert (record.status, record.reason) == ("abandoned", "error")


#: Endpoints that answer HTTP 200 with no reply, and what ``haltwise run`` then says of them.
NO_REPLY = {
    "a web page": (
        raw("<html>oops</html>", content_type="text/html"),
        "sent no chat completion chunk: it answered HTTP 200 with '<html>oops</html>' "
        "(content type 'text/html')",
    ),
    "data that is not JSON": (
        raw_stream("{not json"),
        "sent stream data that is not JSON (Expecting property name enclosed in double quotes "
        "at character 1): '{not json'",
    ),
    "content that is a number": (
        raw_stream({"choices": [{"index": 0, "delta": {"content": 5}}]}),
        "sent a chunk that is not a chat completion chunk: choices[0].delta.content is 5, "
        "where text or null belongs",
    ),
}


@pytest.mark.parametrize("entry", NO_REPLY.values(), ids=NO_REPLY)
def test_an_endpoint_that_sends_no_reply_fails_the_run_naming_it_not_as_our_bug(
    workspace: Path, store_path: Path, entry: tuple[ScriptEntry, str]
) -> None:
    answer, expected = entry
    with ScriptedServer([answer], model=MODEL) as server:
        args = run_args(server, workspace, "Hi.", "--json", "-q", "--store", str(store_path))
        process = start(args, store_path)
        out, err = process.communicate(timeout=30)
        endpoint = server.base_url
    assert process.returncode == 1
    assert err.splitlines()[-1].startswith(
        f"haltwise run: the model endpoint at {endpoint} {expected}"
    )
    assert "internal error" not in err and not (store_path.parent / "haltwise.log").exists()
    label = json_lines(out)[-1]
    assert (label["type"], label["exit_code"]) == ("Label", 1)
    assert (label["outcome"]["status"], label["outcome"]["reason"]) == ("abandoned", "error")


#: A task whose bytes are not UTF-8 (``haltwise run $'fix \\xff it'``): Python keeps the byte
#: as a lone surrogate, which no UTF-8 encoder takes.
NOT_UTF8_TASK = os.fsdecode(b"fix \xff it")


@pytest.mark.parametrize("given", ["argument", "stdin"])
def test_a_task_that_is_not_utf8_is_mended(workspace: Path, store_path: Path, given: str) -> None:
    task = NOT_UTF8_TASK if given == "argument" else "-"
    with ScriptedServer(["Done."], model=MODEL) as server:
        done = subprocess.run(
            haltwise_command(*run_args(server, workspace, task, "-q", "--store", str(store_path))),
            input=b"fix \xff it",
            capture_output=True,
            # Strict UTF-8 on stdin, as a UTF-8 locale other than C.UTF-8 gives it.
            env=child_environ(HALTWISE_STORE=str(store_path), PYTHONIOENCODING="utf-8"),
            timeout=60,
            preexec_fn=default_signals,
        )
        [request] = server.requests
    assert (done.returncode, done.stdout, done.stderr) == (0, b"Done.\n", b"")
    # The bad byte is U+FFFD wherever the task goes: the request, the store.
    assert request["messages"][-1] == {"role": "user", "content": "fix \ufffd it"}
    with Store(store_path) as store:
        run_id = store.latest_run()
        assert run_id is not None
        assert store.load_run(run_id).prompt == "fix \ufffd it"


def test_a_crash_is_logged_whatever_the_command_line_holds(
    workspace: Path, store_path: Path
) -> None:
    with ScriptedServer([read(), reply("never")], model=MODEL) as server:
        args = run_args(server, workspace, NOT_UTF8_TASK, "-q", "--store", str(store_path))
        process = start(args, store_path, CRASHING_TOOL)
        _, err = process.communicate(timeout=30)
    log = store_path.parent / "haltwise.log"
    assert process.returncode == 1
    assert err == (
        "haltwise run: internal error (RuntimeError: a bug in read_file); this is a bug in "
        f"haltwise, please report it: the traceback is in {log}\n"
    )
    # The command line as it was given: the byte that is not UTF-8 as an escape.
    logged = log.read_text(encoding="utf-8")
    assert "fix \\udcff it" in logged
    assert logged.rstrip().endswith("RuntimeError: a bug in read_file")


def test_the_crash_log_takes_text_utf8_cannot_hold(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from haltwise.cli._errors import log_crash

    monkeypatch.setattr(sys, "argv", ["haltwise", "run", NOT_UTF8_TASK])
    try:
        raise ValueError(f"bad task {NOT_UTF8_TASK!s} \ud800")
    except ValueError as error:
        written = log_crash(error, tmp_path / "haltwise.log")
    assert written == tmp_path / "haltwise.log"
    logged = written.read_text(encoding="utf-8")
    assert "command: haltwise run fix \\udcff it\n" in logged
    assert logged.endswith("ValueError: bad task fix \\udcff it \\ud800\n")


@pytest.mark.parametrize("told_first", [True, False], ids=["told first", "within one wait"])
def test_a_second_signal_stops_waiting_and_the_run_is_recorded_cancelled(
    workspace: Path, store_path: Path, told_first: bool
) -> None:
    # Within one wait, both arrive before the loop that acts on signals looks: the first one's
    # cancel is made all the same, so the run ends cancelled (143), not abandoned as an error.
    with ScriptedServer([read(), reply("never")], model=MODEL) as server:
        args = run_args(server, workspace, "Read.", "--json", "-q", "--store", str(store_path))
        process = start(args, store_path, DEAF_TOOL)
        assert process.stderr is not None
        assert process.stderr.readline() == "reading\n"
        process.send_signal(signal.SIGTERM)
        if told_first:
            told = process.stderr.readline()
            assert told == "cancelling the run… (once more to quit at once)\n"
        else:
            time.sleep(0.05)  # apart, or the process may take the two as one
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=10)
    assert process.returncode == 143
    if not told_first:
        # On a loaded machine the loop may look between the two (50 ms apart), and say so.
        err = err.removeprefix("cancelling the run… (once more to quit at once)\n")
    assert err == "haltwise run: stopped waiting; the run is recorded as cancelled\n"
    lines = json_lines(out)
    assert [line["type"] for line in lines].count("Label") == 1
    outcome = lines[-1]["outcome"]
    assert (outcome["status"], outcome["reason"]) == ("cancelled", "cancelled")
    assert outcome["message"] == "The run was cancelled: terminated (SIGTERM)."
    with Store(store_path) as store:
        assert store.load_run(outcome["run_id"]).status == "cancelled"


def test_a_closed_pipe_cancels_the_run_quietly(workspace: Path, store_path: Path) -> None:
    """``haltwise run --json | head -1``."""
    script = [reply("Reading.", tool_calls=[READ], delay=0.3) for _ in range(10)]
    with ScriptedServer(script, model=MODEL) as server:
        args = run_args(server, workspace, "Read.", "--json", "--store", str(store_path))
        process = start(args, store_path)
        assert process.stdout is not None and process.stderr is not None
        first = json.loads(process.stdout.readline())
        process.stdout.close()  # what head does after its line
        with process.stderr:
            err = process.stderr.read()
        process.wait(timeout=20)
        served = len(server.requests)
    assert first["type"] == "RunStarted"
    assert process.returncode == 141
    assert "Traceback" not in err and "Error" not in err
    assert "The run was cancelled: its output was closed (broken pipe)." in err
    assert served < len(script)
    with Store(store_path) as store:
        record = store.load_run(first["run_id"])
    assert (record.status, record.reason) == ("cancelled", "cancelled")


def test_a_reader_gone_before_the_answer_is_quiet(workspace: Path, store_path: Path) -> None:
    """``haltwise run TASK | true``: the answer is written into a closed pipe."""
    with ScriptedServer(["The answer."], model=MODEL) as server:
        args = run_args(server, workspace, "Answer.", "-q", "--store", str(store_path))
        process = start(args, store_path)
        assert process.stdout is not None and process.stderr is not None
        process.stdout.close()
        with process.stderr:
            err = process.stderr.read()
        process.wait(timeout=20)
        assert len(server.requests) == 1
    assert (process.returncode, err) == (141, "")


# --------------------------------------------------------------------------------------------
# Settings that reach the run, and what it says at the end


@pytest.mark.parametrize(
    ("flag", "environ", "config", "expected"),
    [
        ([], {}, "", "closed"),
        ([], {}, 'on_ledger_error = "open"\n', "open"),
        ([], {"HALTWISE_ON_LEDGER_ERROR": "open"}, 'on_ledger_error = "closed"\n', "open"),
        (["--on-ledger-error", "closed"], {"HALTWISE_ON_LEDGER_ERROR": "open"}, "", "closed"),
        (["--on-ledger-error", "OPEN"], {}, "", "open"),
    ],
)
def test_on_ledger_error_reaches_the_agents_governor(
    flag: list[str],
    environ: dict[str, str],
    config: str,
    expected: str,
    workspace: Path,
    store_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from haltwise.engine import governor

    made: list[str] = []

    class Recorded(governor.Governor):
        def __init__(self, *args: Any, on_ledger_error: str = "closed", **kwargs: Any) -> None:
            made.append(on_ledger_error)
            super().__init__(*args, on_ledger_error=on_ledger_error, **kwargs)

    monkeypatch.setattr(governor, "Governor", Recorded)
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    if config:
        Path("haltwise.toml").write_text(config)
    with ScriptedServer(["Done."], model=MODEL) as server:
        args = run_args(server, workspace, "Hi.", "-q", "--store", str(store_path), *flag)
        assert main(args) == 0
    assert made == [expected]
    assert capsys.readouterr().out == "Done.\n"


def test_a_run_stopped_at_its_limit_says_which_flag_lets_it_go_on(
    workspace: Path, store_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with ScriptedServer([read(), read(), read(), read(), "Done."], model=MODEL) as server:
        base = run_args(server, workspace, "--store", str(store_path))
        assert main([*base, "Read.", "--max-turns", "2"]) == 3
        with Store(store_path) as store:
            run_id = store.latest_run()
        hint = f"to go on, raise the limit that stopped it: haltwise run --resume {run_id} "
        assert f'→ {hint}--max-turns N "…"' in capsys.readouterr().err
        # What it says is true: the same limit stops the run again at once; a higher one goes on.
        assert main([*base, "More.", "--resume", str(run_id), "--max-turns", "2", "-q"]) == 3
        assert len(server.requests) == 2
        assert main([*base, "More.", "--resume", str(run_id), "--max-turns", "5"]) == 0
    assert capsys.readouterr().out.endswith("Done.\n")


def test_the_command_a_bad_resume_names_lists_the_runs_it_can_resume(
    workspace: Path, tmp_path: Path
) -> None:
    store_path = tmp_path / "a store" / "haltwise.db"  # a space: the command quotes it
    with ScriptedServer(["Done."], model=MODEL) as server:
        args = run_args(server, workspace, "Hi.", "-q", "--store", str(store_path))
        assert run_haltwise(*args, cwd=tmp_path).returncode == 0
        refused = run_haltwise(*args, "--resume", "nope", cwd=tmp_path)
    assert refused.returncode == 2
    named = re.search(r"list its runs with `haltwise (.+)`$", refused.stderr)
    assert named, refused.stderr
    listed = run_haltwise(*shlex.split(named[1]), "--json", cwd=tmp_path)
    with Store(store_path) as store:
        run_id = store.latest_run()
    assert listed.returncode == 0, listed.stderr
    assert [row["run_id"] for row in json.loads(listed.stdout)] == [run_id]


def test_a_cancelled_run_says_it_can_be_continued(workspace: Path, store_path: Path) -> None:
    with ScriptedServer([read(), reply("late", delay=30)], model=MODEL) as server:
        process = start(run_args(server, workspace, "Go.", "--store", str(store_path)), store_path)
        wait_for(lambda: len(server.requests) == 2, process)
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=10)
    assert re.search(r'→ continue it: haltwise run --resume \w+ "…"\n$', err), err
