"""The workspace tools: confinement, exact edits, search, and shell commands with timeouts."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from haltwise.agent.tools import Toolbox, ToolError, Workspace

#: The workspace, the store and the isolation from the user's environment.
pytest_plugins = ["agent_fixtures"]


def test_paths_outside_the_workspace_are_refused(workspace: Path, tmp_path: Path) -> None:
    outside = tmp_path / "secret.txt"
    outside.write_text("secret")
    (workspace / "link").symlink_to(outside)
    (workspace / "dirlink").symlink_to(tmp_path)
    tools = Toolbox(workspace)
    attempts = [
        ("read_file", {"path": "../secret.txt"}),
        ("read_file", {"path": str(outside)}),
        ("read_file", {"path": "link"}),
        ("read_file", {"path": "dirlink/secret.txt"}),
        ("list_dir", {"path": ".."}),
        ("search", {"pattern": "secret", "path": "/"}),
        ("write_file", {"path": "../escape.txt", "content": "x"}),
        ("edit_file", {"path": "link", "old_text": "secret", "new_text": "public"}),
    ]
    for name, arguments in attempts:
        output = tools.call(name, arguments)
        assert output.is_error, (name, arguments)
        assert "outside the workspace" in output.content
    assert not (tmp_path / "escape.txt").exists()
    assert outside.read_text() == "secret"


def test_a_search_does_not_follow_symlinks_out(workspace: Path, tmp_path: Path) -> None:
    (tmp_path / "out.txt").write_text("beta outside\n")
    (workspace / "out-link.txt").symlink_to(tmp_path / "out.txt")
    output = Toolbox(workspace).call("search", {"pattern": "beta"})
    assert "outside" not in output.content
    assert "a.txt:2: beta" in output.content
    assert "sub/b.py:2: return 1  # beta" in output.content


def test_absolute_paths_inside_the_workspace_are_fine(workspace: Path) -> None:
    output = Toolbox(workspace).call("read_file", {"path": str(workspace / "a.txt")})
    assert output.content == "alpha\nbeta\ngamma\n"
    assert not output.is_error


def test_read_list_and_search(workspace: Path) -> None:
    tools = Toolbox(workspace)
    assert tools.call("read_file", '{"path": "a.txt", "offset": 2, "limit": 1}').content == "beta\n"
    listing = tools.call("list_dir", {}).content.splitlines()
    assert listing == ["sub/", "a.txt  (17 bytes)"]
    assert "no match" in tools.call("search", {"pattern": "delta"}).content
    regex = tools.call("search", {"pattern": "^g.m+a$", "regex": True})
    assert regex.content == "a.txt:3: gamma"
    bad = tools.call("search", {"pattern": "(", "regex": True})
    assert bad.is_error and "regular expression" in bad.content


def test_edits_replace_exact_text_once(workspace: Path) -> None:
    tools = Toolbox(workspace)
    missing = tools.call("edit_file", {"path": "a.txt", "old_text": "Beta", "new_text": "B"})
    assert missing.is_error and "was not found" in missing.content
    (workspace / "twice.txt").write_text("x x")
    twice = tools.call("edit_file", {"path": "twice.txt", "old_text": "x", "new_text": "y"})
    assert twice.is_error and "occurs 2 times" in twice.content
    done = tools.call("edit_file", {"path": "a.txt", "old_text": "beta\n", "new_text": "BETA\n"})
    assert not done.is_error
    assert (workspace / "a.txt").read_text() == "alpha\nBETA\ngamma\n"
    created = tools.call("write_file", {"path": "new/c.txt", "content": "one\ntwo\n"})
    assert created.content == "created new/c.txt (2 lines)"


def test_bad_calls_are_tool_errors(workspace: Path) -> None:
    tools = Toolbox(workspace)
    assert "no tool named 'rm'" in tools.call("rm", {}).content
    assert "not valid JSON" in tools.call("read_file", "{path").content
    assert "bad arguments" in tools.call("read_file", {"file": "a.txt"}).content
    assert "must be a JSON object" in tools.call("read_file", "[1]").content
    with pytest.raises(ToolError, match="is not a folder"):
        Workspace(workspace / "a.txt")


def test_shell_commands_need_approval(workspace: Path) -> None:
    refused = Toolbox(workspace).call("run_command", {"command": "touch made"})
    assert refused.is_error and "--yes" in refused.content
    asked: list[str] = []

    def deny(command: str) -> bool:
        asked.append(command)
        return False

    denied = Toolbox(workspace, approver=deny).call("run_command", {"command": "touch made"})
    assert denied.is_error and "did not approve" in denied.content
    assert asked == ["touch made"]
    assert not (workspace / "made").exists()


def test_shell_commands_run_in_the_workspace_with_exit_codes(workspace: Path) -> None:
    tools = Toolbox(workspace, approver=lambda command: True)
    ok = tools.call("run_command", {"command": "pwd && ls"})
    assert not ok.is_error and ok.exit_code == 0
    assert str(workspace) in ok.content and "a.txt" in ok.content
    failed = tools.call("run_command", {"command": "echo oops >&2; exit 3"})
    assert failed.is_error and failed.exit_code == 3
    assert "oops" in failed.content and "[exit code 3]" in failed.content


def test_shell_commands_time_out_with_their_children(workspace: Path) -> None:
    tools = Toolbox(workspace, approver=lambda command: True, command_timeout=30)
    started = time.monotonic()
    output = tools.call(
        "run_command", {"command": "echo started; sleep 20 & sleep 20", "timeout": 0.3}
    )
    assert time.monotonic() - started < 5
    assert output.is_error
    assert "started" in output.content
    assert "timed out after 0.3s: the command was killed" in output.content
    # The configured timeout caps what the model asks for.
    capped = Toolbox(workspace, approver=lambda command: True, command_timeout=0.2)
    started = time.monotonic()
    assert capped.call("run_command", {"command": "sleep 20", "timeout": 100}).is_error
    assert time.monotonic() - started < 5


def test_cancel_kills_the_running_command(workspace: Path) -> None:
    tools = Toolbox(workspace, approver=lambda command: True)
    timer = threading.Timer(0.3, tools.cancel)
    timer.start()
    started = time.monotonic()
    output = tools.call("run_command", {"command": "sleep 20"})
    assert time.monotonic() - started < 5
    assert output.is_error and "cancelled" in output.content
    timer.join()


def test_long_output_is_cut_in_the_middle(workspace: Path) -> None:
    (workspace / "big.txt").write_text("".join(f"line {i}\n" for i in range(10_000)))
    content = Toolbox(workspace).call("read_file", {"path": "big.txt"}).content
    assert content.startswith("line 0\n") and content.rstrip().endswith("line 9999")
    assert "characters cut" in content
    assert len(content) < 17_000


@pytest.mark.skipif(not hasattr(os, "killpg"), reason="process groups are POSIX")
def test_workspace_shows_paths_relative(workspace: Path) -> None:
    space = Workspace(workspace)
    assert space.show(space.resolve("sub/../a.txt")) == "a.txt"
    assert space.show(space.resolve(".")) == "."
