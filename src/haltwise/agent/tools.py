"""The agent's tools, confined to one workspace folder.

``Toolbox`` holds the tools the model may call (read a file, list a folder, search text, write a
file, edit a file by exact string replacement, run a shell command) and runs one call at a time:
``toolbox.call(name, arguments) -> ToolOutput``. Whatever the model sends, a call ends in a
``ToolOutput``; nothing a model writes raises out of here:

- each tool's arguments are one pydantic model (``_ReadFile``, ...): its JSON schema is what the
  model is shown and its validation is what the call goes through, so the two cannot disagree;
  arguments it refuses get a tool error naming the argument, the problem and what is expected;
- a path is resolved from the workspace down, a name at a time (``Workspace``): one that leads
  out (``..``, an absolute path, a symlink pointing out) is refused where it leaves, and what
  it names is then reached through descriptors without following any link, so a link put on
  the way meanwhile cannot lead out either; ``list_dir`` shows a link out of the workspace
  without looking at its target;
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
import errno
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

import psutil
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
#: The most links one path may lead through (as Linux counts): more is taken for a loop.
_MAX_LINKS = 40
#: How a folder on the way to a path is opened: never through a link (and, where the system
#: can, without needing to read the folder, as the kernel's own walk would not).
_FOLDER = getattr(os, "O_PATH", os.O_RDONLY) | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
#: Added to every open of a path the tools read or write.
_NO_LINK = os.O_NOFOLLOW | os.O_CLOEXEC

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


class _Outside(ToolError):
    """A path leads out of the workspace: by ``..``, as an absolute path, or by a link."""


class Workspace:
    """A folder the tools may not leave.

    A path is resolved from the workspace down, one name at a time, its links followed by
    reading them (``resolve``); what it names is then reached from the workspace down again,
    through descriptors, without following any link (``open``, ``stat``). So a link put on the
    way in between (by a command still running) makes a call fail; it never leads out."""

    def __init__(self, root: str | Path) -> None:
        path = Path(root).expanduser()
        if not path.is_dir():
            raise ToolError(f"the workspace {str(path)!r} is not a folder")
        self.root = path.resolve()

    def resolve(self, path: str | Path) -> Path:
        """``path`` (relative to the workspace, or absolute inside it) with every link on the way
        followed: a path inside the workspace with no link left in it.

        Nothing above the workspace is looked at: a ``..`` at the workspace, an absolute path
        outside it, or a link that leads out (its target absolute outside the workspace, or
        with ``..`` past it) is refused where it stands, even if a later name would come back.
        A name that does not exist (yet) is taken as written. A loop of links (more than
        ``_MAX_LINKS`` followed), a name under a file, or a name the system refuses (too long)
        is a ``ToolError`` too. A string is stripped of surrounding blanks (a model's slip); a
        ``Path`` (the tools' own) is taken as it is.
        """
        if isinstance(path, Path):
            asked = given = str(path)
        elif isinstance(path, str) and path.strip():
            asked, given = path, path.strip()
        else:
            raise ToolError("path must be a non-empty string, relative to the workspace")
        if "\x00" in given:
            raise ToolError(f"path {asked!r} cannot be resolved: it holds a NUL byte")
        todo = self._names(asked, given)[::-1]
        # The path resolved so far (no link in it, the last) and each folder above it up to the
        # workspace (the first): strings, as a Path join per name is quadratic on a deep path.
        resolved = [str(self.root)]
        followed = 0
        while todo:
            name = todo.pop()
            if name in ("", "."):
                continue
            if name == "..":
                if len(resolved) == 1:
                    raise self._outside(asked)
                resolved.pop()  # no link in the path: its parent is the real one
                continue
            here = os.path.join(resolved[-1], name)
            try:
                info = os.lstat(here)
            except FileNotFoundError:
                resolved.append(here)  # to be created, or missing: taken as written
                continue
            except NotADirectoryError:
                shown = self.show(Path(resolved[-1]))
                raise ToolError(
                    f"path {asked!r} cannot be resolved: {shown} is not a folder"
                ) from None
            except OSError as error:
                raise ToolError(f"path {asked!r} cannot be resolved: {error.strerror}") from None
            if not stat.S_ISLNK(info.st_mode):
                resolved.append(here)
                continue
            followed += 1
            if followed > _MAX_LINKS:
                raise ToolError(
                    f"path {asked!r} cannot be resolved: a loop of links "
                    f"(more than {_MAX_LINKS} followed)"
                )
            try:
                target = os.readlink(here)
            except OSError as error:  # no longer a link: changed meanwhile
                raise ToolError(f"path {asked!r} cannot be resolved: {error.strerror}") from None
            if Path(target).is_absolute():
                del resolved[1:]
            todo.extend(self._names(asked, target, Path(here))[::-1])
        return Path(resolved[-1])

    def _names(self, asked: str, path: str, link: Path | None = None) -> list[str]:
        """The names of ``path`` from the workspace down: all of a relative one's, an absolute
        one's past the workspace's own, which it must begin with (``link``: the link that
        holds it, for the message)."""
        if not Path(path).is_absolute():
            return path.split("/")
        parts, top = Path(path).parts, self.root.parts
        if parts[: len(top)] != top:
            raise self._outside(asked, link)
        return list(parts[len(top) :])

    def _outside(self, asked: str, link: Path | None = None) -> _Outside:
        through = "" if link is None else f" (the link {self.show(link)} points out of it)"
        return _Outside(
            f"path {asked!r} is outside the workspace {self.root}{through}; "
            "use a path inside it (relative paths start at the workspace)"
        )

    def open(self, path: Path, flags: int, *, make_folders: bool = False) -> int:
        """A descriptor of ``path`` (a path ``resolve`` gave), opened with ``flags`` from the
        workspace down, no link followed on the way (``O_NOFOLLOW``). ``make_folders`` creates
        the folders missing on the way (``write_file``), without recursion however deep."""
        if path == self.root:
            return os.open(self.root, flags | os.O_CLOEXEC)
        folder, name = self._folder_of(path, make_folders)
        try:
            return os.open(name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666, dir_fd=folder)
        except OSError as error:
            # A link stands where there was none (ENOTDIR: one opened as a folder).
            if error.errno in (errno.ELOOP, errno.ENOTDIR):
                raise self._changed(path) from None
            raise
        finally:
            os.close(folder)

    def stat(self, path: Path) -> os.stat_result:
        """What ``path`` (a path ``resolve`` gave) is, reached as ``open`` reaches it; a link is
        not followed."""
        if path == self.root:
            return os.stat(self.root)
        folder, name = self._folder_of(path, make_folders=False)
        try:
            return os.stat(name, dir_fd=folder, follow_symlinks=False)
        finally:
            os.close(folder)

    def _folder_of(self, path: Path, make_folders: bool) -> tuple[int, str]:
        """A descriptor of the folder holding ``path``, opened from the workspace down one
        name at a time without following a link, and the name of ``path`` in it."""
        *folders, name = path.relative_to(self.root).parts
        folder = os.open(self.root, _FOLDER)
        try:
            for each in folders:
                if make_folders:
                    with contextlib.suppress(FileExistsError):
                        os.mkdir(each, dir_fd=folder)
                try:
                    inner = os.open(each, _FOLDER, dir_fd=folder)
                except NotADirectoryError:  # a link (or a file) stands where a folder was
                    raise self._changed(path) from None
                os.close(folder)
                folder = inner
        except BaseException:
            os.close(folder)
            raise
        return folder, name

    def _changed(self, path: Path) -> ToolError:
        return ToolError(
            f"{self.show(path)} changed while the tool was at it: a link (or a file) now stands "
            "where it found none; links are followed only when a path is resolved"
        )

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
        descriptor = self._open_file(
            target, os.O_RDONLY, f"{path!r} is not a file in the workspace"
        )
        first = offset or 1
        stop = None if limit is None else first + limit
        clip = _Clip()
        with open(descriptor, encoding="utf-8", errors="replace") as handle:
            for number, piece in self._numbered(handle):
                if stop is not None and number >= stop:
                    break
                if number >= first:
                    clip.add(piece)
        return ToolOutput(clip.text())

    def _open_file(self, target: Path, flags: int, error: str, *, create: bool = False) -> int:
        """A descriptor of the regular file ``target`` (see ``Workspace.open``), blocking;
        ``ToolError(error)`` when it is anything else. Opened without blocking and looked at
        before it is used: a FIFO would block the open and the reads. ``create``: a missing
        file is created, and the folders on its way (the caller looked at what was there)."""
        if not create:
            try:
                info = self.workspace.stat(target)
            except FileNotFoundError:
                raise ToolError(error) from None
            if not stat.S_ISREG(info.st_mode):
                raise ToolError(error)
        descriptor = self.workspace.open(target, flags | os.O_NONBLOCK, make_folders=create)
        try:
            if not stat.S_ISREG(os.fstat(descriptor).st_mode):  # changed since it was looked at
                raise ToolError(error)
            os.set_blocking(descriptor, True)
        except BaseException:
            os.close(descriptor)
            raise
        return descriptor

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
        try:
            is_folder = stat.S_ISDIR(self.workspace.stat(target).st_mode)
        except FileNotFoundError:
            is_folder = False
        if not is_folder:
            raise ToolError(f"{path!r} is not a folder in the workspace")
        shown: list[tuple[bool, str, str]] = []
        folder = self.workspace.open(target, os.O_RDONLY | os.O_DIRECTORY)
        try:
            with os.scandir(folder) as entries:
                for entry in entries:
                    self._check("list_dir")
                    is_folder, line = self._entry(target, entry)
                    shown.append((not is_folder, entry.name, line))
        finally:
            os.close(folder)
        lines = [line for _, _, line in sorted(shown)]
        return ToolOutput(_truncate("\n".join(lines)) if lines else "(empty folder)")

    def _entry(self, folder: Path, entry: os.DirEntry[str]) -> tuple[bool, str]:
        """Whether ``entry`` (of ``folder``) is listed with the folders, and its line in the
        listing. A link is resolved only to learn where it points, and its target is looked at
        only when that is inside the workspace: a link out says so and no more."""
        name = _printable(entry.name)
        if not entry.is_symlink():
            return _describe(name, entry.stat(follow_symlinks=False), "")
        try:
            target = self.workspace.resolve(folder / entry.name)
            info = self.workspace.stat(target)
        except _Outside:
            return False, f"{name}  (link to outside the workspace)"
        except (OSError, ToolError):  # a dangling link, or a loop of links
            return False, f"{name}  (broken link)"
        return _describe(name, info, f"link to {self.workspace.show(target)}")

    def search(self, pattern: str, path: str = ".", regex: bool = False) -> ToolOutput:
        matches_line = _matcher(pattern, regex)
        root = self.workspace.resolve(path)
        matches: list[str] = []
        try:
            for file, text in self._texts(root):
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

    def _texts(self, root: Path) -> Iterator[tuple[Path, str]]:
        """The files under ``root`` (or ``root``, a file) that search may read, each with its
        text, folder by folder in name order: regular files (a FIFO would block the read) of
        at most ``_MAX_SEARCH_BYTES``, UTF-8 text, inside the workspace once their links are
        followed.

        Links to folders are not walked into, so a loop of links cannot trap the walk; the walk
        keeps its own stack, as ``os.walk`` recurses once per level (until Python 3.12) and a
        deep enough tree would be a RecursionError. Nothing is reached through a link put on
        the way meanwhile: a file is opened from its folder's descriptor without following a
        link, and a folder is read only if it is the one its parent listed (same device and
        inode, as ``os.fwalk`` checks)."""
        try:
            info = self.workspace.stat(root)
            alone = None if stat.S_ISDIR(info.st_mode) else self._open_file(root, os.O_RDONLY, "")
        except (OSError, ToolError):
            return
        if alone is not None:
            text = self._text(alone)
            if text is not None:
                yield root, text
            return
        folders = [(root, (info.st_dev, info.st_ino))]
        while folders:
            self._check("search")
            folder, listed = folders.pop()
            try:
                descriptor = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | _NO_LINK)
            except OSError:
                continue
            try:
                now = os.fstat(descriptor)
                if (now.st_dev, now.st_ino) != listed:
                    continue  # not the folder listed: it changed meanwhile
                subfolders = []
                for name, kind, identity in _listing(descriptor):
                    self._check("search")
                    if kind == "folder" and name not in _SKIPPED:
                        subfolders.append((folder / name, identity))
                        continue
                    text = None
                    if kind == "file":
                        with contextlib.suppress(OSError):
                            flags = os.O_RDONLY | os.O_NONBLOCK | _NO_LINK
                            text = self._text(os.open(name, flags, dir_fd=descriptor))
                    elif kind == "link":
                        with contextlib.suppress(OSError, ToolError):
                            target = self.workspace.resolve(folder / name)
                            text = self._text(self._open_file(target, os.O_RDONLY, ""))
                    if text is not None:
                        yield folder / name, text
                folders.extend(reversed(subfolders))
            finally:
                os.close(descriptor)

    @staticmethod
    def _text(descriptor: int) -> str | None:
        """The text of the file open as ``descriptor``, which is closed; None when it is not a
        regular file of at most ``_MAX_SEARCH_BYTES`` of UTF-8 text."""
        try:
            info = os.fstat(descriptor)
            if not stat.S_ISREG(info.st_mode) or info.st_size > _MAX_SEARCH_BYTES:
                return None
            os.set_blocking(descriptor, True)
            with open(descriptor, encoding="utf-8", closefd=False) as handle:
                return handle.read(_MAX_SEARCH_BYTES + 1)
        except (OSError, UnicodeDecodeError):
            return None
        finally:
            os.close(descriptor)

    def write_file(self, path: str, content: str) -> ToolOutput:
        target = self.workspace.resolve(path)
        try:
            info: os.stat_result | None = self.workspace.stat(target)
        except FileNotFoundError:
            info = None
        if info is not None and stat.S_ISDIR(info.st_mode):
            raise ToolError(f"{path!r} is a folder")
        not_a_file = f"{path!r} is not a regular file; write_file only writes files"
        if info is not None and not stat.S_ISREG(info.st_mode):
            raise ToolError(not_a_file)
        flags = os.O_WRONLY | os.O_CREAT
        _write(self._open_file(target, flags, not_a_file, create=True), content)
        lines = content.count("\n") + (1 if content and not content.endswith("\n") else 0)
        verb = "overwrote" if info is not None else "created"
        return ToolOutput(f"{verb} {self.workspace.show(target)} ({lines} lines)")

    def edit_file(self, path: str, old_text: str, new_text: str) -> ToolOutput:
        target = self.workspace.resolve(path)
        not_a_file = f"{path!r} is not a file in the workspace"
        with open(self._open_file(target, os.O_RDONLY, not_a_file), encoding="utf-8") as handle:
            if os.fstat(handle.fileno()).st_size > _MAX_EDIT_BYTES:
                raise ToolError(
                    f"{path!r} is larger than {_MAX_EDIT_BYTES:,} bytes, too large to edit "
                    "here; use run_command with a tool made for large files"
                )
            try:
                text = handle.read()
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
        _write(
            self._open_file(target, os.O_WRONLY, not_a_file), text.replace(old_text, new_text, 1)
        )
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


def _listing(folder: int) -> list[tuple[str, str, tuple[int, int]]]:
    """The entries of the open ``folder`` in name order, each a name, a kind (``folder``,
    ``file``: a regular one, ``link``, or ``other``) and its device and inode; links are not
    followed."""
    entries = []
    with os.scandir(folder) as scan:
        for entry in scan:
            with contextlib.suppress(OSError):  # gone meanwhile
                info = entry.stat(follow_symlinks=False)
                kinds = [kind for kind, test in _KINDS if test(info.st_mode)]
                entries.append(
                    (entry.name, kinds[0] if kinds else "other", (info.st_dev, info.st_ino))
                )
    return sorted(entries)


#: What ``_listing`` tells apart.
_KINDS = (("folder", stat.S_ISDIR), ("file", stat.S_ISREG), ("link", stat.S_ISLNK))


def _write(descriptor: int, text: str) -> None:
    """Make ``text`` (as UTF-8) the whole content of the file open as ``descriptor``, which is
    closed."""
    with open(descriptor, "w", encoding="utf-8") as handle:
        os.ftruncate(descriptor, 0)
        handle.write(text)


def _describe(name: str, info: os.stat_result, link: str) -> tuple[bool, str]:
    """Whether a listed entry sorts with the folders, and its line: a folder ends with /, a
    file gives its size; ``link`` (when the entry is a link) says where it points."""
    if stat.S_ISDIR(info.st_mode):
        return True, f"{name}/  ({link}/)" if link else f"{name}/"
    detail = f"{info.st_size} bytes" if stat.S_ISREG(info.st_mode) else "not a regular file"
    return False, f"{name}  ({link}, {detail})" if link else f"{name}  ({detail})"


def _kill(process: subprocess.Popen[bytes]) -> None:
    """Kill the command and every process of it that can be found: its process group, the rest
    of its session (a process that moved to a group of its own, even once its parent is gone),
    and the descendants of any of them (one that left for a session of its own, as ``setsid``
    does, while its parent lives).

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
    for stray in strays:
        # psutil checks that the PID is still the process found, not a new one that reused it.
        with contextlib.suppress(psutil.Error):
            stray.kill()


def _processes_of(leader: int) -> list[psutil.Process]:
    """The processes of the session ``leader`` leads and all their descendants, as they are
    now; ``leader`` itself is left out."""
    roots = []
    for candidate in psutil.process_iter():
        with contextlib.suppress(OSError):  # gone meanwhile
            if os.getsid(candidate.pid) == leader:
                roots.append(candidate)
    found: dict[int, psutil.Process] = {}
    for root in roots:
        if root.pid in found:
            continue  # a descendant of a member looked at already
        with contextlib.suppress(psutil.Error):
            found.update((each.pid, each) for each in [root, *root.children(recursive=True)])
    found.pop(leader, None)
    return list(found.values())


def _reap(process: subprocess.Popen[bytes]) -> None:
    """Wait for the killed command's exit, but never for long: a process that ``SIGKILL``
    does not end at once (in the kernel, on a frozen filesystem) is left to the system."""
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=_KILL_GRACE)
