"""The workspace tools: confinement, exact edits, search, and shell commands with timeouts."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
import time
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import haltwise
import haltwise.agent.tools as tools_module
from haltwise.agent.tools import Toolbox, ToolError, ToolOutput, Workspace, _Clip, _truncate
from haltwise.cli import main
from haltwise.testing import ScriptedServer, reply, tool_call

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
    (workspace / "binary.bin").write_bytes(b"x\xff")
    binary = tools.call("edit_file", {"path": "binary.bin", "old_text": "x", "new_text": "y"})
    assert binary == ToolOutput("'binary.bin' is not UTF-8 text; edit_file only edits text", True)


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


def test_a_command_that_prints_a_lot_is_kept_head_and_tail_in_bounded_memory(
    workspace: Path,
) -> None:
    # 20 MB printed: only what the model gets is held (communicate() held it all, and its text).
    tools = Toolbox(workspace, approver=lambda command: True)
    command = "echo first; head -c 20000000 /dev/zero | tr '\\0' a; echo; echo last"
    tracemalloc.start()
    try:
        output = tools.call("run_command", {"command": command})
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 2_000_000, f"{peak:,} bytes held at the peak"
    printed = len("first\n") + 20_000_000 + len("\nlast\n")
    head, tail = output.content[:8_000], output.content[-8_000 - len("\n[exit code 0]") :]
    assert head.startswith("first\naaa") and tail.endswith("a\nlast\n\n[exit code 0]")
    assert f"\n[... {printed - 16_000} characters cut ...]\n" in output.content
    assert (output.exit_code, output.is_error) == (0, False)


def test_command_output_that_is_not_utf8_reads_as_its_whole_decoding(workspace: Path) -> None:
    # Read in pieces that cut characters in two, it is the text of one bytes.decode(errors=
    # "replace"): 3-byte characters across 64 KiB reads, bytes that are no UTF-8, a NUL, and
    # a character cut short at the end.
    data = b"\xff\x00" + "€".encode() * 40_000 + b"\xc3(" + b"\xe2\x82"
    (workspace / "bytes.bin").write_bytes(data)
    tools = Toolbox(workspace, approver=lambda command: True)
    output = tools.call("run_command", {"command": "cat bytes.bin"})
    assert output.content == f"{_truncate(data.decode('utf-8', 'replace'))}\n[exit code 0]"


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


_ISSUE_SEARCH = """
import sys, time
from haltwise.agent.tools import Toolbox
tools = Toolbox(sys.argv[1])
started = time.monotonic()
output = tools.call("search", {"pattern": "(a+)+$", "regex": True, "path": "as.txt"})
print(time.monotonic() - started, output.content)
"""


def test_the_issue_pattern_returns_at_once(workspace: Path) -> None:
    # Issue 12: a backtracking engine takes hours over this line; RE2 is linear. The search
    # runs in a child process, so that a slow engine fails the test instead of hanging it.
    (workspace / "as.txt").write_text("a" * 34 + "!\n")
    source = Path(haltwise.__file__).resolve().parents[1]
    done = subprocess.run(
        [sys.executable, "-c", _ISSUE_SEARCH, str(workspace)],
        env={**os.environ, "PYTHONPATH": str(source)},
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    seconds, content = done.stdout.strip().split(" ", 1)
    assert float(seconds) < 1
    assert content == "no match for '(a+)+$'"
    found = Toolbox(workspace).call("search", {"pattern": "(a+)+!$", "regex": True})
    assert found == ToolOutput("as.txt:1: " + "a" * 34 + "!")


@pytest.mark.parametrize("pattern", [r"(a)\1", "(?=a)", "(?!a)b", "(?<=a)b", "(?<!a)b"])
def test_patterns_re2_cannot_run_say_so(
    workspace: Path, pattern: str, capfd: pytest.CaptureFixture[str]
) -> None:
    output = Toolbox(workspace).call("search", {"pattern": pattern, "regex": True})
    assert output.is_error
    assert capfd.readouterr().err == ""  # RE2 logs bad patterns unless told not to
    assert "RE2" in output.content
    assert "no backreferences" in output.content and "no lookaround" in output.content
    assert "regex=false" in output.content
    # The same text as a plain string is just searched for.
    assert not Toolbox(workspace).call("search", {"pattern": pattern}).is_error


@pytest.mark.parametrize(
    ("name", "arguments", "argument", "problem", "expected"),
    [
        ("read_file", '{"path": "a\\u0000.txt"}', "path", "should match pattern", "no NUL"),
        ("read_file", {"path": "a.txt", "offset": "x"}, "offset", "valid integer", "integer"),
        ("read_file", '{"path": "a.txt", "offset": 1e400}', "offset", "got inf", "integer"),
        ("read_file", {"path": "a.txt", "limit": 0}, "limit", "greater than or equal to 1", "1"),
        ("read_file", {"path": "a.txt", "offset": True}, "offset", "valid integer", "integer"),
        ("read_file", {}, "path", "Field required", "A path relative"),
        ("list_dir", {"path": 3}, "path", "valid string", "A folder"),
        ("search", {"pattern": ""}, "pattern", "at least 1 character", "minLength"),
        ("search", {"pattern": "a", "regex": "yes"}, "regex", "valid boolean", "boolean"),
        ("write_file", {"path": "x.txt", "content": None}, "content", "valid string", "string"),
        ("write_file", {"path": "x" * 5000, "content": ""}, "path", "at most 4096", "maxLength"),
        ("write_file", '{"path": "x.txt", "content": "\\ud800"}', "content", "surrogate", "string"),
        ("edit_file", {"path": "a.txt", "old_text": ""}, "old_text", "at least 1", "exact text"),
        ("run_command", {"command": " \n"}, "command", "should match pattern", "not blank"),
        ("run_command", {"command": "ls", "timeout": "5"}, "timeout", "valid number", "number"),
        ("run_command", '{"command": "ls", "timeout": 1e400}', "timeout", "finite", "number"),
        ("run_command", {"command": "ls", "timeout": -1}, "timeout", "greater than 0", "number"),
    ],
)
def test_bad_arguments_say_which_what_and_what_is_expected(
    workspace: Path,
    name: str,
    arguments: str | dict[str, object],
    argument: str,
    problem: str,
    expected: str,
) -> None:
    # Issue 12: a NUL byte, "x" or 1e400 crashed `haltwise run` with a traceback.
    ran: list[str] = []

    def approve(command: str) -> bool:
        ran.append(command)
        return True

    tools = Toolbox(workspace, approver=approve)
    output = tools.call(name, arguments)
    assert output.is_error
    first, *rest = output.content.splitlines()
    assert first == f"bad arguments for {name}:"
    line = next(line for line in rest if line.startswith(f"- {argument}: "))
    assert problem in line
    assert expected in line.split("; expected ", 1)[1]
    assert ran == []
    assert not (workspace / "x.txt").exists()


def test_unknown_arguments_are_named_with_the_known_ones(workspace: Path) -> None:
    output = Toolbox(workspace).call("read_file", {"path": "a.txt", "file": "a.txt"})
    assert output.content == (
        "bad arguments for read_file:\n"
        "- file: read_file has no such argument; its arguments are path, offset, limit"
    )


def test_arguments_that_are_not_an_object_are_tool_errors(workspace: Path) -> None:
    tools = Toolbox(workspace)
    assert "nested too deeply" in tools.call("list_dir", "[" * 100_000).content
    assert "not valid JSON" in tools.call("list_dir", '{"path": ' + "9" * 5000 + "}").content
    assert "must be a JSON object" in tools.call("list_dir", '"."').content
    assert tools.call("list_dir", "  ").content.startswith("sub/")


def test_schemas_are_made_from_the_validating_models(workspace: Path) -> None:
    schemas = {
        entry["function"]["name"]: entry["function"] for entry in Toolbox(workspace).schemas()
    }
    assert list(schemas) == Toolbox(workspace).names
    read = schemas["read_file"]["parameters"]
    assert read["required"] == ["path"]
    assert read["additionalProperties"] is False
    assert read["properties"]["offset"]["anyOf"][0] == {"minimum": 1, "type": "integer"}
    assert "title" not in json.dumps(schemas)
    assert "at most 60 seconds" in schemas["run_command"]["description"]
    assert "\n" not in schemas["read_file"]["description"]


def test_list_dir_lists_links_and_keeps_outside_targets_unseen(
    workspace: Path, tmp_path: Path
) -> None:
    # Issue 12: one broken link failed the whole listing; a link out showed its target's size.
    (tmp_path / "secret.bin").write_bytes(b"s" * 12345)
    (workspace / "broken").symlink_to("nowhere")
    # Where a link out leads is not looked at, not even whether anything is there.
    (workspace / "gone-out").symlink_to(tmp_path / "nowhere")
    (workspace / "loop").symlink_to(workspace / "loop")
    (workspace / "out").symlink_to(tmp_path / "secret.bin")
    (workspace / "out-dir").symlink_to(tmp_path)
    (workspace / "to-a").symlink_to("a.txt")
    (workspace / "to-sub").symlink_to("sub")
    os.mkfifo(workspace / "fifo")
    output = Toolbox(workspace).call("list_dir", {"path": "."})
    assert not output.is_error
    assert output.content.splitlines() == [
        "sub/",
        "to-sub/  (link to sub/)",
        "a.txt  (17 bytes)",
        "broken  (broken link)",
        "fifo  (not a regular file)",
        "gone-out  (link to outside the workspace)",
        "loop  (broken link)",
        "out  (link to outside the workspace)",
        "out-dir  (link to outside the workspace)",
        "to-a  (link to a.txt, 17 bytes)",
    ]


def test_write_and_edit_never_follow_a_link_out(workspace: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "kept.txt").write_text("kept")
    (workspace / "file-out").symlink_to(outside / "kept.txt")
    (workspace / "dir-out").symlink_to(outside)
    (workspace / "dangling-out").symlink_to(outside / "new.txt")
    (workspace / "hop").symlink_to("dangling-out")
    tools = Toolbox(workspace)
    attempts = [
        ("write_file", {"path": "file-out", "content": "x"}),
        ("write_file", {"path": "dir-out/new.txt", "content": "x"}),
        ("write_file", {"path": "dangling-out", "content": "x"}),
        ("write_file", {"path": "hop", "content": "x"}),
        ("edit_file", {"path": "dir-out/kept.txt", "old_text": "kept", "new_text": "x"}),
        ("read_file", {"path": "hop"}),
    ]
    for name, arguments in attempts:
        output = tools.call(name, arguments)
        assert output.is_error and "outside the workspace" in output.content, (name, arguments)
    assert sorted(p.name for p in outside.iterdir()) == ["kept.txt"]
    assert (outside / "kept.txt").read_text() == "kept"


def _beside(workspace: Path) -> dict[str, Any]:
    """Everything beside ``workspace`` (in its parent): each file's bytes, each link's target."""
    seen: dict[str, Any] = {}
    for path in sorted(workspace.parent.rglob("*")):
        if workspace != path and workspace not in path.parents:
            key = str(path.relative_to(workspace.parent))
            seen[key] = (
                os.readlink(path) if path.is_symlink() else path.is_dir() or path.read_bytes()
            )
    return seen


def _escapes(loop: str) -> list[tuple[str, dict[str, Any]]]:
    """A call of each file tool on a path through ``loop`` and then out of the workspace."""
    return [
        ("write_file", {"path": f"{loop}/../out-dir/self", "content": "escaped"}),
        ("write_file", {"path": f"{loop}/../up/made/deeper.txt", "content": "escaped"}),
        ("read_file", {"path": f"{loop}/../out-dir/kept.txt"}),
        ("edit_file", {"path": f"{loop}/../out-dir/kept.txt", "old_text": "k", "new_text": "x"}),
        ("list_dir", {"path": f"{loop}/../out-dir"}),
        ("search", {"pattern": "kept", "path": f"{loop}/../out-dir"}),
        ("search", {"pattern": "kept", "path": f"{loop}/../up"}),
    ]


@pytest.mark.parametrize("loop", ["loop", "ping", "self/loop", "sub/../pong", "far-loop"])
def test_a_loop_of_links_does_not_hide_a_link_out(
    workspace: Path, tmp_path: Path, loop: str
) -> None:
    # The fuzz's outside/self: Python's Path.resolve (3.11) gave up at a loop of links and
    # took the rest of the path as written, so "loop/../out-dir/self" resolved to
    # ws/out-dir/self, inside the workspace as written, and the system then followed out-dir.
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "kept.txt").write_text("kept")
    links = {"loop": "loop", "ping": "pong", "pong": "ping", "self": ".", "up": ".."}
    links |= {"out-dir": str(outside), "far-loop": str(workspace / "sub" / ".." / "far-loop")}
    for name, target in links.items():
        (workspace / name).symlink_to(target)
    before = _beside(workspace)
    tools = Toolbox(workspace)
    for name, arguments in _escapes(loop):
        output = tools.call(name, arguments)
        assert output.is_error and "a loop of links" in output.content, (name, arguments)
        assert "kept" not in output.content.replace("kept.txt", ""), (name, arguments)
    assert _beside(workspace) == before


@pytest.mark.parametrize("when", ["resolved", "looked at"])
def test_a_link_put_on_the_way_after_the_check_is_not_followed(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, when: str
) -> None:
    # What a command still running could do between a path's check and its use: put a link
    # out where the workspace had a folder (sub) or a file (a.txt). The path checked has no
    # link in it; what it names is reached without following one.
    outside = tmp_path / "outside"
    (outside / "deeper").mkdir(parents=True)
    (outside / "a.txt").write_text("kept")
    (outside / "b.py").write_text("kept")
    before = _beside(workspace)

    def swap() -> None:
        for name, target in (("sub", outside), ("a.txt", outside / "a.txt")):
            here = workspace / name
            if not here.is_symlink():
                here.rename(workspace / f"{name}.moved")
                here.symlink_to(target)

    def restore() -> None:
        for name in ("sub", "a.txt"):
            if (workspace / name).is_symlink():
                (workspace / name).unlink()
                (workspace / f"{name}.moved").rename(workspace / name)

    def then_swap(method: Callable[..., Any]) -> Callable[..., Any]:
        def patched(*arguments: Any, **options: Any) -> Any:
            try:
                return method(*arguments, **options)
            finally:
                swap()

        return patched

    method = "resolve" if when == "resolved" else "stat"
    monkeypatch.setattr(Workspace, method, then_swap(getattr(Workspace, method)))
    tools = Toolbox(workspace)
    attempts = [
        ("read_file", {"path": "a.txt"}),
        ("read_file", {"path": "sub/b.py"}),
        ("write_file", {"path": "a.txt", "content": "escaped"}),
        ("write_file", {"path": "sub/new.txt", "content": "escaped"}),
        ("write_file", {"path": "sub/deeper/new.txt", "content": "escaped"}),
        ("edit_file", {"path": "sub/b.py", "old_text": "kept", "new_text": "escaped"}),
        ("edit_file", {"path": "a.txt", "old_text": "kept", "new_text": "escaped"}),
        ("list_dir", {"path": "sub"}),
    ]
    for name, arguments in attempts:
        restore()
        output = tools.call(name, arguments)
        assert output.is_error, (name, arguments, output.content)
        assert "kept" not in output.content, (name, arguments)
    restore()
    assert tools.call("search", {"pattern": "kept"}).content == "no match for 'kept'"
    restore()
    assert _beside(workspace) == before
    assert (workspace / "a.txt").read_text() == "alpha\nbeta\ngamma\n"
    assert sorted(path.name for path in (workspace / "sub").iterdir()) == ["b.py"]


def test_a_search_does_not_walk_into_a_folder_moved_after_it_was_listed(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Once sub is listed, it gives way to a link out: its folder inner is then opened by a
    # path that leads out (to outside/inner), which is not the folder that was listed.
    (workspace / "sub" / "inner").mkdir()
    (tmp_path / "outside" / "inner").mkdir(parents=True)
    (tmp_path / "outside" / "inner" / "kept.txt").write_text("kept")
    listing = tools_module._listing

    def listing_then_swap(folder: int) -> Any:
        entries = listing(folder)
        if any(name == "inner" for name, _, _ in entries):
            (workspace / "sub").rename(workspace / "sub.moved")
            (workspace / "sub").symlink_to(tmp_path / "outside")
        return entries

    monkeypatch.setattr(tools_module, "_listing", listing_then_swap)
    found = Toolbox(workspace).call("search", {"pattern": "kept"})
    assert found.content == "no match for 'kept'"


@contextlib.contextmanager
def _unblocking(fifo: Path, seconds: float = 3) -> Iterator[None]:
    """Fail, rather than hang, if a tool blocks on ``fifo``: every ``seconds`` its two ends
    are opened, which releases a blocked reader or writer, and the time lost is caught."""
    done = threading.Event()

    def unblock() -> None:
        while not done.wait(seconds):
            reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
            os.close(reader)

    helper = threading.Thread(target=unblock)
    helper.start()
    started = time.monotonic()
    try:
        yield
    finally:
        done.set()
        helper.join()
    assert time.monotonic() - started < seconds


def test_link_loops_and_fifos_neither_hang_nor_raise(workspace: Path) -> None:
    (workspace / "loop").symlink_to(workspace / "loop")
    (workspace / "sub" / "up").symlink_to(workspace)
    fifo = workspace / "fifo"
    os.mkfifo(fifo)
    tools = Toolbox(workspace)
    assert "a loop of links" in tools.call("read_file", {"path": "loop"}).content
    assert "a loop of links" in tools.call("write_file", {"path": "loop/x", "content": ""}).content
    with _unblocking(fifo):
        read = tools.call("read_file", {"path": "fifo"})
        written = tools.call("write_file", {"path": "fifo", "content": ""})
        edited = tools.call("edit_file", {"path": "fifo", "old_text": "a", "new_text": ""})
        # The walk skips the FIFO (a read would block) and does not go round the loop.
        found = tools.call("search", {"pattern": "gamma"})
        named = tools.call("search", {"pattern": "x", "path": "fifo"})
    assert "not a file" in read.content
    assert "not a regular file" in written.content
    assert "not a file" in edited.content
    assert found.content == "a.txt:3: gamma"
    assert named.content == "no match for 'x'"


def test_deep_paths_are_written_without_recursion(workspace: Path) -> None:
    # Path.mkdir(parents=True) recurses once per level: 1200 is a RecursionError.
    deep = "d/" * 1200 + "f.txt"
    try:
        output = Toolbox(workspace).call("write_file", {"path": deep, "content": "deep\n"})
        assert output.content == f"created {deep} (1 lines)"
        assert (workspace / deep).read_text() == "deep\n"
        found = Toolbox(workspace).call("search", {"pattern": "deep", "path": "d"})
        assert found.content == f"{deep}:1: deep"
    finally:
        # pytest's clean-up (shutil.rmtree) recurses once per level too: take the chain
        # down from the bottom.
        (workspace / deep).unlink(missing_ok=True)
        folder = (workspace / deep).parent
        while folder != workspace:
            if folder.is_dir():
                folder.rmdir()
            folder = folder.parent


def test_read_file_counts_lines_across_chunks(workspace: Path) -> None:
    long_line = "x" * 200_000
    (workspace / "long.txt").write_text(f"{long_line}\nsecond\r\nthird\x0cstill third\nlast")
    tools = Toolbox(workspace)
    assert tools.call("read_file", {"path": "long.txt", "offset": 2}).content == (
        "second\nthird\x0cstill third\nlast"
    )
    assert tools.call("read_file", {"path": "long.txt", "offset": 3, "limit": 1}).content == (
        "third\x0cstill third\n"
    )
    assert tools.call("search", {"pattern": "still"}).content == "long.txt:3: third\x0cstill third"
    whole = tools.call("read_file", {"path": "long.txt", "limit": 1}).content
    assert whole.startswith("x" * 8000 + "\n[... 184001 characters cut ...]\n")
    assert whole.endswith("x" * 7999 + "\n")


class _Steps:
    """A clock that moves one second each time it is read, and can act at a given reading."""

    def __init__(self, at: int = -1, action: Callable[[], None] = lambda: None) -> None:
        self.readings = 0
        self.at = at
        self.action = action

    def __call__(self) -> float:
        self.readings += 1
        if self.readings == self.at:
            self.action()
        return float(self.readings)


def _many_files(workspace: Path, count: int = 50) -> None:
    for number in range(count):
        (workspace / f"f{number:03}.txt").write_text("needle\n")


def test_a_search_stops_at_the_deadline_with_what_it_found(workspace: Path) -> None:
    _many_files(workspace)
    clock = _Steps()
    tools = Toolbox(workspace, clock=clock)
    output = tools.call("search", {"pattern": "needle"}, time_left=20)
    assert output.is_error
    *found, last = output.content.splitlines()
    assert last == (
        "[search was cut off: the run's time limit was reached; the matches above are all it found]"
    )
    assert 0 < len(found) < 50
    assert found[0] == "f000.txt:1: needle"
    assert clock.readings == 21
    whole = Toolbox(workspace).call("search", {"pattern": "needle"}, time_left=60)
    assert len(whole.content.splitlines()) == 50


def test_reading_and_listing_stop_at_the_deadline(workspace: Path) -> None:
    tools = Toolbox(workspace, clock=_Steps())
    assert tools.call("read_file", {"path": "a.txt"}, time_left=0) == ToolOutput(
        "read_file was cut off: the run's time limit was reached", True
    )
    assert tools.call("list_dir", {}, time_left=0) == ToolOutput(
        "list_dir was cut off: the run's time limit was reached", True
    )
    assert tools.call("read_file", {"path": "a.txt"}, time_left=5).content.startswith("alpha")


def test_cancel_cuts_off_a_search_and_does_not_outlive_its_call(workspace: Path) -> None:
    _many_files(workspace)
    tools: Toolbox
    clock = _Steps(at=10, action=lambda: tools.cancel())
    tools = Toolbox(workspace, clock=clock)
    output = tools.call("search", {"pattern": "needle"}, time_left=1e9)
    assert output.is_error
    assert output.content.endswith(
        "[search was cut off: the run was cancelled; the matches above are all it found]"
    )
    # A cancel that came between two calls (the model was streaming, say) ends with them.
    tools.cancel()
    assert len(tools.call("search", {"pattern": "needle"}).content.splitlines()) == 50


@given(pieces=st.lists(st.text(max_size=40), max_size=30), limit=st.integers(0, 120))
def test_text_taken_in_pieces_is_cut_as_if_whole(pieces: list[str], limit: int) -> None:
    # read_file streams a file through _Clip: what it shows is the whole text's head and tail.
    clip = _Clip(limit)
    for piece in pieces:
        clip.add(piece)
    text = "".join(pieces)
    half = limit // 2
    if len(text) <= limit:
        assert clip.text() == text
    else:
        tail = text[-half:] if half else ""
        cut = len(text) - 2 * half
        assert clip.text() == f"{text[:half]}\n[... {cut} characters cut ...]\n{tail}"


def test_haltwise_run_survives_the_issue_arguments(
    workspace: Path, store_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Issue 12, end to end: each of these crashed `haltwise run` or hung it.
    (workspace / "as.txt").write_text("a" * 34 + "!\n")
    calls = [
        tool_call("read_file", '{"path": "a\\u0000.txt"}'),
        tool_call("read_file", '{"path": "a.txt", "offset": "x"}'),
        tool_call("read_file", '{"path": "a.txt", "offset": 1e400}'),
        tool_call("search", {"pattern": "(a+)+$", "regex": True, "path": "as.txt"}),
    ]
    script = [reply("Trying.", tool_calls=calls), reply("Done.")]
    with ScriptedServer(script, model="scripted-model") as server:
        code = main(
            [
                "run",
                *("--base-url", server.base_url, "--model", "scripted-model"),
                *("--workspace", str(workspace), "--store", str(store_path)),
                "Look.",
            ]
        )
        sent = server.requests[-1]["messages"]
    assert code == 0
    assert capsys.readouterr().out == "Done.\n"
    results = [message["content"] for message in sent if message["role"] == "tool"]
    assert results[0].startswith("error: bad arguments for read_file:\n- path:")
    assert results[1].startswith("error: bad arguments for read_file:\n- offset:")
    assert results[2].startswith("error: bad arguments for read_file:\n- offset:")
    assert results[3] == "no match for '(a+)+$'"
