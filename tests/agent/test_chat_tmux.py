"""``haltwise chat`` in a real terminal: tmux types the keys and reads the screen.

The widget (``Turns: 3/25``), an approval, ``/turn-limit abc`` refused, ``/turn-limit 2`` then the
dialog at the third turn, ``continue`` showing the reset count, ``unlimited`` shown as ``∞``,
Ctrl-C stopping a run and a second Ctrl-C leaving; then ``--resume`` keeping the counts; SIGTERM
and a closed terminal cancelling a run with its checkpoint kept, also while a question waits;
escape sequences from the model and its tools shown, not obeyed (a command to approve cannot be
disguised); amounts to extend by that a limit cannot take asked again.
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path

import psutil
import pytest

from haltwise.agent.store import Store
from haltwise.testing import ScriptedServer, ScriptEntry, reply, tool_call

#: The workspace, the store and the isolation from the user's environment.
pytest_plugins = ["agent_fixtures"]

TMUX = shutil.which("tmux")
pytestmark = pytest.mark.skipif(
    TMUX is None, reason="needs tmux to drive a real terminal (apt-get install tmux)"
)

MODEL = "scripted-model"


class Terminal:
    """A program in a detached tmux session of its own (a private tmux server)."""

    def __init__(self, command: list[str], environ: dict[str, str]) -> None:
        assert TMUX is not None
        self.socket = f"haltwise-test-{uuid.uuid4().hex[:8]}"
        assignments = " ".join(f"{k}={shlex.quote(v)}" for k, v in environ.items())
        shell = f"env {assignments} {shlex.join(command)}; echo CHAT-EXITED $?; sleep 60"
        self._tmux("new-session", "-d", "-s", "chat", "-x", "110", "-y", "45", shell)

    def _tmux(self, *args: str) -> str:
        assert TMUX is not None
        done = subprocess.run(
            [TMUX, "-L", self.socket, *args], capture_output=True, text=True, timeout=10
        )
        return done.stdout

    def keys(self, *keys: str) -> None:
        self._tmux("send-keys", "-t", "chat", *keys)

    def type(self, line: str) -> None:
        self._tmux("send-keys", "-t", "chat", "-l", line)
        self._tmux("send-keys", "-t", "chat", "Enter")

    def title(self) -> str:
        """The window title (programs set it with an escape sequence)."""
        return self._tmux("display-message", "-p", "-t", "chat", "#{pane_title}").strip()

    def screen(self) -> str:
        return self._tmux("capture-pane", "-p", "-J", "-t", "chat", "-S", "-200")

    def bottom(self) -> str:
        """The last non-empty line: the widget."""
        lines = [line for line in self._tmux("capture-pane", "-p", "-t", "chat").splitlines()]
        return next((line for line in reversed(lines) if line.strip()), "")

    def wait_for(self, text: str, timeout: float = 15.0, *, where: str = "screen") -> str:
        deadline = time.monotonic() + timeout
        while True:
            shown = self.bottom() if where == "bottom" else self.screen()
            if text in shown:
                return shown
            if time.monotonic() > deadline:
                raise AssertionError(f"{text!r} never appeared; the screen:\n{self.screen()}")
            time.sleep(0.05)

    def close(self) -> None:
        self._tmux("kill-server")


@pytest.fixture
def terminals() -> Iterator[list[Terminal]]:
    started: list[Terminal] = []
    yield started
    for terminal in started:
        terminal.close()


def chat(
    server: ScriptedServer, workspace: Path, store: Path, *more: str
) -> tuple[list[str], dict[str, str]]:
    command = [
        sys.executable,
        "-m",
        "haltwise",
        "chat",
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
    environ = {
        "TERM": "xterm-256color",
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(store.parent),
    }
    return command, environ


def test_the_chat_as_a_user_meets_it(
    workspace: Path, store_path: Path, terminals: list[Terminal]
) -> None:
    script: list[ScriptEntry] = [
        # 1st prompt: three turns, one of them a shell command that needs approval.
        reply("Checking.", tool_calls=[tool_call("run_command", {"command": "echo shell-ran"})]),
        reply("Reading.", tool_calls=[tool_call("read_file", {"path": "a.txt"})]),
        reply("Found three letters."),
        # 2nd prompt, with /turn-limit 2: the dialog comes before the third turn.
        reply("Listing.", tool_calls=[tool_call("list_dir", {"path": "sub"})]),
        reply("Reading b.", tool_calls=[tool_call("read_file", {"path": "sub/b.py"})]),
        reply("Still reading.", tool_calls=[tool_call("list_dir")], delay=1.5),
        reply("Done reading."),
        # 3rd prompt: a model that takes its time, until Ctrl-C.
        reply("too late", delay=60),
    ]
    with ScriptedServer(script, model=MODEL) as server:
        terminal = Terminal(*chat(server, workspace, store_path))
        terminals.append(terminal)
        terminal.wait_for("Turns: 0/25", where="bottom")

        terminal.type("What is in this folder?")
        terminal.wait_for("the agent wants to run: echo shell-ran")
        terminal.wait_for("run it? [y]es / [n]o / [a]lways")
        terminal.type("y")
        terminal.wait_for("Found three letters.")
        terminal.wait_for("shell-ran")
        terminal.wait_for("Turns: 3/25", where="bottom")

        terminal.type("/turn-limit abc")
        terminal.wait_for("/turn-limit='abc' is not valid")
        terminal.wait_for("(nothing changed)")  # the screen may still be drawing: wait, not peek
        terminal.wait_for("Turns: 3/25", where="bottom")

        terminal.type("/turn-limit 2")
        terminal.wait_for("Turn limit set to 2.")
        terminal.type("Read everything.")
        terminal.wait_for("Turn limit reached — You've used 2 turns. Continue?")
        terminal.wait_for("continue / extend N / wrap up / abort")
        terminal.wait_for("Turns: 2/2", where="bottom")
        terminal.type("maybe")
        terminal.wait_for("Please answer c, e N (e.g. e 10), w or a.")
        terminal.type("c")
        terminal.wait_for("Turns: 1/2", where="bottom")  # continue restarted the count
        terminal.wait_for("Done reading.")
        terminal.wait_for("Turns: 2/2", where="bottom")

        terminal.type("/turn-limit unlimited")
        terminal.wait_for("Turns: 2/∞", where="bottom")
        terminal.type("/limits")
        terminal.wait_for("limits (this round)")
        terminal.wait_for("max_turns(unlimited, warn_at=0.8, on_limit='ask')     2    ∞")
        terminal.type("/budget")
        terminal.wait_for("this run")
        terminal.type("/frobnicate")
        terminal.wait_for("unknown command /frobnicate: try /help")

        terminal.type("Take your time.")
        terminal.wait_for("running · Ctrl-C stops", where="bottom")
        terminal.keys("C-c")
        terminal.wait_for("cancelled  run ")
        terminal.wait_for("The run was cancelled: interrupted (Ctrl-C).")
        terminal.keys("C-c")
        terminal.wait_for("CHAT-EXITED 0")


def test_resume_keeps_the_counts(
    workspace: Path, store_path: Path, terminals: list[Terminal]
) -> None:
    first = [reply("Step.", tool_calls=[tool_call("list_dir")]), reply("slow", delay=60)]
    with ScriptedServer(first, model=MODEL) as server:
        terminal = Terminal(*chat(server, workspace, store_path))
        terminals.append(terminal)
        terminal.wait_for("Turns: 0/25", where="bottom")
        terminal.type("Go.")
        terminal.wait_for("Turns: 2/25", where="bottom")
        terminal.keys("C-c")
        terminal.wait_for("resume it later: haltwise chat --resume ")
        terminal.type("/exit")
        terminal.wait_for("CHAT-EXITED 0")
    with ScriptedServer([reply("Picked up where it stopped.")], model=MODEL) as server:
        terminal = Terminal(*chat(server, workspace, store_path, "--resume"))
        terminals.append(terminal)
        terminal.wait_for("Resumed run ")
        terminal.wait_for("Turns: 2/25", where="bottom")
        terminal.type("Carry on.")
        terminal.wait_for("Picked up where it stopped.")
        terminal.wait_for("Turns: 3/25", where="bottom")  # the same run: no reset
        history = server.requests[0]["messages"]
        assert [m["role"] for m in history] == ["system", "user", "assistant", "tool", "user"]


def test_ctrl_c_at_the_dialog_cancels_the_run(
    workspace: Path, store_path: Path, terminals: list[Terminal]
) -> None:
    script = [reply("Step.", tool_calls=[tool_call("list_dir")]), reply("never")]
    with ScriptedServer(script, model=MODEL) as server:
        terminal = Terminal(*chat(server, workspace, store_path, "--max-turns", "1"))
        terminals.append(terminal)
        terminal.wait_for("Turns: 0/1", where="bottom")
        terminal.type("Go.")
        terminal.wait_for("You've used 1 turn. Continue?")
        terminal.keys("C-c")
        terminal.wait_for("The run was cancelled: interrupted (Ctrl-C).")
        terminal.wait_for("Turns: 1/1", where="bottom")  # the count was kept
        assert len(server.requests) == 1
        terminal.keys("C-c")
        terminal.wait_for("CHAT-EXITED 0")


def _chat_pid(terminal: Terminal) -> int:
    """The chat's process: the child of the pane's shell (``env`` execs Python)."""
    shell = terminal._tmux("display-message", "-p", "-t", "chat", "#{pane_pid}").strip()
    return psutil.Process(int(shell)).children()[0].pid


def _running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _gone(pid: int, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while _running(pid):
        assert time.monotonic() < deadline, f"process {pid} still runs"
        time.sleep(0.05)


@pytest.mark.parametrize(
    ("how", "reason", "code"),
    [
        ("SIGTERM", "terminated (SIGTERM)", 143),
        ("close the terminal", "the terminal hung up (SIGHUP)", None),
    ],
)
def test_sigterm_or_a_closed_terminal_cancels_the_run_and_keeps_its_checkpoint(
    workspace: Path,
    store_path: Path,
    terminals: list[Terminal],
    how: str,
    reason: str,
    code: int | None,
) -> None:
    script = [reply("Step.", tool_calls=[tool_call("list_dir")]), reply("slow", delay=60)]
    with ScriptedServer(script, model=MODEL) as server:
        terminal = Terminal(*chat(server, workspace, store_path))
        terminals.append(terminal)
        terminal.wait_for("Turns: 0/25", where="bottom")
        terminal.type("Go.")
        terminal.wait_for("Turns: 2/25", where="bottom")  # waiting on the slow reply
        pid = _chat_pid(terminal)
        if how == "SIGTERM":
            os.kill(pid, signal.SIGTERM)
            terminal.wait_for(f"The run was cancelled: {reason}.")
            terminal.wait_for(f"CHAT-EXITED {code}")
        else:
            terminal.close()  # the pane's terminal goes away: SIGHUP
            _gone(pid)
    with Store(store_path) as store:
        record = store.load_run(store.recent_runs()[0][0])
    assert (record.status, record.reason) == ("cancelled", "cancelled")
    assert record.outcome is not None and reason in record.outcome["message"]
    assert record.checkpoint is not None and record.checkpoint["run"]["model_calls"] == 2


def _wait_until(condition: Callable[[], bool], timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "the condition never held"
        time.sleep(0.05)


def _shown_times(terminal: Terminal, text: str, times: int) -> bool:
    return terminal.screen().count(text) == times


def _last_run(store_path: Path) -> tuple[str | None, str | None, str]:
    """The latest run's status, reason and outcome message."""
    with Store(store_path) as store:
        record = store.load_run(store.recent_runs()[0][0])
    message = "" if record.outcome is None else str(record.outcome["message"])
    return record.status, record.reason, message


#: What a run cancelled by a closing terminal says.
_CLOSED = ("the terminal hung up (SIGHUP)", "the chat could not ask (OSError: [Errno 5]")


@pytest.mark.parametrize(
    ("question", "how", "reason", "code"),
    [
        ("limit", "SIGTERM", ("terminated (SIGTERM)",), 143),
        ("approve", "SIGTERM", ("terminated (SIGTERM)",), 143),
        ("limit", "SIGHUP", ("the terminal hung up (SIGHUP)",), 129),
        ("approve", "SIGHUP", ("the terminal hung up (SIGHUP)",), 129),
        # The terminal closed: its SIGHUP, or the EIO of its end that may come first.
        ("approve", "close the terminal", _CLOSED, None),
        ("limit", "close the terminal", _CLOSED, None),
    ],
)
def test_a_signal_while_a_question_waits_cancels_the_run_and_ends_the_chat(
    workspace: Path,
    store_path: Path,
    terminals: list[Terminal],
    question: str,
    how: str,
    reason: tuple[str, ...],
    code: int | None,
) -> None:
    more: tuple[str, ...] = ()
    if question == "limit":
        script = [reply("Step.", tool_calls=[tool_call("list_dir")]), reply("never")]
        more, asked = ("--max-turns", "1"), "continue / extend N / wrap up / abort"
    else:
        script = [reply("Run.", tool_calls=[tool_call("run_command", {"command": "true"})])]
        asked = "run it? [y]es / [n]o / [a]lways"
    with ScriptedServer(script, model=MODEL) as server:
        terminal = Terminal(*chat(server, workspace, store_path, *more))
        terminals.append(terminal)
        terminal.wait_for("Turns: 0/", where="bottom")
        terminal.type("Go.")
        terminal.wait_for(asked)
        pid = _chat_pid(terminal)
        if how == "close the terminal":
            terminal.close()
            _gone(pid)
        else:
            os.kill(pid, signal.Signals[how])
            terminal.wait_for(f"The run was cancelled: {reason[0]}.")
            terminal.wait_for(f"CHAT-EXITED {code}")
        assert len(server.requests) == 1
    status, stopped, message = _last_run(store_path)
    assert (status, stopped) == ("cancelled", "cancelled")
    assert any(said in message for said in reason), message


def test_escape_sequences_from_the_model_and_its_tools_are_shown_not_obeyed(
    workspace: Path, store_path: Path, terminals: list[Terminal]
) -> None:
    esc = "\x1b"
    up_and_erase = f"{esc}[1A{esc}[2K{esc}[1A{esc}[2K{esc}[1G"
    disguise = f'{esc}[33m  ⚙ run_command(command="ls"){esc}[0m\n⏸  the agent wants to run: ls'
    script: list[ScriptEntry] = [
        reply(f"hello {esc}]0;PWNED-BY-MODEL{esc}\\ {esc}[2J{esc}[Hafter-clear"),
        reply(
            "Listing.",
            tool_calls=[
                tool_call("run_command", {"command": f"touch PWNED # {up_and_erase}{disguise}"})
            ],
        ),
        reply("Refused, then.", tool_calls=[tool_call("run_command", {"command": "ls \u202e"})]),
        reply(
            "Printing.",
            tool_calls=[
                tool_call("run_command", {"command": "printf '\\033]0;PWNED-BY-TOOL\\007 out'"})
            ],
        ),
        reply("Done."),
    ]
    with ScriptedServer(script, model=MODEL) as server:
        terminal = Terminal(*chat(server, workspace, store_path))
        terminals.append(terminal)
        terminal.wait_for("Turns: 0/25", where="bottom")
        title = terminal.title()

        terminal.type("Say hello.")
        terminal.wait_for("hello \\x1b]0;PWNED-BY-MODEL\\x1b\\ \\x1b[2J\\x1b[Hafter-clear")
        terminal.wait_for("Turns: 1/25", where="bottom")
        assert "haltwise chat · " in terminal.screen()  # the screen was not cleared

        terminal.type("List the files.")
        shown = terminal.wait_for("run it? [y]es / [n]o / [a]lways")
        assert (
            "⏸  the agent wants to run: touch PWNED # \\x1b[1A\\x1b[2K\\x1b[1A\\x1b[2K\\x1b[1G"
            in shown
        )
        assert "(it holds characters a terminal acts on or hides" in shown
        terminal.type("n")
        terminal.wait_for("⏸  the agent wants to run: ls \\u202e")
        terminal.type("n")
        terminal.wait_for("the agent wants to run: printf '\\033]0;PWNED-BY-TOOL\\007 out'")
        terminal.type("y")
        terminal.wait_for("✓ \\x1b]0;PWNED-BY-TOOL\\x07 out")
        terminal.wait_for("Done.")
        assert terminal.title() == title
        assert not (workspace / "PWNED").exists()
        terminal.type("/exit")
        terminal.wait_for("CHAT-EXITED 0")


def test_an_extension_the_limit_cannot_take_is_asked_again(
    workspace: Path, store_path: Path, terminals: list[Terminal]
) -> None:
    steps = [reply("Step.", tool_calls=[tool_call("list_dir")]) for _ in range(2)]
    with ScriptedServer([*steps, reply("Done stepping.")], model=MODEL) as server:
        terminal = Terminal(*chat(server, workspace, store_path, "--max-turns", "1"))
        terminals.append(terminal)
        terminal.wait_for("Turns: 0/1", where="bottom")
        terminal.type("Go.")
        terminal.wait_for("continue / extend N / wrap up / abort")
        for asked, typed in enumerate(("e 1.0e400", "+1.0e999", "e 0.5", "e nan", "e 0", "e -3")):
            terminal.type(typed)
            _wait_until(partial(_shown_times, terminal, "Please answer", asked + 1))
        screen = terminal.screen()
        assert (
            screen.count("Please answer c, e N (e.g. e 10), w or a. (N: a whole number from 1)")
            == 6
        )
        terminal.type("e 2")
        terminal.wait_for("Done stepping.")
        terminal.wait_for("Turns: 3/3", where="bottom")
        assert "1.5" not in terminal.screen()
        terminal.type("/exit")
        terminal.wait_for("CHAT-EXITED 0")
    assert _last_run(store_path)[:2] == ("completed", "completed")
