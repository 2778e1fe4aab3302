"""Readers of recorded agent runs, detected from each file, each yielding the same event stream.

=====================  ==============================  ========================================
format                 files                           per-step usage
=====================  ==============================  ========================================
``swe-agent``          SWE-agent ``*.traj``             estimated: the run's totals spread over
                                                       its steps by the size of each prompt
``mini-swe-agent``     ``*.traj.json``                  billed: ``usage`` of every response
``tau-bench``          a JSON list of results           none (tokens and dollars unknown)
                       (``task_id``, ``reward``,
                       ``traj``)
``openai``             OpenAI chat-completions          where messages carry ``usage``
                       messages (a list, or objects
                       with ``messages``, ``traj``
                       or ``history``)
``haltwise``           haltwise's JSONL event log       as logged
=====================  ==============================  ========================================

Labels come from the corpus: SWE-bench reports next to the trajectories (``results.json``,
``final_report.json``, ``results_summary.json``), a tau-bench ``reward``, a transcript's own
``resolved``/``reward``/``success``, or a ``Label`` line in an event log. Model names come from
the file, else from ``args.yaml``/``metadata.yaml`` beside it, else from a folder or file name
that names a priced model, else ``--model``.

A transcript's tool calls are read wherever it keeps them: ``tool_calls`` (results in ``tool``
messages), the legacy ``function_call`` (results in ``function`` messages), SWE-agent's
``action``, or, in a transcript that records none of these, written into the assistant's text
by prompt-based function calling: ``<function=NAME><parameter=KEY>VALUE</parameter></function>``
blocks, or one fenced ``bash``/``sh`` block, the next user message being the result. Of two
copies of a conversation in one file, the one that records its calls is read, never both.

Files are read one at a time; JSON lists of runs are decoded item by item. A file that cannot be
read yields a ``ReadError`` naming it and the position, and reading goes on. ``Reader.warnings()``
names what was read but should not be trusted blindly: a corpus whose runs hold no tool call
(no detector can fire on it), and written calls that could not be read, once per file.
"""

from __future__ import annotations

import codecs
import json
import os
import re
import stat
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any, Final

import orjson

from ..engine.errors import InvalidValueError
from ..engine.events import (
    MAX_CALL_DOLLARS,
    MAX_COUNT,
    Event,
    Injected,
    ModelRequest,
    ModelResponse,
    RunEnded,
    RunStarted,
    ToolCall,
    ToolResult,
    TurnEnded,
    TurnStarting,
)
from ..eventlog import read_event_log
from .runs import (
    USAGE_ESTIMATED,
    USAGE_NONE,
    USAGE_PER_STEP,
    ReadError,
    ReadNote,
    Run,
    RunMeta,
    ended_on_limit,
)

__all__ = [
    "FORMATS",
    "ReadNotes",
    "ReadWarning",
    "Reader",
    "detect_format",
    "find_files",
    "read_paths",
]

FORMATS = ("swe-agent", "mini-swe-agent", "tau-bench", "openai", "haltwise")

#: Files that describe a corpus rather than hold runs.
_SIDECARS = frozenset(
    {
        "results.json",
        "final_report.json",
        "results_summary.json",
        "report.json",
        "preds.json",
        "metadata.yaml",
        "args.yaml",
        "config.yaml",
    }
)
_SUFFIXES = (".traj", ".json", ".jsonl")
#: SWE-agent's pseudo-actions for a run its harness ended.
_EXIT_ACTIONS = re.compile(r"^exit_\w+$")

KnownModel = Callable[[str], bool]
Result = Run | ReadError


# --------------------------------------------------------------------------------------------
# Finding and detecting files


def find_files(paths: Iterable[str | Path]) -> Iterator[tuple[Path, str]]:
    """Each run file under ``paths`` with its corpus name, in a stable order.

    Symlinked folders are searched like the others, each folder once however many links lead to
    it, so that a link back up the tree ends rather than loops. A folder that cannot be searched
    (unreadable, or gone since it was listed) is yielded as though it were a run file: reading it
    then names it and says why, as an error the audit reports and counts, where the search alone
    would pass over it in silence.
    """
    for given in paths:
        path = Path(given)
        if not path.is_dir():
            yield path, path.resolve().parent.name
            continue
        unsearched: list[OSError] = []  # os.walk's errors, each at a folder it could not list
        searched: set[tuple[int, int]] = set()
        _first_visit(path, searched)
        for root, dirs, files in os.walk(path, onerror=unsearched.append, followlinks=True):
            yield from _unsearched(unsearched, path)
            dirs.sort()
            dirs[:] = [name for name in dirs if _first_visit(Path(root) / name, searched)]
            for name in sorted(files):
                if name in _SIDECARS or not name.endswith(_SUFFIXES):
                    continue
                file = Path(root) / name
                yield file, _corpus_of(file, path)
        yield from _unsearched(unsearched, path)  # the last folders listed, or the one given


def _unsearched(errors: list[OSError], given: Path) -> Iterator[tuple[Path, str]]:
    """The folders the walk of ``given`` could not list since it was last asked, forgotten."""
    for error in errors:
        folder = Path(error.filename)
        yield folder, _corpus_of(folder, given)
    errors.clear()


def _corpus_of(found: Path, given: Path) -> str:
    """The corpus of what was found under the folder ``given``: the first folder under it, or
    the folder itself for its own files."""
    relative = found.relative_to(given).parts
    return relative[0] if len(relative) > 1 else given.resolve().name


def _identity(folder: Path) -> tuple[int, int] | None:
    """The device and inode of ``folder`` (through a link): the same for every path to it."""
    try:
        status = folder.stat()
    except OSError:
        return None  # the walk reports it when it tries to go in
    return status.st_dev, status.st_ino


def _first_visit(folder: Path, searched: set[tuple[int, int]]) -> bool:
    """Whether ``folder`` is still to be searched, noting that it will have been."""
    identity = _identity(folder)
    if identity is None:
        return True
    if identity in searched:
        return False
    searched.add(identity)
    return True


#: What is not a regular file, by the test that tells it.
_NOT_REGULAR = (
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


def _not_a_run_file(path: Path) -> str:
    """Why ``path`` is not to be opened as a run file, or ``""``. Only a regular file is: opening
    a named pipe waits for a writer that may never come. A folder here is one the search could
    not go into (``find_files``). An empty file is said to be empty, not of an unknown format."""
    status = path.stat()
    if stat.S_ISDIR(status.st_mode):
        try:
            os.scandir(path).close()
        except OSError as error:
            return f"is a folder that cannot be searched: {error.strerror or error}"
        return "is a folder that could not be searched"
    if not stat.S_ISREG(status.st_mode):
        kind = next((name for test, name in _NOT_REGULAR if test(status.st_mode)), "a special file")
        return f"is {kind}, not a regular file: not opened"
    if status.st_size == 0:
        return "is empty"
    return ""


def detect_format(path: Path) -> str | None:
    """The format of ``path`` from its name and first bytes, or None."""
    name = path.name
    if name.endswith(".traj"):
        return "swe-agent"
    if name.endswith(".jsonl"):
        return "haltwise"
    if not name.endswith(".json"):
        return None
    with path.open("rb") as stream:
        # "utf-8-sig": past a byte order mark, which some editors write first.
        head = stream.read(65536).decode("utf-8-sig", "replace")
    stripped = head.lstrip()
    if stripped.startswith("{"):
        if name.endswith(".traj.json"):
            return "mini-swe-agent"
        if '"trajectory_format"' in head or ('"messages"' in head and '"mini_version"' in head):
            return "mini-swe-agent"
        if '"trajectory"' in head and '"history"' in head:
            return "swe-agent"
        return "openai"
    if stripped.startswith("["):
        if '"traj"' in head and ('"reward"' in head or '"task_id"' in head):
            return "tau-bench"
        return "openai"
    if name.endswith(".traj.json"):
        # Named as a mini-swe-agent run, and holding no object: its reader says what it holds.
        return "mini-swe-agent"
    return None


@dataclass(frozen=True, slots=True)
class ReadWarning(ReadNote):
    """Something about what was read that the audit's figures should be read with: a corpus
    whose runs hold no tool call, so that no stuck detector could fire on them, or blocks of a
    file that could not be read as calls."""


#: What each format's files hold a tool call as: said when a corpus yields none.
_CALLS_EXPECTED = {
    "swe-agent": 'an "action" in each "trajectory" step',
    "mini-swe-agent": "one ```bash block in each assistant message",
    "tau-bench": '"tool_calls" in the assistant messages of each "traj"',
    "openai": (
        '"tool_calls", a legacy "function_call", or calls written in the assistant\'s text '
        "(<function=NAME> blocks, or one ```bash or ```sh block per message, answered in the "
        "next user message)"
    ),
    "haltwise": "ToolCall events",
}


@dataclass(slots=True)
class _CorpusCalls:
    """How many runs of one corpus, in one format, were read, and whether any called a tool."""

    folder: str
    runs: int = 0
    calls: bool = False


@dataclass(slots=True)
class ReadNotes:
    """What a ``Reader`` noted while reading: warnings about files, and per corpus and format
    how many runs were read and whether any called a tool."""

    warnings: list[ReadWarning]
    calls: dict[tuple[str, str], _CorpusCalls]


class Reader:
    """Reads run files one at a time, remembering the corpus reports it has read.

    ``model`` names the model of runs whose files do not; ``known_model`` says whether a name is
    a model with a known price (used to take a model's name from a folder or file name).
    ``warnings()`` says, after the files are read, what the audit's figures should be read with.
    """

    def __init__(self, *, model: str | None = None, known_model: KnownModel | None = None):
        self._labels = _Labels()
        self._model = model
        self._known = known_model or (lambda name: False)
        self._file_warnings: list[ReadWarning] = []
        self._calls: dict[tuple[str, str], _CorpusCalls] = {}

    def read(self, path: Path, corpus: str) -> Iterator[Result]:
        """The runs of one file, and a ``ReadError`` for what cannot be read."""
        try:
            refused = _not_a_run_file(path)
            kind = None if refused else detect_format(path)
        except OSError as error:
            yield ReadError(str(path), "", f"cannot be read: {error.strerror or error}")
            return
        if refused or kind is None:
            message = refused or f"is not a run file of a known format ({_KNOWN})"
            yield ReadError(str(path), "", message)
            return
        reader = _READERS[kind]
        try:
            for item in reader(path, corpus, self._labels, self._model, self._known):
                if isinstance(item, ReadWarning):
                    self._file_warnings.append(item)
                    continue
                if isinstance(item, Run):
                    self._count_calls(item, corpus, kind, path)
                yield item
        except _Malformed as error:
            yield ReadError(str(path), error.position, error.message)
        except json.JSONDecodeError as error:
            yield ReadError(
                str(path), f"line {error.lineno}, column {error.colno}", f"bad JSON: {error.msg}"
            )
        except InvalidValueError as error:
            # The event log names "file:line what" as the source of a bad line.
            named = _LOG_SOURCE.fullmatch(str(error.source))
            position = f"line {named[1]}" if named else ""
            shown = f"{named[2]}={error.value!r}" if named and named[2] else repr(error.value)
            yield ReadError(str(path), position, f"{shown} is not valid: {error.valid}")
        except (OSError, UnicodeDecodeError) as error:
            yield ReadError(str(path), "", f"cannot be read: {error}")

    def warnings(self) -> list[ReadWarning]:
        """What the files read so far call for: a warning for each file with calls that could
        not be read, and one for each corpus (and format) whose runs hold no tool call at all."""
        found = list(self._file_warnings)
        for (corpus, kind), tally in self._calls.items():
            if tally.calls:
                continue
            found.append(
                ReadWarning(
                    tally.folder,
                    "",
                    f"no tool calls found in the {tally.runs} {kind} runs of corpus {corpus!r}: "
                    f"expected {_CALLS_EXPECTED[kind]}. No stuck detector can fire on these "
                    "runs, so their figures say nothing about loops.",
                )
            )
        return found

    def take_notes(self) -> ReadNotes:
        """What the files read since the last call noted, handed over and forgotten here: how a
        worker process passes its notes to the process that reports."""
        notes = ReadNotes(self._file_warnings, self._calls)
        self._file_warnings = []
        self._calls = {}
        return notes

    def add_notes(self, notes: ReadNotes) -> None:
        """Notes taken by another ``Reader``, as though its files had been read here."""
        self._file_warnings.extend(notes.warnings)
        for key, theirs in notes.calls.items():
            tally = self._calls.get(key)
            if tally is None:
                self._calls[key] = _CorpusCalls(theirs.folder, theirs.runs, theirs.calls)
                continue
            if theirs.folder != tally.folder:
                tally.folder = os.path.commonpath([tally.folder, theirs.folder])
            tally.runs += theirs.runs
            tally.calls = tally.calls or theirs.calls

    def _count_calls(self, run: Run, corpus: str, kind: str, path: Path) -> None:
        folder = os.path.abspath(path.parent)
        tally = self._calls.get((corpus, kind))
        if tally is None:
            tally = self._calls[corpus, kind] = _CorpusCalls(folder)
        elif folder != tally.folder:
            tally.folder = os.path.commonpath([tally.folder, folder])
        tally.runs += 1
        tally.calls = tally.calls or any(type(event) is ToolCall for event in run.events)


def read_paths(
    paths: Iterable[str | Path],
    *,
    model: str | None = None,
    known_model: KnownModel | None = None,
) -> Iterator[Result]:
    """Every run under ``paths``, as ``Run``s, and a ``ReadError`` for what cannot be read."""
    reader = Reader(model=model, known_model=known_model)
    for path, corpus in find_files(paths):
        yield from reader.read(path, corpus)


_KNOWN = (
    "SWE-agent .traj, mini-swe-agent .traj.json, tau-bench results, OpenAI messages, "
    "haltwise .jsonl"
)


class _Malformed(Exception):
    def __init__(self, position: str, message: str) -> None:
        super().__init__(f"{position}: {message}")
        self.position = position
        self.message = message


# --------------------------------------------------------------------------------------------
# Labels and model names from the corpus around a file


class _Labels:
    """The corpus's verdicts per folder, read once each."""

    def __init__(self) -> None:
        self._by_folder: dict[Path, dict[str, bool] | None] = {}
        self._models: dict[Path, str | None] = {}

    def resolved(self, folder: Path, instance: str) -> bool | None:
        if folder not in self._by_folder:
            self._by_folder[folder] = _read_reports(folder)
        verdicts = self._by_folder[folder]
        if verdicts is None:
            return None
        return verdicts.get(instance, verdicts.get("*"))

    def model(self, folder: Path, known: KnownModel) -> str | None:
        if folder not in self._models:
            self._models[folder] = _model_beside(folder, known)
        return self._models[folder]


#: The source an event log gives a bad line: "file:line", then what on it was bad.
_LOG_SOURCE = re.compile(r".*:(\d+)(?: (.+))?", re.DOTALL)


def _load(path: Path) -> Any:
    """A corpus report beside the runs, or None where there is none to read: a report that is
    not a regular file (a named pipe would never end) or not JSON is passed over."""
    try:
        if not path.is_file():
            return None
        return _load_json(path)
    except (OSError, ValueError, _Malformed):
        return None


def _load_json(path: Path) -> Any:
    """The JSON document in ``path``, past a byte order mark. orjson decodes it three times
    faster; what orjson refuses and Python's ``json`` takes (NaN, lone surrogates) or refuses
    with a line and column goes through ``json``, so a file reads and fails as it always has.
    What ``json`` cannot decode either but says no more of than "too deep" or "too long" is
    ``_Malformed`` at the line and column where orjson stopped."""
    data = path.read_bytes().removeprefix(codecs.BOM_UTF8)
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as refused:
        text = data.decode("utf-8")  # outside the try: its UnicodeDecodeError is a ValueError
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            raise  # with its own line and column
        except (RecursionError, ValueError) as error:
            position = f"line {refused.lineno}, column {refused.colno}"
            raise _Malformed(position, _beyond_json(error)) from None


def _beyond_json(error: RecursionError | ValueError) -> str:
    """What Python's ``json`` could not decode, as it says it without a position: lists and
    objects nested deeper than its recursion goes, or an integer longer than Python converts
    (``sys.get_int_max_str_digits``)."""
    if isinstance(error, RecursionError):
        return "bad JSON: lists or objects nested too deeply to decode"
    return f"bad JSON: an integer of more than {sys.get_int_max_str_digits()} digits"


def _read_reports(folder: Path) -> dict[str, bool] | None:
    """Instance id -> solved, from a SWE-bench style report; ``"*"`` for ids it does not list."""
    verdicts: dict[str, bool] = {}
    found = False
    summary = _load(folder / "results_summary.json")
    if isinstance(summary, dict) and isinstance(summary.get("instances"), list):
        found = True
        for item in summary["instances"]:
            if isinstance(item, dict) and "instance_id" in item:
                verdicts[str(item["instance_id"])] = bool(item.get("resolved"))
    for name in ("results.json", "final_report.json", "report.json"):
        report = _load(folder / name)
        if not isinstance(report, dict):
            continue
        resolved = report.get("resolved_ids", report.get("resolved"))
        if not isinstance(resolved, list):
            continue
        found = True
        for key in ("unresolved_ids", "empty_patch_ids", "error_ids", "incomplete_ids"):
            for instance in report.get(key) or ():
                verdicts.setdefault(str(instance), False)
        for instance in resolved:
            verdicts[str(instance)] = True
        # A report covers its whole run: an instance it does not name was not solved.
        verdicts.setdefault("*", False)
    return verdicts if found else None


_YAML_NAME = re.compile(r"^\s*(model_name|name)\s*:\s*['\"]?([^'\"\n#]+)", re.M)


def _model_beside(folder: Path, known: KnownModel) -> str | None:
    for parent in (folder, folder.parent):
        args = parent / "args.yaml"
        if args.is_file():
            text = args.read_text(encoding="utf-8", errors="replace")
            for key, value in _YAML_NAME.findall(text):
                if key == "model_name":
                    return str(value).strip()
    metadata = folder / "metadata.yaml"
    if metadata.is_file():
        text = metadata.read_text(encoding="utf-8", errors="replace")
        for key, value in _YAML_NAME.findall(text):
            if key == "name":
                # "SWE-agent + deepseek-chat-v2": the model is what follows the agent.
                return str(value).split("+")[-1].strip()
    for part in (folder.name, folder.parent.name):
        if known(part):
            return part
    return None


def _model_from_name(stem: str, known: KnownModel) -> str | None:
    """The longest dash-separated prefix of a file name that is a known model."""
    parts = stem.split("-")
    for end in range(len(parts), 0, -1):
        candidate = "-".join(parts[:end])
        if known(candidate):
            return candidate
    return None


# --------------------------------------------------------------------------------------------
# Shared helpers


def _spread(total: int, weights: list[int]) -> list[int]:
    """``total`` split in proportion to ``weights``, in whole numbers that add up to it."""
    whole = sum(weights)
    if not weights:
        return []
    if whole <= 0:
        weights = [1] * len(weights)
        whole = len(weights)
    shares = [total * weight / whole for weight in weights]
    parts = [int(share) for share in shares]
    rest = total - sum(parts)
    order = sorted(range(len(shares)), key=lambda i: shares[i] - parts[i], reverse=True)
    for index in order[:rest]:
        parts[index] += 1
    return parts


def _text(value: Any) -> str:
    """A message's content as text (OpenAI content may be a list of parts)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        pieces = []
        for part in value:
            if isinstance(part, dict):
                pieces.append(str(part.get("text") or part.get("content") or ""))
            else:
                pieces.append(str(part))
        return "\n".join(pieces)
    return str(value)


def _obj(value: Any) -> dict[str, Any]:
    """``value`` when it is a JSON object, else an empty one."""
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _int(value: Any) -> int:
    """A recorded count, or 0 (unknown) for what is not one: not an int, negative, or past
    what any event may carry (``MAX_COUNT``)."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 < value <= MAX_COUNT:
        return value
    return 0


_MAX_DOLLARS = Decimal(MAX_CALL_DOLLARS)


def _money(value: Any) -> Decimal | None:
    """A recorded amount of dollars, or None (unknown) for what is not one: not a number,
    negative, or past what one model call may cost (``MAX_CALL_DOLLARS``), which no event
    carries."""
    if value is None or isinstance(value, bool):
        return None
    try:
        amount = Decimal(str(value))
    except InvalidOperation:
        return None
    return amount if amount.is_finite() and 0 <= amount <= _MAX_DOLLARS else None


def _command_name(action: str) -> str:
    words = action.strip().split(None, 1)
    return words[0] if words else "(empty)"


def _turn(
    events: list[Event],
    *,
    model: str,
    input_tokens: int = 0,
    output_tokens: int = 0,
    cache_read: int = 0,
    cost: Decimal | None = None,
    text: str | None,
    calls: list[tuple[ToolCall, ToolResult | None]],
    thought: str | None = None,
) -> None:
    """The events of one turn: a model round trip with its tool calls."""
    events.append(TurnStarting())
    events.append(ModelRequest(model=model))
    events.append(
        ModelResponse(
            model=model,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            # The cached tokens are among the prompt's; a record saying more has one of the two
            # wrong, and the prompt's count is the one the limits read.
            cache_read_tokens=min(cache_read, input_tokens),
            cost=cost,
            text=text,
            tool_calls=len(calls),
        )
    )
    for call, result in calls:
        events.append(call)
        if result is not None:
            events.append(result)
    events.append(TurnEnded(text=thought if thought is not None else text))


# --------------------------------------------------------------------------------------------
# SWE-agent .traj


def _read_swe_agent(
    path: Path, corpus: str, labels: _Labels, model: str | None, known: KnownModel
) -> Iterator[Result]:
    data = _load_json(path)
    if not isinstance(data, dict) or not isinstance(data.get("trajectory"), list):
        raise _Malformed("top level", 'expected an object with a "trajectory" list')
    info = _obj(data.get("info"))
    stats = _obj(info.get("model_stats"))
    instance = path.name.removesuffix(".traj")
    folder = path.parent
    name = model or labels.model(folder, known) or ""
    steps = []
    for index, step in enumerate(data["trajectory"]):
        if not isinstance(step, dict) or not isinstance(step.get("action"), str):
            raise _Malformed(f"trajectory[{index}]", 'expected an object with an "action" string')
        if _EXIT_ACTIONS.match(step["action"].strip()):
            continue  # the harness ended the run here; the model was not called
        steps.append(step)
    # Per-step prompt sizes from the chat history, to spread the run's token totals.
    history = _list(data.get("history"))
    prompt_sizes: list[int] = []
    answer_sizes: list[int] = []
    seen = 0
    for message in history:
        if not isinstance(message, dict):
            continue
        size = len(_text(message.get("content")))
        if message.get("role") == "assistant":
            prompt_sizes.append(seen)
            answer_sizes.append(size)
        seen += size
    if len(prompt_sizes) != len(steps):
        seen = 0
        prompt_sizes, answer_sizes = [], []
        for step in steps:
            answer = len(_text(step.get("response")))
            prompt_sizes.append(seen + 4000)
            answer_sizes.append(answer)
            seen += answer + len(_text(step.get("observation")))
    sent = _spread(_int(stats.get("tokens_sent")), prompt_sizes)
    received = _spread(_int(stats.get("tokens_received")), answer_sizes)
    has_tokens = bool(stats.get("tokens_sent"))
    exit_status = info.get("exit_status")
    exit_status = str(exit_status) if exit_status is not None else None
    run_id = instance if folder.name == corpus else f"{folder.name}/{instance}"
    meta = RunMeta(
        run_id=run_id,
        corpus=corpus,
        model=name,
        source=str(path),
        format="swe-agent",
        resolved=labels.resolved(folder, instance),
        exit_status=exit_status,
        ended_on_limit=ended_on_limit(exit_status),
        usage=USAGE_ESTIMATED if has_tokens else USAGE_NONE,
        recorded_cost=_money(stats.get("instance_cost")),
    )
    prompt = ""
    for message in history:
        if isinstance(message, dict) and message.get("role") == "user":
            prompt = _text(message.get("content"))
            break
    events: list[Event] = [RunStarted(prompt=prompt, run_id=run_id)]
    for index, step in enumerate(steps):
        action = step["action"]
        call = ToolCall(
            name=_command_name(action), arguments={"command": action}, call_id=str(index)
        )
        result = ToolResult(
            name=call.name, content=_text(step.get("observation")), call_id=str(index)
        )
        _turn(
            events,
            model=name if has_tokens else "",
            input_tokens=sent[index] if has_tokens else 0,
            output_tokens=received[index] if has_tokens else 0,
            text=_text(step.get("response")),
            calls=[(call, result)],
            thought=_text(step.get("thought")) or None,
        )
    submission = info.get("submission")
    events.append(RunEnded(output=submission if isinstance(submission, str) else None))
    yield Run(meta, events)


# --------------------------------------------------------------------------------------------
# mini-swe-agent .traj.json

#: The one fence mini-swe-agent runs; any other block in its messages is text.
_MINI_FENCES = frozenset({"bash"})
#: At most 10 digits: a longer number is no exit code (and ``int()`` refuses huge ones).
_RETURNCODE = re.compile(r"<returncode>\s*(-?\d{1,10})\s*</returncode>")
#: The tags a command's output stands between, opening and closing: the whole of it, or the head
#: and the tail of a long one.
_OUTPUT_TAGS: Final = tuple(
    (f"<{name}>", f"</{name}>") for name in ("output", "output_head", "output_tail")
)
_ELIDED = re.compile(r"<elided_chars>\s*(\d+)\s*characters elided\s*</elided_chars>")


def _outputs(message: str) -> list[str]:
    """What stands between each output tag of ``message`` and the first closing tag of its name
    after it (a line break right after the opening tag left out), from the start on and each
    after the one before. With ``find``: a regular expression tries a lazy match at every
    "<" of a long output. A closing tag that is not found after one opening tag is not looked
    for again after a later one."""
    parts: list[str] = []
    missing: set[str] = set()
    start = 0
    while (at := message.find("<output", start)) >= 0:
        start = at + 1
        for opening, closing in _OUTPUT_TAGS:
            if message.startswith(opening, at):
                body = at + len(opening)
                if message.startswith("\n", body):
                    body += 1
                end = -1 if closing in missing else message.find(closing, body)
                if end < 0:
                    missing.add(closing)
                else:
                    parts.append(message[body:end])
                    start = end + len(closing)
                break
    return parts


def _command_output(message: str) -> str:
    """What the command printed, from mini-swe-agent's ``<returncode>``/``<output>`` message
    (the head and tail of a long output, with the warning around them left out)."""
    parts = _outputs(message)
    if not parts:
        return message
    elided = _ELIDED.search(message)
    middle = f"\n[{elided.group(1)} characters elided]\n" if elided else "\n"
    return middle.join(part.rstrip("\n") for part in parts)


def _read_mini(
    path: Path, corpus: str, labels: _Labels, model: str | None, known: KnownModel
) -> Iterator[Result]:
    data = _load_json(path)
    if not isinstance(data, dict) or not isinstance(data.get("messages"), list):
        raise _Malformed("top level", 'expected an object with a "messages" list')
    info = _obj(data.get("info"))
    config = _obj(info.get("config"))
    model_config = _obj(config.get("model"))
    instance = str(data.get("instance_id") or path.name.removesuffix(".traj.json"))
    folder = path.parent
    messages = data["messages"]
    # A leading "@" is a routing mark of the provider's ("@google/..."), not the model's name.
    name = model or str(model_config.get("model_name") or "").lstrip("@")
    exit_status = info.get("exit_status")
    exit_status = str(exit_status) if exit_status is not None else None
    run_id = instance if folder.name == corpus else f"{folder.name}/{instance}"
    usage_seen = False
    prompt = ""
    for message in messages:
        if isinstance(message, dict) and message.get("role") == "user":
            prompt = _text(message.get("content"))
            break
    events: list[Event] = [RunStarted(prompt=prompt, run_id=run_id)]
    for index, message in enumerate(messages):
        if not isinstance(message, dict) or "role" not in message:
            raise _Malformed(f"messages[{index}]", 'expected an object with a "role"')
        if message["role"] != "assistant":
            # The task, command outputs (read with the call before them) and format errors.
            continue
        content = _text(message.get("content"))
        extra = _obj(message.get("extra"))
        response = _obj(extra.get("response"))
        usage = _obj(response.get("usage"))
        details = usage.get("prompt_tokens_details") or {}
        cost = _money(usage.get("cost"))
        if usage:
            usage_seen = True
        # The configured name; the provider's echo of it may carry routing marks ("@google/").
        turn_model = name or str(response.get("model") or "").lstrip("@")
        name = name or turn_model
        blocks, _ = _shell_blocks(content, _MINI_FENCES)
        reply = messages[index + 1] if index + 1 < len(messages) else None
        reply_text = _text(reply.get("content")) if isinstance(reply, dict) else ""
        calls: list[tuple[ToolCall, ToolResult | None]] = []
        if len(blocks) == 1:
            call = ToolCall("bash", {"command": blocks[0]}, call_id=str(index))
            result: ToolResult | None = None
            if reply is not None and isinstance(reply, dict) and reply.get("role") == "user":
                code = _RETURNCODE.search(reply_text)
                timed_out = code is None and "timed out" in reply_text[:400].lower()
                result = ToolResult(
                    "bash",
                    content=_command_output(reply_text) if code else reply_text,
                    call_id=str(index),
                    exit_code=int(code.group(1)) if code else None,
                    is_error=timed_out,
                )
            calls.append((call, result))
        # With no bash block, or several, the harness answers with a format error: no tool ran.
        _turn(
            events,
            model=turn_model if usage else "",
            input_tokens=_int(usage.get("prompt_tokens")),
            output_tokens=_int(usage.get("completion_tokens")),
            cache_read=_int(details.get("cached_tokens")) if isinstance(details, dict) else 0,
            cost=cost,
            text=content,
            calls=calls,
        )
    submission = info.get("submission")
    events.append(RunEnded(output=submission if isinstance(submission, str) else None))
    meta = RunMeta(
        run_id=run_id,
        corpus=corpus,
        model=name,
        source=str(path),
        format="mini-swe-agent",
        resolved=labels.resolved(folder, instance),
        exit_status=exit_status,
        ended_on_limit=ended_on_limit(exit_status),
        usage=USAGE_PER_STEP if usage_seen else USAGE_NONE,
        recorded_cost=_money((info.get("model_stats") or {}).get("instance_cost")),
    )
    yield Run(meta, events)


# --------------------------------------------------------------------------------------------
# Tool calls written into the model's text (prompt-based function calling)
#
# The text is the model's: any shape may come, so these parsers never raise, and every search
# starts past the last one or reuses an earlier answer, which keeps them linear in the text.

#: Fenced blocks whose body is one shell command, as mini-swe-agent style agents write them.
_SHELL_FENCES = frozenset({"bash", "sh"})
#: The longest function or parameter name taken from a tag, and the longest fence info string.
_MAX_NAME = 128
_MAX_FENCE_INFO = 16
#: For ``_find``: nothing searched yet.
_UNSEARCHED = -2


def _find(text: str, needle: str, start: int, end: int, known: int) -> int:
    """``text.find(needle, start, end)``, given ``known``: its answer for an earlier start.

    An answer at or after ``start`` still holds, and so does "not found" (-1); only an answer
    before ``start`` is searched again, from ``start``.
    """
    if known == -1 or known >= start:
        return known
    return text.find(needle, start, end)


def _tag_name(text: str, start: int, end: int) -> tuple[str, int] | None:
    """The NAME of a ``<function=NAME>`` or ``<parameter=NAME>`` tag whose name begins at
    ``start``, and where the tag ends; None when no well-formed name is there."""
    close = text.find(">", start, min(end, start + _MAX_NAME + 1))
    if close < 0:
        return None
    name = text[start:close]
    if name.split() != [name] or "<" in name:
        return None
    return name, close + 1


def _tagged(text: str, tag: str, start: int, end: int) -> tuple[list[tuple[str, int, int]], int]:
    """Each ``<TAG=NAME>BODY</TAG>`` in ``text[start:end]`` as (NAME, where BODY starts, where it
    ends), and how many opening tags could not be read. A body the model did not close ends
    where the next opening tag begins, or at ``end``: harnesses stop the model's output at the
    closing tag, so it is often missing."""
    opener, closer = f"<{tag}=", f"</{tag}>"
    found: list[tuple[str, int, int]] = []
    unreadable = 0
    close = opening = _UNSEARCHED
    position = start
    while True:
        begin = text.find(opener, position, end)
        if begin < 0:
            return found, unreadable
        named = _tag_name(text, begin + len(opener), end)
        if named is None:
            unreadable += 1
            position = begin + len(opener)
            continue
        name, body_start = named
        close = _find(text, closer, body_start, end, close)
        opening = _find(text, opener, body_start, end, opening)
        body_end = min(at for at in (close, opening, end) if at >= 0)
        found.append((name, body_start, body_end))
        position = body_end + len(closer) if body_end == close else body_end


def _function_blocks(text: str) -> tuple[list[tuple[str, dict[str, str]]], int]:
    """The ``<function=NAME><parameter=KEY>VALUE</parameter></function>`` calls in ``text``,
    and how many tags could not be read (a value not closed runs to the next tag)."""
    blocks, unreadable = _tagged(text, "function", 0, len(text))
    calls: list[tuple[str, dict[str, str]]] = []
    for name, body_start, body_end in blocks:
        parameters, bad = _tagged(text, "parameter", body_start, body_end)
        unreadable += bad
        arguments = {key: text[begin:stop].strip("\n") for key, begin, stop in parameters}
        calls.append((name, arguments))
    return calls, unreadable


def _shell_blocks(text: str, fences: frozenset[str]) -> tuple[list[str], int]:
    """The commands of the fenced blocks in ``text`` whose info string is one of ``fences``,
    and how many of them are not closed."""
    commands: list[str] = []
    newline = close = _UNSEARCHED
    position = 0
    end = len(text)
    while True:
        start = text.find("```", position)
        if start < 0:
            return commands, 0
        newline = _find(text, "\n", start + 3, end, newline)
        info_end = end if newline < 0 else newline
        info = text[start + 3 : info_end] if info_end - start <= 3 + _MAX_FENCE_INFO else ""
        if newline < 0:
            # A fence on the last line: a shell block the model began and did not write.
            return commands, int(info.strip() in fences)
        if info.strip() not in fences:
            position = start + 3
            continue
        close = _find(text, "\n```", newline + 1, end, close)
        if close < 0:
            return commands, 1
        commands.append(text[newline + 1 : close])
        position = close + 4


def _text_calls(text: str) -> tuple[list[tuple[str, Mapping[str, Any]]], int]:
    """The tool calls an assistant message writes into its text, and how many written blocks
    could not be read.

    ``<function=NAME>`` blocks are calls, every one of them. Without them, a message holding
    exactly one fenced ``bash``/``sh`` block calls ``bash`` with its body; several blocks are
    no call, as mini-swe-agent style harnesses refuse such a message as a format error.
    """
    functions, unreadable = _function_blocks(text)
    if functions:
        return list(functions), unreadable
    commands, unclosed = _shell_blocks(text, _SHELL_FENCES)
    if len(commands) == 1:
        return [("bash", {"command": commands[0]})], unreadable + unclosed
    return [], unreadable + unclosed


# --------------------------------------------------------------------------------------------
# OpenAI chat-completions messages (and tau-bench, whose runs hold them)


def _arguments(raw: Any) -> Mapping[str, Any] | str:
    if isinstance(raw, Mapping):
        return raw
    return raw if isinstance(raw, str) else json.dumps(raw)


@dataclass(slots=True)
class _Unreadable:
    """Calls written in a file's text that could not be read: how many, and the first one's
    position."""

    count: int = 0
    first: str = ""

    def add(self, count: int, position: str) -> None:
        if count and not self.count:
            self.first = position
        self.count += count

    def warning(self, path: Path) -> ReadWarning | None:
        if not self.count:
            return None
        return ReadWarning(
            str(path),
            self.first,
            f"{self.count} tool call(s) written in the text could not be read (a <function= or "
            "<parameter= tag with no name, or a ```bash block with no closing fence); "
            "those turns are read as turns with no call",
        )


def _has_recorded_calls(messages: list[Any]) -> bool:
    """Whether some assistant message records its calls in the file's structure."""
    return any(
        isinstance(message, dict)
        and message.get("role") == "assistant"
        and (
            bool(_list(message.get("tool_calls")))
            or isinstance(message.get("function_call"), dict)
            or isinstance(message.get("action"), str)
        )
        for message in messages
    )


def _recorded_calls(message: dict[str, Any], index: int, where: str) -> list[ToolCall]:
    """The calls an assistant message records: ``tool_calls``, else the legacy
    ``function_call``, else SWE-agent's ``action`` (never more than one of them: a message that
    carries two echoes one call)."""
    calls = []
    for position, raw in enumerate(_list(message.get("tool_calls"))):
        if not isinstance(raw, dict):
            raise _Malformed(f"{where}[{index}].tool_calls[{position}]", "expected an object")
        function = _obj(raw.get("function")) or raw
        call_id = str(raw.get("id") or f"{index}.{position}")
        name = str(function.get("name") or "")
        calls.append(ToolCall(name, _arguments(function.get("arguments", "")), call_id=call_id))
    legacy = message.get("function_call")
    if not calls and isinstance(legacy, dict):
        name = str(legacy.get("name") or "")
        calls.append(ToolCall(name, _arguments(legacy.get("arguments", "")), call_id=str(index)))
    action = message.get("action")
    if not calls and isinstance(action, str) and not _EXIT_ACTIONS.match(action.strip()):
        calls.append(ToolCall(_command_name(action), {"command": action}, call_id=str(index)))
    return calls


def _replies_to(calls: list[ToolCall], replies: list[dict[str, Any]]) -> list[ToolResult | None]:
    """Each call's result among the ``tool`` (or legacy ``function``) messages after it: the
    reply with the call's id, else the next reply that names no id."""
    by_id: dict[str, dict[str, Any]] = {}
    loose: list[dict[str, Any]] = []
    for reply in replies:
        call_id = str(reply.get("tool_call_id") or "")
        if call_id:
            by_id.setdefault(call_id, reply)
        else:
            loose.append(reply)
    loose.reverse()
    results: list[ToolResult | None] = []
    for call in calls:
        answer = by_id.pop(call.call_id, None)
        if answer is None and loose:
            answer = loose.pop()
        if answer is None:
            results.append(None)
            continue
        results.append(
            ToolResult(
                str(answer.get("name") or call.name),
                _text(answer.get("content")),
                call.call_id,
                is_error=bool(answer.get("is_error")),
            )
        )
    return results


def _reply_in_text(call: ToolCall, reply: str) -> ToolResult:
    """A call's result from the user message that answered it (mini-swe-agent's
    ``<returncode>``/``<output>`` read when it is there)."""
    code = _RETURNCODE.search(reply)
    if code is None:
        return ToolResult(call.name, reply, call.call_id)
    return ToolResult(call.name, _command_output(reply), call.call_id, exit_code=int(code[1]))


def _chat_events(
    messages: list[Any],
    run_id: str,
    model: str,
    where: str,
    written: _Unreadable | None,
) -> tuple[list[Event], bool, str | None, str]:
    """Events from OpenAI-style messages; whether usage was seen, the last tool, the model.

    Calls are read where the messages record them (``tool_calls``, ``function_call``,
    ``action``), with their results in the ``tool`` or ``function`` messages after them, or, for
    an ``action``, in the next user message. Only when no message records a call, and
    ``written`` is given, are calls looked for in the assistant's text (``<function=NAME>``
    blocks, or one fenced shell block), the next user message being the result; unreadable
    blocks are counted in ``written``.
    """
    events: list[Event] = []
    recorded = _has_recorded_calls(messages)
    prompt_given = False
    usage_seen = False
    last_tool: str | None = None
    index = 0
    count = len(messages)
    while index < count:
        message = messages[index]
        if not isinstance(message, dict) or "role" not in message:
            raise _Malformed(f"{where}[{index}]", 'expected a message object with a "role"')
        role = message["role"]
        if role in ("system", "developer"):
            index += 1
            continue
        if role == "user":
            text = _text(message.get("content"))
            if not prompt_given:
                events.append(RunStarted(prompt=text, run_id=run_id))
                prompt_given = True
            else:
                events.append(Injected(text=text))
            index += 1
            continue
        if role != "assistant":
            # A tool result with no call before it: no call to give it to.
            index += 1
            continue
        if not prompt_given:
            events.append(RunStarted(prompt="", run_id=run_id))
            prompt_given = True
        usage = _obj(message.get("usage"))
        if usage:
            usage_seen = True
        turn_model = str(message.get("model") or model)
        model = model or turn_model
        content = _text(message.get("content"))
        if recorded:
            calls = _recorded_calls(message, index, where)
            # Only an action is answered in a user message; tool calls get tool messages.
            answered_in_text = not message.get("tool_calls") and not message.get("function_call")
        elif written is not None:
            found, unreadable = _text_calls(content)
            written.add(unreadable, f"{where}[{index}]")
            calls = [
                ToolCall(name, arguments, call_id=f"{index}.{position}")
                for position, (name, arguments) in enumerate(found)
            ]
            answered_in_text = True
        else:
            calls = []
            answered_in_text = False
        following = index + 1
        replies: list[dict[str, Any]] = []
        while following < count:
            reply = messages[following]
            if not isinstance(reply, dict) or reply.get("role") not in ("tool", "function"):
                break
            replies.append(reply)
            following += 1
        results = _replies_to(calls, replies)
        if calls and not replies and answered_in_text and following < count:
            reply = messages[following]
            if isinstance(reply, dict) and reply.get("role") == "user":
                # One reply for the message: several calls in it share it, given to the last.
                results[-1] = _reply_in_text(calls[-1], _text(reply.get("content")))
                following += 1
        if calls:
            last_tool = calls[-1].name
        details = usage.get("prompt_tokens_details") or {}
        _turn(
            events,
            model=turn_model if usage else "",
            input_tokens=_int(usage.get("prompt_tokens", usage.get("input_tokens"))),
            output_tokens=_int(usage.get("completion_tokens", usage.get("output_tokens"))),
            cache_read=_int(details.get("cached_tokens")) if isinstance(details, dict) else 0,
            cost=_money(usage.get("cost")),
            text=content or None,
            calls=list(zip(calls, results, strict=True)),
        )
        index = following
    if not prompt_given:
        events.append(RunStarted(prompt="", run_id=run_id))
    return events, usage_seen, last_tool, model


#: What ``str.lstrip`` strips: the white space before an item of a JSON list, or after it.
_BLANKS = re.compile(r"\s*")
#: How much of a JSON list is read ahead (characters), and read on when an item goes past it.
_READ_AHEAD = 1 << 20
_READ_ON = 1 << 22


def _after_blanks(text: str, at: int) -> int:
    """Where the white space that ``text`` holds from ``at`` on ends."""
    match = _BLANKS.match(text, at)
    assert match is not None  # \s* matches everywhere
    return match.end()


def _iter_json_list(path: Path) -> Iterator[tuple[int, Any]]:
    """The items of a JSON list in ``path``, decoded one at a time where they stand in a buffer
    of the next megabytes of the file: the text read is dropped from its front only when more
    is read, so that each character is copied a bounded number of times however long the file.

    The list is read as strictly as ``json.loads`` reads it: a ``,`` between items and none
    after the last, and nothing but white space after the closing ``]``. Items read before a
    fault are yielded; the fault is ``_Malformed`` at its item and character.
    """
    decoder = json.JSONDecoder()
    # "utf-8-sig": past a byte order mark, which some editors write first.
    with path.open(encoding="utf-8-sig") as stream:
        buffer = ""
        at = 0  # where the buffer's text not yet decoded starts
        offset = 0  # characters dropped from the front of the buffer
        started = False
        item = 0
        # What may come next: an item, or "]" before the first; "," or "]" after an item.
        after_item = False
        eof = False

        def read(size: int) -> None:
            """Read on (``size`` characters at most), dropping what was decoded."""
            nonlocal buffer, at, offset, eof
            chunk = stream.read(size)
            eof = not chunk
            offset += at
            buffer = buffer[at:] + chunk
            at = 0

        def where() -> str:
            return f"item {item} (character {offset + at})"

        while True:
            if not eof and len(buffer) - at < _READ_AHEAD:
                read(_READ_AHEAD)
            at = _after_blanks(buffer, at)
            if at == len(buffer):
                if not eof:
                    continue
                if not started:
                    raise _Malformed("start", "expected a JSON list")
                raise _Malformed(f"item {item}", "the list is not closed")
            if not started:
                if buffer[at] != "[":
                    raise _Malformed("start", "expected a JSON list")
                at += 1
                started = True
                continue
            if buffer[at] == "]" and (after_item or item == 0):
                at += 1
                break
            if after_item:
                if buffer[at] != ",":
                    raise _Malformed(where(), "bad JSON: expected ',' or ']' after an item")
                at += 1
                after_item = False
                continue
            try:
                value, end = decoder.raw_decode(buffer, at)
            except json.JSONDecodeError as error:
                if not eof:
                    read(_READ_ON)  # then decoded again from its start
                    continue
                raise _Malformed(
                    f"item {item} (character {offset + error.pos})", f"bad JSON: {error.msg}"
                ) from None
            except (RecursionError, ValueError) as error:
                raise _Malformed(where(), _beyond_json(error)) from None
            # A number cut where the text read ends ("12", "0.", "1e-") may go on in what is not
            # read yet: read on, and decode it again from its start.
            if not eof and (len(buffer) - end <= 2 or _after_blanks(buffer, end) == len(buffer)):
                read(_READ_ON)
                continue
            yield item, value
            item += 1
            at = end
            after_item = True
        # After the closing "]": white space to the end, read on as far as it goes.
        while True:
            at = _after_blanks(buffer, at)
            if at < len(buffer):
                raise _Malformed(
                    f"character {offset + at}", "bad JSON: text after the list's closing ']'"
                )
            if eof:
                return
            read(_READ_AHEAD)


def _read_tau(
    path: Path, corpus: str, labels: _Labels, model: str | None, known: KnownModel
) -> Iterator[Result]:
    name = model or _model_from_name(path.name.removesuffix(".json"), known) or ""
    for item, run in _iter_json_list(path):
        where = f"item {item}"
        if not isinstance(run, dict) or not isinstance(run.get("traj"), list):
            yield ReadError(str(path), where, 'expected an object with a "traj" list')
            continue
        run_id = f"task{run.get('task_id', item)}-trial{run.get('trial', 0)}"
        try:
            # tau-bench's agent calls its tools natively: its text is not searched for calls.
            events, usage_seen, last_tool, found = _chat_events(
                run["traj"], run_id, name, f"{where}.traj", written=None
            )
        except _Malformed as error:
            yield ReadError(str(path), error.position, error.message)
            continue
        traj = run["traj"]
        last = traj[-1] if traj else {}
        if isinstance(last, dict) and "###STOP###" in _text(last.get("content")):
            exit_status = "user_stop"
        elif isinstance(last, dict) and last.get("role") == "tool":
            exit_status = f"tool:{last_tool}"
        else:
            exit_status = "unfinished"
        events.append(RunEnded())
        reward = run.get("reward")
        resolved = None if not isinstance(reward, int | float) else reward >= 1
        meta = RunMeta(
            run_id=run_id,
            corpus=corpus,
            model=found,
            source=str(path),
            format="tau-bench",
            resolved=resolved,
            exit_status=exit_status,
            ended_on_limit=False,
            usage=USAGE_PER_STEP if usage_seen else USAGE_NONE,
        )
        yield Run(meta, events)


def _label(container: Mapping[str, Any]) -> bool | None:
    for key in ("resolved", "success", "solved"):
        if isinstance(container.get(key), bool):
            return bool(container[key])
    reward = container.get("reward")
    if isinstance(reward, int | float) and not isinstance(reward, bool):
        return reward >= 1
    return None


#: Where a transcript keeps its conversation. A file may hold two copies (the messages the model
#: saw, and a history with the calls recorded): one is read, never both.
_CONVERSATIONS = ("messages", "traj", "history", "trajectory")


def _conversation(container: Mapping[str, Any]) -> tuple[str, list[Any]] | None:
    """The copy of the conversation to read, and its key: the first copy whose messages record
    their calls, else the first copy there is."""
    copies = [
        (key, value)
        for key in _CONVERSATIONS
        if isinstance(value := container.get(key), list)
        and (not value or (isinstance(value[0], dict) and "role" in value[0]))
    ]
    for key, messages in copies:
        if _has_recorded_calls(messages):
            return key, messages
    return copies[0] if copies else None


def _first_character(path: Path) -> str:
    with path.open(encoding="utf-8-sig") as stream:
        while (character := stream.read(1)).isspace():
            pass
    return character


def _read_openai(
    path: Path, corpus: str, labels: _Labels, model: str | None, known: KnownModel
) -> Iterator[Result | ReadWarning]:
    stem = path.name.removesuffix(".json")
    default_model = model or _model_from_name(stem, known) or ""
    unreadable = _Unreadable()
    single = _first_character(path) == "{"
    items = iter([(0, _load_json(path))]) if single else _iter_json_list(path)
    for item, value in items:
        if item == 0 and not single and isinstance(value, dict) and "role" in value:
            # A bare list of messages: the whole file is one run.
            messages = [value, *(message for _, message in items)]
            container = {"messages": messages}
            yield _one_transcript(path, corpus, stem, container, default_model, "", unreadable)
            break
        where = "" if single else f"item {item}"
        if not isinstance(value, dict) or _conversation(value) is None:
            yield ReadError(
                str(path),
                where or "top level",
                'expected a list of messages under "messages" (or "traj", "history", "trajectory")',
            )
            continue
        fallback = stem if single else f"{stem}-{item}"
        run_name = str(value.get("id") or value.get("run_id") or fallback)
        yield _one_transcript(path, corpus, run_name, value, default_model, where, unreadable)
    warning = unreadable.warning(path)
    if warning is not None:
        yield warning


def _one_transcript(
    path: Path,
    corpus: str,
    run_id: str,
    container: Mapping[str, Any],
    model: str,
    where: str,
    unreadable: _Unreadable,
) -> Result:
    found_copy = _conversation(container)
    assert found_copy is not None
    key, messages = found_copy
    name = str(container.get("model") or model)
    try:
        events, usage_seen, _, found = _chat_events(
            messages, run_id, name, f"{where}.{key}" if where else key, written=unreadable
        )
    except _Malformed as error:
        return ReadError(str(path), error.position, error.message)
    events.append(RunEnded())
    exit_status = container.get("exit_status")
    meta = RunMeta(
        run_id=run_id,
        corpus=corpus,
        model=found,
        source=str(path),
        format="openai",
        resolved=_label(container),
        exit_status=str(exit_status) if exit_status is not None else None,
        ended_on_limit=ended_on_limit(str(exit_status) if exit_status else None),
        usage=USAGE_PER_STEP if usage_seen else USAGE_NONE,
    )
    return Run(meta, events)


# --------------------------------------------------------------------------------------------
# haltwise's own JSONL event log


def _read_haltwise(
    path: Path, corpus: str, labels: _Labels, model: str | None, known: KnownModel
) -> Iterator[Result]:
    current: Run | None = None
    usage_seen = False
    count = 0

    def finish(run: Run) -> Run:
        run.meta.usage = USAGE_PER_STEP if usage_seen else USAGE_NONE
        return run

    for line in read_event_log(path):
        event = line.event
        if isinstance(event, RunStarted):
            if current is not None:
                yield finish(current)
            count += 1
            usage_seen = False
            run_id = event.run_id or f"{path.name.removesuffix('.jsonl')}-{count}"
            current = Run(
                RunMeta(
                    run_id=run_id,
                    corpus=corpus,
                    model=model or "",
                    source=str(path),
                    format="haltwise",
                ),
                [event],
            )
            continue
        if current is None:
            if line.label is None and line.decision is None:
                raise _Malformed(f"line {line.line}", "an event before the first RunStarted")
            continue
        if line.label is not None:
            label = line.label
            meta = current.meta
            if isinstance(label.get("resolved"), bool):
                meta.resolved = label["resolved"]
            if label.get("model") and not model:
                meta.model = str(label["model"])
            if label.get("exit_status") is not None:
                meta.exit_status = str(label["exit_status"])
                meta.ended_on_limit = bool(
                    label.get("ended_on_limit", ended_on_limit(meta.exit_status))
                )
            continue
        if event is None:
            if line.decision is not None and line.decision.get("type") == "Stop":
                outcome = line.decision.get("outcome") or {}
                meta = current.meta
                if meta.exit_status is None and isinstance(outcome, dict):
                    meta.exit_status = str(outcome.get("reason"))
                    meta.ended_on_limit = outcome.get("reason") not in (None, "completed")
            continue
        if isinstance(event, ModelResponse):
            if event.input_tokens or event.output_tokens or event.cost is not None:
                usage_seen = True
            if event.model and not current.meta.model:
                current.meta.model = event.model
        current.events.append(event)
    if current is not None:
        yield finish(current)


_READERS: dict[str, Callable[..., Iterator[Result | ReadWarning]]] = {
    "swe-agent": _read_swe_agent,
    "mini-swe-agent": _read_mini,
    "tau-bench": _read_tau,
    "openai": _read_openai,
    "haltwise": _read_haltwise,
}
