"""The agent's tools, confined to one workspace folder.

``Toolbox`` holds the tools the model may call (read a file, list a folder, search text, write a
file, edit a file by exact string replacement, run a shell command) with their JSON schemas, and
runs one call at a time: ``toolbox.call(name, arguments) -> ToolOutput``. A path that resolves
outside the workspace (``..``, an absolute path, a symlink pointing out) is refused with a tool
error; so is a shell command that the approver does not approve.

Shell commands run with the workspace as their working directory, in their own process group,
under a per-command timeout, and need approval (or ``--yes``). Only a ``sandbox`` (see
``sandbox``: bubblewrap) keeps them inside the workspace; without one they can write anywhere the
user can. Nothing here knows about limits or the governor: the loop reports each call to it.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .sandbox import Sandbox, unconfined

__all__ = ["Approver", "ToolError", "ToolOutput", "Toolbox", "Workspace"]

#: The most characters of one tool result given to the model (head and tail are kept).
MAX_OUTPUT = 16_000
#: Folders the search and the listing skip.
_SKIPPED = {".git", ".hg", ".svn", "node_modules", "__pycache__", ".venv", ".mypy_cache"}
_MAX_MATCHES = 100
_MAX_SEARCH_BYTES = 2_000_000

#: Asked before a shell command runs: True runs it. ``None`` as an approver means "no one to ask".
Approver = Callable[[str], bool]


class ToolError(Exception):
    """A tool call failed in a way the model should read (a bad path, text not found, ...)."""


@dataclass(frozen=True, slots=True)
class ToolOutput:
    """What one tool call gave back to the model."""

    content: str
    is_error: bool = False
    #: The exit code, for shell commands that ran to the end.
    exit_code: int | None = None


class Workspace:
    """A folder the tools may not leave."""

    def __init__(self, root: str | Path) -> None:
        path = Path(root).expanduser()
        if not path.is_dir():
            raise ToolError(f"the workspace {str(path)!r} is not a folder")
        self.root = path.resolve()

    def resolve(self, path: str) -> Path:
        """``path`` (relative to the workspace, or absolute inside it), symlinks followed."""
        if not isinstance(path, str) or not path.strip():
            raise ToolError("path must be a non-empty string, relative to the workspace")
        candidate = (self.root / path.strip()).resolve()
        if candidate != self.root and self.root not in candidate.parents:
            raise ToolError(
                f"path {path!r} is outside the workspace {self.root}; "
                "use a path inside it (relative paths start at the workspace)"
            )
        return candidate

    def show(self, path: Path) -> str:
        """``path`` as the model should see it: relative to the workspace."""
        relative = path.relative_to(self.root).as_posix()
        return relative or "."

    def __repr__(self) -> str:
        return f"Workspace({str(self.root)!r})"


def _truncate(text: str, limit: int = MAX_OUTPUT) -> str:
    if len(text) <= limit:
        return text
    half = limit // 2
    cut = len(text) - 2 * half
    return f"{text[:half]}\n[... {cut} characters cut ...]\n{text[-half:]}"


def _schema(name: str, description: str, properties: dict[str, Any], required: list[str]) -> Any:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": properties, "required": required},
        },
    }


_STRING = {"type": "string"}


class Toolbox:
    """The workspace tools, their schemas, and how to run a call."""

    def __init__(
        self,
        workspace: Workspace | str | Path,
        *,
        approver: Approver | None = None,
        command_timeout: float = 60.0,
        sandbox: Sandbox | None = None,
    ) -> None:
        self.workspace = workspace if isinstance(workspace, Workspace) else Workspace(workspace)
        #: How shell commands run; None: unconfined (``sandbox.choose_sandbox`` makes one).
        self.sandbox = sandbox or unconfined(self.workspace.root, "no sandbox given")
        #: Asked before each shell command; None refuses every command (no one to ask).
        self.approver = approver
        #: The longest a shell command may run, in seconds.
        self.command_timeout = command_timeout
        #: The run's remaining time during the current call (see ``call``).
        self._time_left: float | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._process_lock = threading.Lock()
        self._cancelled = threading.Event()
        self._tools: dict[str, Callable[..., ToolOutput]] = {
            "read_file": self.read_file,
            "list_dir": self.list_dir,
            "search": self.search,
            "write_file": self.write_file,
            "edit_file": self.edit_file,
            "run_command": self.run_command,
        }

    @property
    def names(self) -> list[str]:
        return list(self._tools)

    def schemas(self) -> list[Any]:
        """The tools as OpenAI ``tools=`` entries."""
        path = {"type": "string", "description": "A path relative to the workspace."}
        return [
            _schema(
                "read_file",
                "Read a text file of the workspace. Optionally from line `offset` (1-based), "
                "at most `limit` lines.",
                {"path": path, "offset": {"type": "integer"}, "limit": {"type": "integer"}},
                ["path"],
            ),
            _schema(
                "list_dir",
                "List a folder of the workspace (folders end with /).",
                {"path": {**path, "description": "A folder; '.' is the workspace."}},
                [],
            ),
            _schema(
                "search",
                "Search the workspace's text files for a string (or a regular expression with "
                "regex=true). Returns path:line: text for each match.",
                {
                    "pattern": _STRING,
                    "path": {**path, "description": "Where to search; default '.'."},
                    "regex": {"type": "boolean"},
                },
                ["pattern"],
            ),
            _schema(
                "write_file",
                "Create or overwrite a text file of the workspace with `content`.",
                {"path": path, "content": _STRING},
                ["path", "content"],
            ),
            _schema(
                "edit_file",
                "Replace `old_text` with `new_text` in a file. `old_text` must occur exactly "
                "once, character for character (whitespace included).",
                {"path": path, "old_text": _STRING, "new_text": _STRING},
                ["path", "old_text", "new_text"],
            ),
            _schema(
                "run_command",
                "Run a shell command in the workspace and return its output and exit code. "
                f"It is stopped after `timeout` seconds (at most {self.command_timeout:g}).",
                {"command": _STRING, "timeout": {"type": "number"}},
                ["command"],
            ),
        ]

    def call(
        self, name: str, arguments: str | dict[str, Any], *, time_left: float | None = None
    ) -> ToolOutput:
        """Run one tool call; every failure becomes a tool error for the model to read.

        ``time_left`` is the run's remaining time: a shell command is stopped by the smaller of
        its own timeout and that.
        """
        self._time_left = time_left
        tool = self._tools.get(name)
        if tool is None:
            return ToolOutput(
                f"no tool named {name!r}; the tools are {', '.join(self._tools)}", True
            )
        try:
            if isinstance(arguments, str):
                parsed = json.loads(arguments) if arguments.strip() else {}
            else:
                parsed = arguments
            if not isinstance(parsed, dict):
                raise ToolError("the arguments must be a JSON object")
            return tool(**parsed)
        except json.JSONDecodeError as error:
            return ToolOutput(f"the arguments are not valid JSON: {error}", True)
        except TypeError as error:
            return ToolOutput(f"bad arguments for {name}: {error}", True)
        except ToolError as error:
            return ToolOutput(str(error), True)
        except OSError as error:
            return ToolOutput(f"{name} failed: {error.strerror or error}", True)

    # ----------------------------------------------------------------------------------------
    # The tools

    def read_file(
        self, path: str, offset: int | None = None, limit: int | None = None
    ) -> ToolOutput:
        target = self.workspace.resolve(path)
        if not target.is_file():
            raise ToolError(f"{path!r} is not a file in the workspace")
        text = target.read_text(encoding="utf-8", errors="replace")
        if offset is not None or limit is not None:
            lines = text.splitlines(keepends=True)
            start = max(int(offset or 1), 1) - 1
            end = len(lines) if limit is None else start + max(int(limit), 0)
            text = "".join(lines[start:end])
        return ToolOutput(_truncate(text))

    def list_dir(self, path: str = ".") -> ToolOutput:
        target = self.workspace.resolve(path)
        if not target.is_dir():
            raise ToolError(f"{path!r} is not a folder in the workspace")
        entries = []
        for entry in sorted(target.iterdir(), key=lambda p: (not p.is_dir(), p.name)):
            if entry.is_dir():
                entries.append(entry.name + "/")
            else:
                entries.append(f"{entry.name}  ({entry.stat().st_size} bytes)")
        return ToolOutput("\n".join(entries) if entries else "(empty folder)")

    def search(self, pattern: str, path: str = ".", regex: bool = False) -> ToolOutput:
        if not isinstance(pattern, str) or not pattern:
            raise ToolError("pattern must be a non-empty string")
        try:
            compiled = re.compile(pattern if regex else re.escape(pattern))
        except re.error as error:
            raise ToolError(f"pattern is not a valid regular expression: {error}") from None
        root = self.workspace.resolve(path)
        matches: list[str] = []
        for file in self._files(root):
            try:
                if file.stat().st_size > _MAX_SEARCH_BYTES:
                    continue
                text = file.read_text(encoding="utf-8")
            except (UnicodeDecodeError, OSError):
                continue
            for number, line in enumerate(text.splitlines(), 1):
                if compiled.search(line):
                    matches.append(f"{self.workspace.show(file)}:{number}: {line.strip()[:200]}")
                    if len(matches) >= _MAX_MATCHES:
                        matches.append(f"[stopped at {_MAX_MATCHES} matches; narrow the search]")
                        return ToolOutput("\n".join(matches))
        return ToolOutput("\n".join(matches) if matches else f"no match for {pattern!r}")

    def _files(self, root: Path) -> Iterator[Path]:
        if root.is_file():
            yield root
            return
        for folder, subfolders, files in os.walk(root):
            subfolders[:] = sorted(d for d in subfolders if d not in _SKIPPED)
            for name in sorted(files):
                file = Path(folder) / name
                # A symlink may point out of the workspace: only follow those that stay inside.
                if file.is_symlink():
                    try:
                        self.workspace.resolve(str(file.relative_to(self.workspace.root)))
                    except ToolError:
                        continue
                yield file

    def write_file(self, path: str, content: str) -> ToolOutput:
        if not isinstance(content, str):
            raise ToolError("content must be a string")
        target = self.workspace.resolve(path)
        if target.is_dir():
            raise ToolError(f"{path!r} is a folder")
        target.parent.mkdir(parents=True, exist_ok=True)
        existed = target.exists()
        target.write_text(content, encoding="utf-8")
        lines = content.count("\n") + (1 if content and not content.endswith("\n") else 0)
        verb = "overwrote" if existed else "created"
        return ToolOutput(f"{verb} {self.workspace.show(target)} ({lines} lines)")

    def edit_file(self, path: str, old_text: str, new_text: str) -> ToolOutput:
        if not isinstance(old_text, str) or not isinstance(new_text, str):
            raise ToolError("old_text and new_text must be strings")
        if not old_text:
            raise ToolError("old_text must not be empty; use write_file to create a file")
        target = self.workspace.resolve(path)
        if not target.is_file():
            raise ToolError(f"{path!r} is not a file in the workspace")
        text = target.read_text(encoding="utf-8")
        found = text.count(old_text)
        if found == 0:
            raise ToolError(
                f"old_text was not found in {path}: it must match the file exactly, "
                "whitespace included; read the file first"
            )
        if found > 1:
            raise ToolError(
                f"old_text occurs {found} times in {path}; include more context so it is unique"
            )
        target.write_text(text.replace(old_text, new_text, 1), encoding="utf-8")
        return ToolOutput(f"edited {self.workspace.show(target)}")

    def run_command(self, command: str, timeout: float | None = None) -> ToolOutput:
        if not isinstance(command, str) or not command.strip():
            raise ToolError("command must be a non-empty string")
        if self.approver is None:
            raise ToolError(
                "shell commands need approval and no one can approve here: "
                "the user must allow them (haltwise run --yes)"
            )
        if not self.approver(command):
            raise ToolError(f"the user did not approve running {command!r}")
        limit = self.command_timeout
        if isinstance(timeout, int | float) and not isinstance(timeout, bool) and timeout > 0:
            limit = min(float(timeout), self.command_timeout)
        run_left = self._time_left
        if run_left is not None and run_left < limit:
            return self._run(command, max(run_left, 0.0), "the run's time limit was reached")
        return self._run(command, limit, f"the command timed out after {limit:g}s")

    def _run(self, command: str, limit: float, why: str) -> ToolOutput:
        self._cancelled.clear()
        process = subprocess.Popen(
            self.sandbox.argv(command),
            cwd=self.workspace.root,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        with self._process_lock:
            self._process = process
        try:
            output, _ = process.communicate(timeout=limit)
        except subprocess.TimeoutExpired:
            _kill(process)
            output, _ = process.communicate()
            text = _truncate(output.decode("utf-8", "replace"))
            return ToolOutput(f"{text}\n[{why}: the command was killed]", True)
        finally:
            with self._process_lock:
                self._process = None
        text = _truncate(output.decode("utf-8", "replace"))
        if self._cancelled.is_set():
            return ToolOutput(f"{text}\n[the command was stopped: the run was cancelled]", True)
        code = process.returncode
        return ToolOutput(
            f"{text}\n[exit code {code}]" if text else f"[exit code {code}]", code != 0, code
        )

    def cancel(self) -> None:
        """Kill the running shell command, if any (from any thread)."""
        self._cancelled.set()
        with self._process_lock:
            process = self._process
        if process is not None:
            _kill(process)


def _kill(process: subprocess.Popen[bytes]) -> None:
    """Kill the command and everything it started (its own process group)."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    except OSError:  # pragma: no cover - a platform without process groups
        process.kill()
