"""The agent's tools, confined to one workspace folder.

``Toolbox`` holds the tools the model may call (read a file, list a folder, search text, write a
file, edit a file by exact string replacement, run a shell command) and runs one call at a time:
``toolbox.call(name, arguments) -> ToolOutput``. Whatever the model sends, a call ends in a
``ToolOutput``; nothing a model writes raises out of here:

- each tool's arguments are one pydantic model (``_ReadFile``, ...): its JSON schema is what the
  model is shown and its validation is what the call goes through, so the two cannot disagree;
  arguments it refuses get a tool error naming the argument, the problem and what is expected;
- a path that resolves outside the workspace (``..``, an absolute path, a symlink pointing out)
  is refused; ``list_dir`` shows a link out of the workspace without looking at its target;
- regular expressions run on RE2 (``google-re2``), in time linear in the text whatever the
  pattern: a model's ``(a+)+$`` cannot hang the agent;
- work that grows with the workspace (reading, listing, searching) checks the run's deadline
  and ``cancel()`` as it goes, and ends in a tool error that says it was cut off.

Shell commands run with the workspace as their working directory, in a session of their own,
under a per-command timeout, and need approval (or ``--yes``). Their output is read as it comes
and only what the model gets is kept (its head and tail), however much they print. A timeout or
a cancel kills the command's session and descendants, and waits for its output no longer than a
grace: a process that got out of reach may hold it open. Only a ``sandbox`` (see ``sandbox``:
bubblewrap) keeps commands inside the workspace, and kills every process they started; without
one they can write anywhere the user can. Nothing here knows about limits or the governor: the
loop reports each call to it.
"""

from __future__ import annotations

import codecs
import contextlib
import json
import os
import reprlib
import selectors
import signal
import stat
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Annotated, Any, TextIO

import re2
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaMode
from pydantic_core import CoreSchema

from .sandbox import Sandbox, unconfined

__all__ = ["Approver", "ToolError", "ToolOutput", "Toolbox", "Workspace"]

#: The most characters of one tool result given to the model (head and tail are kept).
MAX_OUTPUT = 16_000
#: Folders the search and the listing skip.
_SKIPPED = {".git", ".hg", ".svn", "node_modules", "__pycache__", ".venv", ".mypy_cache"}
_MAX_MATCHES = 100
_MAX_SEARCH_BYTES = 2_000_000
#: The largest file ``edit_file`` reads whole and writes back.
_MAX_EDIT_BYTES = 10_000_000
#: Characters read at a time by ``read_file``, between two looks at the deadline.
_CHUNK = 65_536
#: Bytes of a shell command's output read at a time (a pipe holds 64 KiB).
_READ_BYTES = 65_536
#: How long a killed command's output is still read, and its exit waited for, in seconds.
_KILL_GRACE = 0.5
#: What a killed command's result says when a process out of reach kept its output open.
_HELD_OPEN = "a process it started kept its output open and was not waited for"

#: Asked before a shell command runs: True runs it. ``None`` as an approver means "no one to ask".
Approver = Callable[[str], bool]


class ToolError(Exception):
    """A tool call failed in a way the model should read (a bad path, text not found, ...)."""


class _CutOff(ToolError):
    """The run's deadline passed, or the run was cancelled, while a tool was at work."""


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
        """``path`` (relative to the workspace, or absolute inside it), symlinks followed.

        Every symlink on the way is followed before the check, so a link (or a chain of links)
        that ends outside the workspace is refused like ``..`` is. A path that cannot be
        resolved at all (a symlink loop, a NUL byte, too long a name) is a ``ToolError`` too.
        """
        if not isinstance(path, str) or not path.strip():
            raise ToolError("path must be a non-empty string, relative to the workspace")
        try:
            candidate = (self.root / path.strip()).resolve()
        except (OSError, RuntimeError, ValueError) as error:
            raise ToolError(f"path {path!r} cannot be resolved: {error}") from None
        if not self.contains(candidate):
            raise ToolError(
                f"path {path!r} is outside the workspace {self.root}; "
                "use a path inside it (relative paths start at the workspace)"
            )
        return candidate

    def contains(self, path: Path) -> bool:
        """Whether the resolved ``path`` is the workspace or lies inside it."""
        return path == self.root or self.root in path.parents

    def show(self, path: Path) -> str:
        """``path`` as the model should see it: relative to the workspace."""
        relative = path.relative_to(self.root).as_posix()
        return _printable(relative) or "."

    def __repr__(self) -> str:
        return f"Workspace({str(self.root)!r})"


class _Clip:
    """Text for the model, taken in as it is produced: everything up to ``limit`` characters,
    else the first and the last ``limit // 2`` with a note of how much was cut between. Only
    about ``limit`` characters are held, however much text goes through."""

    def __init__(self, limit: int = MAX_OUTPUT) -> None:
        self.limit = limit
        self.half = limit // 2
        self.length = 0
        self.head = ""
        self.tail = ""

    def add(self, text: str) -> None:
        self.length += len(text)
        if len(self.head) < self.limit:
            self.head += text[: self.limit - len(self.head)]
        self.tail += text
        if len(self.tail) > 4 * self.half:
            self.tail = self.tail[-self.half :]

    def text(self) -> str:
        if self.length <= self.limit:
            return self.head
        cut = self.length - 2 * self.half
        tail = self.tail[-self.half :] if self.half else ""
        return f"{self.head[: self.half]}\n[... {cut} characters cut ...]\n{tail}"


def _truncate(text: str, limit: int = MAX_OUTPUT) -> str:
    clip = _Clip(limit)
    clip.add(text)
    return clip.text()


def _printable(name: str) -> str:
    """A file name as text: the bytes of a name that is not UTF-8 (kept by Python as lone
    surrogates, which no UTF-8 encoder accepts) are shown as escapes."""
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def _lines(text: str) -> list[str]:
    """``text``'s lines as ``read_file`` counts them: split at newlines only, so that a search
    hit on line N is what ``read_file`` shows at ``offset`` N."""
    lines = text.split("\n")
    return lines[:-1] if lines[-1] == "" else lines


# --------------------------------------------------------------------------------------------
# The tools' arguments: one model per tool, its JSON schema shown to the model


class _Arguments(BaseModel):
    """What every tool's arguments share: exactly the JSON types the schema names (no
    coercion of "5" into 5), no argument the schema does not list, and finite numbers."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False, frozen=True)


def _utf8(text: str) -> str:
    """``text`` if UTF-8 can encode it: JSON's ``"\\ud800"`` decodes to a lone surrogate,
    which no file, pattern or command can hold."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        raise ValueError(
            f"holds a lone surrogate ({text[error.start]!r} at {error.start}), which is not "
            "text; send characters, not halves of a UTF-16 pair"
        ) from None
    return text


#: On every string argument, after its schema's own constraints.
_UTF8 = AfterValidator(_utf8)
#: A path argument: NUL bytes are refused by the schema itself, as no file name can hold one.
_Path = Annotated[str, Field(min_length=1, max_length=4096, pattern=r"^[^\x00]*$"), _UTF8]
_TEXT_PATH = "A path relative to the workspace (an absolute one must lie inside it; no NUL)."


class _ReadFile(_Arguments):
    """Read a text file of the workspace. Optionally from line `offset` (1-based), at most
    `limit` lines."""

    path: Annotated[_Path, Field(description=_TEXT_PATH)]
    offset: Annotated[int | None, Field(ge=1, description="The first line to read, 1-based.")] = (
        None
    )
    limit: Annotated[int | None, Field(ge=1, description="The most lines to read.")] = None


class _ListDir(_Arguments):
    """List a folder of the workspace (folders end with /; links say where they point)."""

    path: Annotated[_Path, Field(description="A folder; '.' is the workspace (no NUL).")] = "."


class _Search(_Arguments):
    """Search the workspace's text files for a string (or a regular expression in RE2 syntax
    with regex=true: no backreferences or lookaround). Returns path:line: text for each match."""

    pattern: Annotated[
        str,
        Field(min_length=1, max_length=2000, description="The text or pattern to find."),
        _UTF8,
    ]
    path: Annotated[_Path, Field(description="Where to search: a folder or a file (no NUL).")] = "."
    regex: Annotated[bool, Field(description="Whether `pattern` is a regular expression.")] = False


class _WriteFile(_Arguments):
    """Create or overwrite a text file of the workspace with `content`."""

    path: Annotated[_Path, Field(description=_TEXT_PATH)]
    content: Annotated[str, Field(description="The whole new text of the file."), _UTF8]


class _EditFile(_Arguments):
    """Replace `old_text` with `new_text` in a file. `old_text` must occur exactly once,
    character for character (whitespace included)."""

    path: Annotated[_Path, Field(description=_TEXT_PATH)]
    old_text: Annotated[str, Field(min_length=1, description="The exact text to replace."), _UTF8]
    new_text: Annotated[str, Field(description="What replaces it."), _UTF8]


class _RunCommand(_Arguments):
    """Run a shell command in the workspace and return its output and exit code."""

    command: Annotated[
        str,
        Field(
            min_length=1,
            max_length=100_000,
            pattern=r"\S",
            description="A shell command (not blank).",
        ),
        _UTF8,
    ]
    timeout: Annotated[
        float | None, Field(gt=0, description="Seconds after which the command is stopped.")
    ] = None


_ARGUMENTS: dict[str, type[_Arguments]] = {
    "read_file": _ReadFile,
    "list_dir": _ListDir,
    "search": _Search,
    "write_file": _WriteFile,
    "edit_file": _EditFile,
    "run_command": _RunCommand,
}


class _ToolSchema(GenerateJsonSchema):
    """JSON schemas without pydantic's titles (the model reads names and descriptions)."""

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False

    def generate(self, schema: CoreSchema, mode: JsonSchemaMode = "validation") -> Any:
        result = super().generate(schema, mode)
        result.pop("title", None)
        return result


def _parameters(arguments: type[_Arguments]) -> dict[str, Any]:
    """The JSON schema of one tool's arguments, its description the model's docstring."""
    return arguments.model_json_schema(schema_generator=_ToolSchema)


_brief = reprlib.Repr()
_brief.maxstring = _brief.maxother = _brief.maxlong = 60


def _explain(name: str, arguments: type[_Arguments], error: ValidationError) -> str:
    """A validation error as the model should read it: each argument at fault, what was wrong
    with it, and what the schema expects there."""
    properties = _parameters(arguments)["properties"]
    problems = [f"bad arguments for {name}:"]
    for problem in error.errors(include_url=False):
        argument = str(problem["loc"][0]) if problem["loc"] else "arguments"
        if problem["type"] == "extra_forbidden":
            problems.append(
                f"- {argument}: {name} has no such argument; "
                f"its arguments are {', '.join(properties)}"
            )
            continue
        got = "" if problem["type"] == "missing" else f", got {_brief.repr(problem['input'])}"
        expected = json.dumps(properties.get(argument, {}), ensure_ascii=False)
        problems.append(f"- {argument}: {problem['msg']}{got}; expected {expected}")
    return "\n".join(problems)


def _decode(arguments: str | dict[str, Any]) -> dict[str, Any]:
    """The arguments as a dict: the model sends a JSON object (an empty text means none)."""
    if isinstance(arguments, str):
        try:
            parsed = json.loads(arguments) if arguments.strip() else {}
        except ValueError as error:
            raise ToolError(f"the arguments are not valid JSON: {error}") from None
        except RecursionError:
            raise ToolError("the arguments are not valid JSON: nested too deeply") from None
    else:
        parsed = arguments
    if not isinstance(parsed, dict):
        raise ToolError("the arguments must be a JSON object")
    return parsed


_RE2_OPTIONS = re2.Options()
#: RE2 would print every bad pattern on stderr, over the chat's screen.
_RE2_OPTIONS.log_errors = False


def _matcher(pattern: str, regex: bool) -> Callable[[str], bool]:
    """Whether a line matches: a plain substring, or an RE2 search (linear time)."""
    if not regex:
        return lambda line: pattern in line
    try:
        compiled = re2.compile(pattern, _RE2_OPTIONS)
    except re2.error as error:
        reason = error.args[0] if error.args else "unknown error"
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", "replace")
        raise ToolError(
            f"pattern {_brief.repr(pattern)} is not a regular expression search can run "
            f"({reason}). Search uses RE2 syntax, which runs in linear time whatever the "
            "pattern and so has no backreferences (\\1) and no lookaround ((?=...), (?!...), "
            "(?<=...), (?<!...)): rewrite the pattern without them, or search for a plain "
            "string with regex=false"
        ) from None
    return lambda line: compiled.search(line) is not None


class Toolbox:
    """The workspace tools, their schemas, and how to run a call."""

    def __init__(
        self,
        workspace: Workspace | str | Path,
        *,
        approver: Approver | None = None,
        command_timeout: float = 60.0,
        sandbox: Sandbox | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.workspace = workspace if isinstance(workspace, Workspace) else Workspace(workspace)
        #: How shell commands run; None: unconfined (``sandbox.choose_sandbox`` makes one).
        self.sandbox = sandbox or unconfined(self.workspace.root, "no sandbox given")
        #: Asked before each shell command; None refuses every command (no one to ask).
        self.approver = approver
        #: The longest a shell command may run, in seconds.
        self.command_timeout = command_timeout
        #: The monotonic clock the run's deadline is read on.
        self.clock = clock
        #: The run's remaining time during the current call (see ``call``).
        self._time_left: float | None = None
        #: When the current call must stop (on ``clock``), if the run has a deadline.
        self._deadline: float | None = None
        self._process: subprocess.Popen[bytes] | None = None
        #: The pipe end ``cancel()`` writes to, to end the wait for the running command.
        self._wake: int | None = None
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
        """The tools as OpenAI ``tools=`` entries, made from the models that check the calls."""
        entries = []
        for name, arguments in _ARGUMENTS.items():
            parameters = _parameters(arguments)
            description = " ".join(parameters.pop("description").split())
            if name == "run_command":
                description += f" It is stopped after at most {self.command_timeout:g} seconds."
            entries.append(
                {
                    "type": "function",
                    "function": {
                        "name": name,
                        "description": description,
                        "parameters": parameters,
                    },
                }
            )
        return entries

    def call(
        self, name: str, arguments: str | dict[str, Any], *, time_left: float | None = None
    ) -> ToolOutput:
        """Run one tool call; every failure becomes a tool error for the model to read.

        ``time_left`` is the run's remaining time: a shell command is stopped by the smaller of
        its own timeout and that, and reading, listing and searching stop when it has passed.
        """
        self._time_left = time_left
        self._deadline = None if time_left is None else self.clock() + time_left
        self._cancelled.clear()
        tool = self._tools.get(name)
        if tool is None:
            return ToolOutput(
                f"no tool named {_brief.repr(name)}; the tools are {', '.join(self._tools)}", True
            )
        model = _ARGUMENTS[name]
        try:
            values = model.model_validate(_decode(arguments))
            return tool(**dict(values))
        except ValidationError as error:
            return ToolOutput(_explain(name, model, error), True)
        except ToolError as error:
            return ToolOutput(str(error), True)
        except OSError as error:
            return ToolOutput(f"{name} failed: {error.strerror or error}", True)

    def _check(self, tool: str) -> None:
        """Raise ``_CutOff`` when the current call must stop: the run was cancelled, or its
        deadline has passed. Called as often as a tool's work grows with the workspace."""
        if self._cancelled.is_set():
            raise _CutOff(f"{tool} was cut off: the run was cancelled")
        if self._deadline is not None and self.clock() >= self._deadline:
            raise _CutOff(f"{tool} was cut off: the run's time limit was reached")

    # ----------------------------------------------------------------------------------------
    # The tools

    def read_file(
        self, path: str, offset: int | None = None, limit: int | None = None
    ) -> ToolOutput:
        target = self.workspace.resolve(path)
        if not target.is_file():
            raise ToolError(f"{path!r} is not a file in the workspace")
        first = offset or 1
        stop = None if limit is None else first + limit
        clip = _Clip()
        with target.open(encoding="utf-8", errors="replace") as handle:
            for number, piece in self._numbered(handle):
                if stop is not None and number >= stop:
                    break
                if number >= first:
                    clip.add(piece)
        return ToolOutput(clip.text())

    def _numbered(self, handle: TextIO) -> Iterator[tuple[int, str]]:
        """The text of ``handle`` in pieces, each with the 1-based number of its line. A piece
        is never longer than a chunk, so a huge file (or a huge line) is never held whole,
        and the deadline is checked before each chunk."""
        number = 1
        while True:
            self._check("read_file")
            chunk = handle.read(_CHUNK)
            if not chunk:
                return
            *ended, rest = chunk.split("\n")
            for line in ended:
                yield number, line + "\n"
                number += 1
            if rest:
                yield number, rest

    def list_dir(self, path: str = ".") -> ToolOutput:
        target = self.workspace.resolve(path)
        if not target.is_dir():
            raise ToolError(f"{path!r} is not a folder in the workspace")
        shown: list[tuple[bool, str, str]] = []
        with os.scandir(target) as entries:
            for entry in entries:
                self._check("list_dir")
                is_folder, line = self._entry(entry)
                shown.append((not is_folder, entry.name, line))
        lines = [line for _, _, line in sorted(shown)]
        return ToolOutput(_truncate("\n".join(lines)) if lines else "(empty folder)")

    def _entry(self, entry: os.DirEntry[str]) -> tuple[bool, str]:
        """Whether ``entry`` is listed with the folders, and its line in the listing. A link
        is followed only to learn where it points, and its target is looked at only when that
        is inside the workspace: a link out says so and no more."""
        name = _printable(entry.name)
        if not entry.is_symlink():
            return _describe(name, entry.stat(follow_symlinks=False), "")
        try:
            target = Path(entry.path).resolve(strict=True)
        except (OSError, RuntimeError):  # a dangling link, or a loop of links
            return False, f"{name}  (broken link)"
        if not self.workspace.contains(target):
            return False, f"{name}  (link to outside the workspace)"
        return _describe(name, target.stat(), f"link to {self.workspace.show(target)}")

    def search(self, pattern: str, path: str = ".", regex: bool = False) -> ToolOutput:
        matches_line = _matcher(pattern, regex)
        root = self.workspace.resolve(path)
        matches: list[str] = []
        try:
            for file in self._files(root):
                text = _text(file)
                if text is None:
                    continue
                for number, line in enumerate(_lines(text), 1):
                    self._check("search")
                    if matches_line(line):
                        shown = self.workspace.show(file)
                        matches.append(f"{shown}:{number}: {line.strip()[:200]}")
                        if len(matches) >= _MAX_MATCHES:
                            matches.append(
                                f"[stopped at {_MAX_MATCHES} matches; narrow the search]"
                            )
                            return ToolOutput(_truncate("\n".join(matches)))
        except _CutOff as cut:
            matches.append(f"[{cut}; the matches above are all it found]")
            return ToolOutput(_truncate("\n".join(matches)), True)
        if not matches:
            return ToolOutput(f"no match for {pattern!r}")
        return ToolOutput(_truncate("\n".join(matches)))

    def _files(self, root: Path) -> Iterator[Path]:
        """The files under ``root`` that search may read (see ``_readable``), folder by folder
        in name order. Links to folders are not walked into, so a loop of links cannot trap
        the walk; the walk keeps its own stack, as ``os.walk`` recurses once per level (until
        Python 3.12) and a deep enough tree would be a RecursionError."""
        if not root.is_dir():
            if self._readable(root):
                yield root
            return
        folders = [root]
        while folders:
            self._check("search")
            folder = folders.pop()
            try:
                with os.scandir(folder) as scan:
                    entries = sorted(scan, key=lambda entry: entry.name)
            except OSError:
                continue
            subfolders = []
            for entry in entries:
                self._check("search")
                if entry.is_dir(follow_symlinks=False):
                    if entry.name not in _SKIPPED:
                        subfolders.append(Path(entry.path))
                elif self._readable(Path(entry.path)):
                    yield Path(entry.path)
            folders.extend(reversed(subfolders))

    def _readable(self, file: Path) -> bool:
        """Whether search may read ``file``: a regular file of at most ``_MAX_SEARCH_BYTES``,
        inside the workspace once its links are followed (a FIFO would block the read)."""
        try:
            info = file.lstat()
            if stat.S_ISLNK(info.st_mode):
                info = self.workspace.resolve(str(file)).stat()
        except (OSError, ToolError):
            return False
        return stat.S_ISREG(info.st_mode) and info.st_size <= _MAX_SEARCH_BYTES

    def write_file(self, path: str, content: str) -> ToolOutput:
        target = self.workspace.resolve(path)
        if target.is_dir():
            raise ToolError(f"{path!r} is a folder")
        existed = target.exists()
        if existed and not target.is_file():
            raise ToolError(f"{path!r} is not a regular file; write_file only writes files")
        _make_folders(target.parent)
        target.write_text(content, encoding="utf-8")
        lines = content.count("\n") + (1 if content and not content.endswith("\n") else 0)
        verb = "overwrote" if existed else "created"
        return ToolOutput(f"{verb} {self.workspace.show(target)} ({lines} lines)")

    def edit_file(self, path: str, old_text: str, new_text: str) -> ToolOutput:
        target = self.workspace.resolve(path)
        if not target.is_file():
            raise ToolError(f"{path!r} is not a file in the workspace")
        if target.stat().st_size > _MAX_EDIT_BYTES:
            raise ToolError(
                f"{path!r} is larger than {_MAX_EDIT_BYTES:,} bytes, too large to edit here; "
                "use run_command with a tool made for large files"
            )
        try:
            text = target.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            raise ToolError(f"{path!r} is not UTF-8 text; edit_file only edits text") from None
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
        # cancel() writes to ``wake_write``: the wait below for the command ends at once.
        wake_read, wake_write = os.pipe()
        os.set_blocking(wake_write, False)
        try:
            process = subprocess.Popen(
                self.sandbox.argv(command),
                cwd=self.workspace.root,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        except BaseException:
            os.close(wake_read)
            os.close(wake_write)
            raise
        assert process.stdout is not None
        output = _Output(process.stdout, wake_read)
        with self._process_lock:
            self._process, self._wake = process, wake_write
        try:
            deadline = time.monotonic() + limit
            ended = not self._cancelled.is_set() and output.read_until(deadline)
            if ended:
                # The output ended (every process holding it closed it): now the command.
                try:
                    process.wait(timeout=max(deadline - time.monotonic(), 0))
                except subprocess.TimeoutExpired:
                    ended = False
            if not ended:
                _kill(process)
                # What its processes wrote before they died; a process out of reach (see
                # ``_kill``) may hold the output open: it is not waited for past the grace.
                output.drain(_KILL_GRACE)
                _reap(process)
        finally:
            with self._process_lock:
                self._process, self._wake = None, None
            output.close()
            os.close(wake_read)
            os.close(wake_write)
        text = output.text()
        held = "" if output.ended else f"; {_HELD_OPEN}"
        if self._cancelled.is_set():
            return ToolOutput(
                f"{text}\n[the command was stopped: the run was cancelled{held}]", True
            )
        if not ended:
            return ToolOutput(f"{text}\n[{why}: the command was killed{held}]", True)
        code = process.returncode
        return ToolOutput(
            f"{text}\n[exit code {code}]" if text else f"[exit code {code}]", code != 0, code
        )

    def cancel(self) -> None:
        """Stop the current call (from any thread): its shell command, if any, is killed;
        reading, listing and searching stop at their next look at the clock."""
        self._cancelled.set()
        with self._process_lock:
            process = self._process
            if self._wake is not None:
                with contextlib.suppress(BlockingIOError):  # a wake-up is waiting already
                    os.write(self._wake, b"\0")
        if process is not None:
            _kill(process)


class _Output:
    """A shell command's output as it comes, read without blocking: what the model gets is
    kept (``_Clip``: the head and the tail), the rest only counted, so that memory stays
    bounded however much the command prints. Bytes that are not UTF-8 become U+FFFD, as in
    ``bytes.decode(errors="replace")`` of the whole output, wherever the reads cut it.

    ``wake`` is watched beside the output: a byte written to its other end (``cancel()``)
    ends ``read_until`` at once."""

    def __init__(self, pipe: IO[bytes], wake: int) -> None:
        self.clip = _Clip()
        #: Whether the output ended: every process holding it closed it.
        self.ended = False
        self._pipe = pipe
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        os.set_blocking(pipe.fileno(), False)
        self._selector = selectors.DefaultSelector()
        self._selector.register(pipe, selectors.EVENT_READ)
        self._selector.register(wake, selectors.EVENT_READ)
        self._wake = wake

    def read_until(self, deadline: float) -> bool:
        """Read until the output ends (True), or until ``deadline`` (monotonic) or a wake-up
        (False)."""
        while not self.ended:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            for key, _ in self._selector.select(left):
                if key.fileobj is not self._pipe:
                    return False
                self._read()
        return True

    def drain(self, grace: float) -> None:
        """Read what is left for at most ``grace`` seconds, whatever wakes."""
        if self._wake in self._selector.get_map():
            self._selector.unregister(self._wake)
        self.read_until(time.monotonic() + grace)

    def _read(self) -> None:
        try:
            data = os.read(self._pipe.fileno(), _READ_BYTES)
        except BlockingIOError:  # pragma: no cover - the selector said it was ready
            return
        if data:
            self.clip.add(self._decoder.decode(data))
            return
        self.ended = True
        self.clip.add(self._decoder.decode(b"", final=True))
        self._selector.unregister(self._pipe)

    def text(self) -> str:
        """The output as the model reads it; an unfinished character at the end of an output
        that did not end is left out."""
        return self.clip.text()

    def close(self) -> None:
        self._selector.close()
        self._pipe.close()


def _text(file: Path) -> str | None:
    """The text of ``file``, or None when it is not UTF-8 text (or cannot be read)."""
    try:
        return file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def _describe(name: str, info: os.stat_result, link: str) -> tuple[bool, str]:
    """Whether a listed entry sorts with the folders, and its line: a folder ends with /, a
    file gives its size; ``link`` (when the entry is a link) says where it points."""
    if stat.S_ISDIR(info.st_mode):
        return True, f"{name}/  ({link}/)" if link else f"{name}/"
    detail = f"{info.st_size} bytes" if stat.S_ISREG(info.st_mode) else "not a regular file"
    return False, f"{name}  ({link}, {detail})" if link else f"{name}  ({detail})"


def _make_folders(folder: Path) -> None:
    """Create ``folder`` and the folders missing above it, top down. ``Path.mkdir(parents=
    True)`` recurses once per missing folder, which a deep enough path turns into a
    RecursionError."""
    missing = []
    while not folder.exists():
        missing.append(folder)
        folder = folder.parent
    for each in reversed(missing):
        each.mkdir()


def _kill(process: subprocess.Popen[bytes]) -> None:
    """Kill the command and every process of it that can be found: its process group, the rest
    of its session (a process that moved to a group of its own), and the descendants of any of
    them (one that left for a session of its own, as ``setsid`` does, while its parent lives).

    One that left both, its parent gone (a double fork into a session of its own), cannot be
    told from the user's other processes: only a sandbox reaches it (its PID namespace dies
    with ``bwrap``). Such a process may keep the output open; ``Toolbox._run`` then stops
    reading after a grace and says so."""
    if process.returncode is not None:
        return  # reaped: its process group may be another's now
    # Looked for before the kill: once a parent dies, its children are the init process's.
    strays = _processes_of(process.pid)
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    except OSError:  # pragma: no cover - a platform without process groups
        process.kill()
    for pid in strays:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def _processes_of(leader: int) -> set[int]:
    """The processes of the session ``leader`` leads, and all their descendants, as ``/proc``
    lists them now (none where there is no ``/proc``); ``leader`` itself is left out."""
    children: dict[int, list[int]] = {}
    members = []
    try:
        names = os.listdir("/proc")
    except OSError:
        return set()
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as status:
                line = status.read()
        except OSError:  # gone meanwhile
            continue
        # pid (comm) state ppid pgrp session ...: comm may hold spaces and parentheses.
        fields = line[line.rfind(b")") + 2 :].split()
        if len(fields) < 4:
            continue
        pid, parent, session = int(name), int(fields[1]), int(fields[3])
        children.setdefault(parent, []).append(pid)
        if session == leader:
            members.append(pid)
    found: set[int] = set()
    waiting = [leader, *members]
    while waiting:
        pid = waiting.pop()
        if pid not in found:
            found.add(pid)
            waiting.extend(children.get(pid, ()))
    found.discard(leader)
    return found


def _reap(process: subprocess.Popen[bytes]) -> None:
    """Wait for the killed command's exit, but never for long: a process that ``SIGKILL``
    does not end at once (in the kernel, on a frozen filesystem) is left to the system."""
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=_KILL_GRACE)
