"""The shell sandbox (issue 12): under bubblewrap a command writes only the workspace, reaches no
network unless allowed, and dies whole at a timeout or a cancel; ``on`` refuses to run without
it, ``auto`` says it could not, ``off`` runs commands as before. Through ``Toolbox`` and through
``haltwise run``.

The tests that need a working ``bwrap`` skip saying so where it is missing, unless
``CI_REQUIRE_SANDBOX=1`` (CI), where they fail.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import secrets
import shlex
import signal
import socket
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from haltwise.agent.options import add_agent_arguments, settings_from
from haltwise.agent.sandbox import (
    Sandbox,
    SandboxUnavailableError,
    choose_sandbox,
)
from haltwise.agent.tools import Toolbox
from haltwise.cli import main
from haltwise.testing import ScriptedServer, ScriptEntry, reply, tool_call

#: The workspace, the store and the isolation from the user's environment.
pytest_plugins = ["agent_fixtures"]

MODEL = "scripted-model"
#: The interpreter behind the test's virtualenv: a checkout under /tmp (as in CI) puts the
#: virtualenv's own link where a sandboxed command sees its private, empty /tmp.
PYTHON = os.path.realpath(sys.executable)


@pytest.fixture
def confined(workspace: Path) -> Sandbox:
    """The sandbox ``auto`` gives for the workspace, when bubblewrap works here."""
    sandbox = choose_sandbox("auto", workspace)
    if not sandbox.confined:
        if os.environ.get("CI_REQUIRE_SANDBOX") == "1":
            pytest.fail(f"the sandbox cannot run: {sandbox.reason} (scripts/test.sh installs it)")
        pytest.skip(f"no sandbox here ({sandbox.reason}): `apt install bubblewrap` to run these")
    return sandbox


def shell(sandbox: Sandbox, command: str, timeout: float = 30) -> Any:
    tools = Toolbox(sandbox.workspace, approver=lambda command: True, sandbox=sandbox)
    return tools.call("run_command", {"command": command, "timeout": timeout})


@pytest.fixture
def listener() -> Iterator[int]:
    """A TCP server on 127.0.0.1 (the kernel completes the handshake); its port."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        yield server.getsockname()[1]


def connect_script(workspace: Path, port: int) -> str:
    """A command that prints ``connected`` if it reaches the listener."""
    (workspace / "connect.py").write_text(
        "import socket\n"
        f"socket.create_connection(('127.0.0.1', {port}), timeout=5).close()\n"
        "print('connected')\n"
    )
    return f"{PYTHON} connect.py"


# --------------------------------------------------------------------------------------------
# What a confined command may write


def test_a_write_outside_the_workspace_fails_and_leaves_nothing(
    confined: Sandbox, tmp_path: Path
) -> None:
    kept = tmp_path / "kept.txt"
    kept.write_text("as it was\n")
    output = shell(confined, f"echo x > ../outside; echo y >> {kept}; rm {kept}; exit 0")
    assert output.content.count("Read-only file system") == 3, output.content
    assert not (tmp_path / "outside").exists()
    assert kept.read_text() == "as it was\n"


def test_links_a_confined_command_leaves_do_not_lead_the_file_tools_out(
    confined: Sandbox, tmp_path: Path
) -> None:
    # The file tools run outside the sandbox and need no approval: a loop of links and a link
    # out, which a confined command may leave (or a cloned repository hold), once took them
    # anywhere the user can write ("loop/../out/..." resolved inside, as written).
    kept = tmp_path / "kept.txt"
    kept.write_text("as it was\n")
    made = shell(confined, f"ln -s loop loop && ln -s {tmp_path} out && echo made")
    assert made.exit_code == 0, made.content
    tools = Toolbox(confined.workspace)
    attempts = [
        ("write_file", {"path": "loop/../out/escaped.txt", "content": "x"}),
        ("edit_file", {"path": "loop/../out/kept.txt", "old_text": "as", "new_text": "x"}),
        ("read_file", {"path": "loop/../out/kept.txt"}),
    ]
    for name, arguments in attempts:
        output = tools.call(name, arguments)
        assert output.is_error and "as it was" not in output.content, (name, output.content)
    assert not (tmp_path / "escaped.txt").exists()
    assert kept.read_text() == "as it was\n"


def test_writing_inside_the_workspace_works(confined: Sandbox) -> None:
    output = shell(confined, "mkdir -p made && echo hello > made/file.txt && cat made/file.txt")
    assert output.exit_code == 0, output.content
    assert (confined.workspace / "made" / "file.txt").read_text() == "hello\n"


def test_tmp_is_writable_private_and_thrown_away(confined: Sandbox) -> None:
    name = f"haltwise-sandbox-{secrets.token_hex(4)}"
    output = shell(confined, f"echo scratch > /tmp/{name} && cat /tmp/{name}")
    assert output.exit_code == 0 and "scratch" in output.content
    assert not (Path("/tmp") / name).exists()


def test_root_inside_cannot_remount_the_filesystem_writable(
    confined: Sandbox, tmp_path: Path
) -> None:
    # The folder of /tmp that holds the workspace is a read-only bind; with capabilities
    # (haltwise run as root) a command could remount it read-write.
    held = Path("/tmp").resolve()
    top = held / confined.workspace.relative_to(held).parts[0]
    shell(confined, f"mount -o remount,rw,bind {top} ; mount -o remount,rw / ; echo x > ../out")
    assert not (tmp_path / "out").exists()


def test_hidden_folders_and_sockets_are_out_of_reach(
    confined: Sandbox, tmp_path: Path, workspace: Path
) -> None:
    sessions = tmp_path / "sessions"
    sessions.mkdir()
    (sessions / "bus").write_text("a session socket stands here")
    daemon_socket = tmp_path / "daemon.sock"
    with socket.socket(socket.AF_UNIX) as daemon:
        daemon.bind(str(daemon_socket))
        daemon.listen()
        (workspace / "knock.py").write_text(
            "import socket\n"
            "client = socket.socket(socket.AF_UNIX)\n"
            f"client.connect({str(daemon_socket)!r})\n"
            "print('reached the daemon')\n"
        )
        command = f"ls {sessions}; {PYTHON} knock.py"
        # Without hiding, a read-only filesystem does not stop a connection to a socket.
        assert "reached the daemon" in shell(confined, command).content
        hiding = Sandbox("on", confined.workspace, confined.bwrap, hidden=(sessions, daemon_socket))
        output = shell(hiding, command)
    assert "reached the daemon" not in output.content and "bus" not in output.content
    assert output.is_error


def test_a_hidden_folder_holding_the_workspace_stays_visible(
    confined: Sandbox, tmp_path: Path
) -> None:
    hiding = Sandbox("on", confined.workspace, confined.bwrap, hidden=(tmp_path,))
    output = shell(hiding, "cat a.txt && echo x > ../outside")
    assert "alpha" in output.content and "Read-only file system" in output.content
    assert not (tmp_path / "outside").exists()


# --------------------------------------------------------------------------------------------
# The network


def test_no_network_unless_allowed(confined: Sandbox, listener: int) -> None:
    command = connect_script(confined.workspace, listener)
    refused = shell(confined, command)
    assert refused.is_error and "connected" not in refused.content
    assert "ConnectionRefusedError" in refused.content
    allowed = choose_sandbox("on", confined.workspace, allow_network=True)
    assert allowed.describe() == "on (only the workspace is writable; network allowed)"
    reached = shell(allowed, command)
    assert reached.exit_code == 0 and "connected" in reached.content


# --------------------------------------------------------------------------------------------
# Timeouts and cancels kill the whole sandboxed tree


def running(marker: str, *, exactly: bool = False) -> list[int]:
    """The live processes whose command line holds ``marker`` (or is it, ``exactly``); zombies
    have none."""
    found = []
    for process in psutil.process_iter(["cmdline"]):
        command_line = " ".join(process.info["cmdline"] or ())
        if process.pid != os.getpid() and (
            command_line == marker if exactly else marker in command_line
        ):
            found.append(process.pid)
    return found


def gone(marker: str) -> bool:
    deadline = time.monotonic() + 5
    while running(marker):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def sleepers(whole: int = 30) -> tuple[str, str]:
    """A command whose sleeps (one detached into its own session) are named by a marker."""
    seconds = f"{whole}.{secrets.randbelow(10**9):09d}"
    return f"(setsid sleep {seconds} &); sleep {seconds}", f"sleep {seconds}"


def test_a_timeout_kills_every_process_of_the_sandboxed_command(confined: Sandbox) -> None:
    command, marker = sleepers()
    started = time.monotonic()
    output = shell(confined, command, timeout=0.5)
    assert time.monotonic() - started < 5
    assert output.is_error and "timed out after 0.5s" in output.content
    assert gone(marker), running(marker)


def test_a_cancel_kills_every_process_of_the_sandboxed_command(confined: Sandbox) -> None:
    command, marker = sleepers()
    tools = Toolbox(confined.workspace, approver=lambda command: True, sandbox=confined)
    results: list[Any] = []
    worker = threading.Thread(
        target=lambda: results.append(tools.call("run_command", {"command": command}))
    )
    worker.start()
    deadline = time.monotonic() + 10
    while len(running(marker, exactly=True)) < 2:  # both sleeps have started
        assert time.monotonic() < deadline, "the command never started"
        time.sleep(0.02)
    tools.cancel()
    worker.join(5)
    assert not worker.is_alive()
    assert "the run was cancelled" in results[0].content
    assert gone(marker), running(marker)


# --------------------------------------------------------------------------------------------
# Unconfined: what can be killed is, and no process that holds the output keeps the call waiting


@pytest.fixture
def unconfined_tools(workspace: Path) -> Iterator[Toolbox]:
    """Tools with the sandbox off; the test's detached sleeps are killed after it, as nothing
    unconfined can reach a process that left the command's session and its parent."""
    tools = Toolbox(
        workspace, approver=lambda command: True, sandbox=choose_sandbox("off", workspace)
    )
    yield tools
    for pid in running(f"sleep {MARKED}."):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


#: The whole seconds of the unconfined tests' sleeps: the call must return long before.
MARKED = 12


def test_unconfined_a_timeout_does_not_wait_for_a_detached_process_holding_the_output(
    unconfined_tools: Toolbox,
) -> None:
    # The detached sleep is in a session of its own, its parent gone: out of reach.
    command, marker = sleepers(MARKED)
    started = time.monotonic()
    output = unconfined_tools.call(
        "run_command", {"command": f"echo started; {command}", "timeout": 0.5}
    )
    assert time.monotonic() - started < 4
    assert output.is_error and output.content.startswith("started\n")
    assert output.content.endswith(
        "[the command timed out after 0.5s: the command was killed; a process it started "
        "kept its output open and was not waited for]"
    )
    assert running(marker, exactly=True), "the detached sleep was expected to run on"


def test_unconfined_a_cancel_does_not_wait_for_a_detached_process_holding_the_output(
    unconfined_tools: Toolbox,
) -> None:
    command, marker = sleepers(MARKED)
    results: list[Any] = []
    worker = threading.Thread(
        target=lambda: results.append(unconfined_tools.call("run_command", {"command": command}))
    )
    worker.start()
    deadline = time.monotonic() + 10
    while len(running(marker, exactly=True)) < 2:  # both sleeps have started
        assert time.monotonic() < deadline, "the command never started"
        time.sleep(0.02)
    started = time.monotonic()
    unconfined_tools.cancel()
    worker.join(4)
    assert not worker.is_alive()
    assert time.monotonic() - started < 4
    assert results[0].content.startswith("\n[the command was stopped: the run was cancelled; ")


def test_unconfined_a_timeout_kills_a_child_that_moved_to_a_session_of_its_own(
    unconfined_tools: Toolbox,
) -> None:
    # The command: setsid's sleep is still the shell's child when the time is up.
    seconds = f"{MARKED}.{secrets.randbelow(10**9):09d}"
    command = f"setsid sleep {seconds} & sleep {seconds}"
    started = time.monotonic()
    output = unconfined_tools.call("run_command", {"command": command, "timeout": 0.5})
    assert time.monotonic() - started < 4
    assert output.content == "\n[the command timed out after 0.5s: the command was killed]"
    assert gone(f"sleep {seconds}"), running(f"sleep {seconds}")


@pytest.mark.parametrize("parent", ["alive", "gone"])
def test_unconfined_a_cancel_kills_a_grandchild_that_moved_to_a_group_of_its_own(
    unconfined_tools: Toolbox, parent: str
) -> None:
    # Out of the command's process group, which killpg reaches, but still in its session:
    # found among its shell's descendants while the parent lives, by its session once the
    # parent is gone (the subshell that started it has exited: init is its parent now).
    seconds = f"{MARKED}.{secrets.randbelow(10**9):09d}"
    regroup = f"import os; os.setpgid(0, 0); os.execvp('sleep', ['sleep', '{seconds}'])"
    moved = f"{PYTHON} -c {shlex.quote(regroup)} &"
    command = f"{moved} sleep {seconds}" if parent == "alive" else f"({moved}); sleep {seconds}"
    marker = f"sleep {seconds}"
    results: list[Any] = []
    worker = threading.Thread(
        target=lambda: results.append(unconfined_tools.call("run_command", {"command": command}))
    )
    worker.start()
    deadline = time.monotonic() + 10
    while len(running(marker, exactly=True)) < 2:  # both sleeps have started
        assert time.monotonic() < deadline, "the command never started"
        time.sleep(0.02)
    (pid,) = (pid for pid in running(marker, exactly=True) if os.getpgid(pid) == pid)
    shell_is_parent = os.getsid(psutil.Process(pid).ppid()) == os.getsid(pid)
    assert shell_is_parent == (parent == "alive")
    unconfined_tools.cancel()
    worker.join(4)
    assert not worker.is_alive()
    # Killed, it no longer held the output: the call did not have to give up waiting for it.
    assert results[0].content == "\n[the command was stopped: the run was cancelled]"
    assert gone(marker), running(marker)


# --------------------------------------------------------------------------------------------
# Modes, and where bubblewrap is missing or cannot run


def test_off_runs_commands_as_before(workspace: Path, tmp_path: Path) -> None:
    sandbox = choose_sandbox("off", workspace)
    assert sandbox.argv("echo hi") == ["/bin/sh", "-c", "echo hi"]
    assert sandbox.describe() == "off (set by --sandbox)"
    output = shell(sandbox, "echo x > ../outside")
    assert output.exit_code == 0
    assert (tmp_path / "outside").read_text() == "x\n"


def test_on_without_bubblewrap_refuses_saying_how_to_install(workspace: Path) -> None:
    with pytest.raises(SandboxUnavailableError, match=r"apt install bubblewrap"):
        choose_sandbox("on", workspace, which=lambda name: None)
    sandbox = choose_sandbox("auto", workspace, which=lambda name: None)
    assert not sandbox.confined and sandbox.network
    assert sandbox.describe() == "off (bubblewrap not found)"
    assert sandbox.summary() == {
        "mode": "auto",
        "confined": False,
        "network": True,
        "reason": "bubblewrap not found",
    }


def test_a_bubblewrap_that_cannot_run_here_is_a_fallback_or_an_error(
    workspace: Path, tmp_path: Path
) -> None:
    broken = tmp_path / "bwrap"
    broken.write_text(
        "#!/bin/sh\necho 'bwrap: No permissions to create a new namespace' >&2\nexit 1\n"
    )
    broken.chmod(0o755)
    sandbox = choose_sandbox("auto", workspace, which=lambda name: str(broken))
    assert sandbox.describe() == (
        "off (bubblewrap cannot run here: bwrap: No permissions to create a new namespace)"
    )
    with pytest.raises(SandboxUnavailableError, match="cannot run here .*--sandbox off"):
        choose_sandbox("on", workspace, which=lambda name: str(broken), source="HALTWISE_SANDBOX")


def options(*flags: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_agent_arguments(parser)
    return parser.parse_args(list(flags))


def test_the_mode_comes_from_the_config_the_environment_and_the_flags(tmp_path: Path) -> None:
    config = tmp_path / "settings.toml"
    config.write_text('sandbox = "off"\nallow_network = true\n')
    from_file = settings_from(options("--config", str(config)), environ={})
    assert (from_file.sandbox, from_file.allow_network) == ("off", True)
    environ = {"HALTWISE_SANDBOX": "ON", "HALTWISE_ALLOW_NETWORK": "no"}
    from_env = settings_from(options("--config", str(config)), environ=environ)
    assert (from_env.sandbox, from_env.allow_network) == ("on", False)
    assert from_env.sources["sandbox"] == "HALTWISE_SANDBOX"
    flags = options("--config", str(config), "--sandbox", "auto", "--allow-network")
    from_flags = settings_from(flags, environ=environ)
    assert (from_flags.sandbox, from_flags.allow_network) == ("auto", True)
    defaults = settings_from(options(), environ={})
    assert (defaults.sandbox, defaults.allow_network) == ("auto", False)


# --------------------------------------------------------------------------------------------
# Through ``haltwise run``


def agent_args(server: ScriptedServer, workspace: Path, store: Path) -> list[str]:
    return [
        "--base-url",
        server.base_url,
        "--model",
        MODEL,
        "--workspace",
        str(workspace),
        "--store",
        str(store),
    ]


def run_args(server: ScriptedServer, workspace: Path, store: Path, *more: str) -> list[str]:
    return ["run", *agent_args(server, workspace, store), "--yes", "--json", *more]


def escape_script() -> list[ScriptEntry]:
    command = "echo escaped > ../outside && echo written"
    return [reply(tool_calls=[tool_call("run_command", {"command": command})]), "done"]


def test_run_a_command_writing_outside_the_workspace_fails(
    confined: Sandbox, workspace: Path, store_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with ScriptedServer(escape_script(), model=MODEL) as server:
        assert main(run_args(server, workspace, store_path, "Escape.")) == 0
        sent = server.requests[1]["messages"][-1]["content"]
    captured = capsys.readouterr()
    assert "Read-only file system" in sent and "written" not in sent
    assert not (workspace.parent / "outside").exists()
    lines = [json.loads(line) for line in captured.out.splitlines()]
    result = next(line for line in lines if line["type"] == "ToolResult")
    assert result["is_error"] is True
    assert lines[-1]["sandbox"] == {
        "mode": "auto",
        "confined": True,
        "network": False,
        "reason": None,
    }
    assert "sandbox: on (only the workspace is writable; no network)" in captured.err


def test_run_with_the_sandbox_off_writes_where_it_is_told(
    workspace: Path, store_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with ScriptedServer(escape_script(), model=MODEL) as server:
        assert main(run_args(server, workspace, store_path, "Escape.", "--sandbox", "off")) == 0
    assert (workspace.parent / "outside").read_text() == "escaped\n"
    assert "sandbox: off (set by --sandbox)" in capsys.readouterr().err


def test_run_with_the_sandbox_on_and_no_bubblewrap_exits_2(
    tmp_path: Path,
    workspace: Path,
    store_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "no-programs"))
    args = ["run", "Go.", "--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--yes"]
    more = ["--store", str(store_path), "--workspace", str(workspace), "--sandbox", "on"]
    assert main([*args, *more]) == 2
    err = capsys.readouterr().err
    assert "--sandbox is on, but bubblewrap (bwrap) is not installed" in err
    assert "apt install bubblewrap" in err and err.count("\n") == 1


def test_a_bad_mode_is_one_line_and_exits_2(
    store_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HALTWISE_SANDBOX", "sometimes")
    args = ["run", "Go.", "--base-url", "http://127.0.0.1:9/v1", "--model", "m"]
    assert main([*args, "--store", str(store_path)]) == 2
    err = capsys.readouterr().err
    assert "HALTWISE_SANDBOX='sometimes' is not valid: expected one of 'auto', 'on', 'off'" in err


# --------------------------------------------------------------------------------------------
# In the chat


def test_the_chat_shows_the_sandbox_in_its_header_and_limits(
    workspace: Path, store_path: Path
) -> None:
    from prompt_toolkit.input import create_pipe_input
    from prompt_toolkit.output import DummyOutput
    from rich.console import Console

    from haltwise.agent.chat import ChatApp
    from haltwise.cli import build_parser

    shown = io.StringIO()
    with ScriptedServer([], model=MODEL) as server, create_pipe_input() as keys:
        chat_args = ["chat", *agent_args(server, workspace, store_path), "--sandbox", "off"]
        args = build_parser().parse_args(chat_args)
        keys.send_text("/limits\r/exit\r")
        chat = ChatApp(args, input=keys, output=DummyOutput(), console=Console(file=shown))
        assert chat.main() == 0
    lines = [line for line in shown.getvalue().splitlines() if "sandbox:" in line]
    # Once in the header, once under /limits.
    assert lines == ["sandbox: off (set by --sandbox)"] * 2
