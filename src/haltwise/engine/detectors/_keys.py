"""What a stuck detector compares: canonical action keys and normalized result fingerprints.

Two calls are *the same action* when the tool's name and its arguments, as canonical JSON, are
equal once volatile fields are dropped (request ids, timestamps, nonces; uuids and timestamps
inside string values are masked) and free-text thoughts are left out. Two results are *the same*
when their normalized text is: ANSI codes, pids, ports, hex ids and addresses, uuids and hashes,
timestamps, timings and rates, temp paths, progress bars and rules drawn to fit the text, and the
line numbers a shell prints with its errors are masked; every other number (a count of failures, a
size, a line number, a version), the exit code and the error class are kept. A result too long to
normalize in full keeps its head and tail; its fingerprint (``result_fingerprint``) adds a
digest of the whole output, so that two long outputs that differ only in their middle get two.

A result also yields a bounded set of line hashes (exact, and with digits masked) from which a
detector judges whether it carried *new information* (see ``_base.Recent``).

Everything here is a pure function of one event. Several detectors look at the same event, so
the analysis of the last event is memoized (by identity) and computed once; and a loop gets the
same output back, so the analyses of the last few outputs are kept by what they were made from.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
import reprlib
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

import orjson

from . import _scan

if TYPE_CHECKING:
    from .. import _pure as cython
else:
    try:
        import cython

        if not cython.compiled:
            raise ImportError  # Cython's own stand-ins: haltwise's are the same everywhere
    except ImportError:
        from .. import _pure as cython

__all__ = [
    "DEFAULT_IGNORED_FIELDS",
    "ActionInfo",
    "ResultInfo",
    "action_key",
    "analyze_call",
    "analyze_result",
    "canonical_arguments",
    "error_class",
    "normalize_output",
    "result_fingerprint",
]

#: Argument names dropped from action keys: per-call ids, clocks, and the model's own thoughts.
DEFAULT_IGNORED_FIELDS: Final = frozenset(
    {
        "request_id",
        "requestid",
        "call_id",
        "tool_call_id",
        "trace_id",
        "span_id",
        "nonce",
        "idempotency_key",
        "timestamp",
        "ts",
        "created_at",
        "updated_at",
        "thought",
        "thoughts",
        "reasoning",
        "rationale",
        "explanation",
    }
)

#: How much of an output is normalized: its head and its tail (a digest covers the whole).
HEAD_CHARS: Final = 8_192
TAIL_CHARS: Final = 4_096
#: How many distinct lines of a result are compared (head and tail halves), and how much of each.
MAX_LINES: Final = 96
MAX_LINE_CHARS: Final = 240
#: How many distinct lines of a result are remembered as seen (head and tail halves): more than
#: are compared, so that a window shifted over lines already read (a file viewer's 100 lines
#: shown again from another line) finds each of its lines among those remembered, whichever of
#: them were compared when they were first shown.
MAX_SEEN_LINES: Final = 256
#: How much of an action or result is quoted in a message.
PREVIEW_CHARS: Final = 80

_SORT = orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS
#: ``orjson.dumps`` and what it makes of a value it cannot write (``repr``), held here: compiled,
#: a global of this module is read from a cache, an attribute of another looked up each time.
_dumps: Final = orjson.dumps
_written_as: Final = repr

# --------------------------------------------------------------------------------------------
# Masks, applied in this order. Each names what it hides, so a message can still be read.

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
# One pass over the text for every mask (a regex per mask costs a scan each), with no named
# groups, no nested quantifier (so no backtracking blow-up: the scan is linear), and a character
# class or literal first in every branch; ``_mask`` tells the kinds apart from the text matched.
# Every number that no branch claims is kept: counts of failures, sizes, line numbers and
# versions are news. A branch is written as the characters it starts with (a character class)
# and the rest of it, so that for ASCII text (nearly all of it) the branches are dispatched on
# their first character: the scan skips every character that starts none, and tries at each
# other one only the branches that start with it. A run of digits is matched possessively
# (``\d*+``): what follows it is never a digit, so giving some back could not find a match.
# Compiled, haltwise finds the spans of ASCII text with a scan written by hand (``_scan.py``),
# three to four times quicker; these patterns remain its definition, and what the pure build
# uses.
_CORE: Final = (
    ("0-9a-fA-F", r"[0-9a-fA-F]{7}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"),
    (r"\d", r"\d{3}-\d\d-\d\d(?:[T ]\d\d:\d\d(?::\d\d(?:[.,]\d+)?)?(?:Z|[+-]\d\d:?\d\d)?)?"),
    (r"\d", r"\d?:\d\d:\d\d(?:[.,]\d+)?"),
    ("0", r"x[0-9a-fA-F]+"),
    (
        r"\d",
        r"\d*+(?:\.\d++)?[ \t]?(?:ms|µs|us|ns|s|sec|secs|seconds?|mins?|minutes?|h|hrs?|hours?)\b",
    ),
    ("0-9a-f", r"[0-9a-f]{6,}\b"),
)
#: (what the text must contain for the branches to be tried, the branches)
_EXTRAS: Final = (
    (
        ("pid", "PID", "Pid", "rocess", "hread", "ort", "ORT"),
        (
            ("p", r"(?:id|rocess|ort)[ =:#]+\d+"),
            ("P", r"(?:ID|id|rocess|ort|ORT)[ =:#]+\d+"),
            ("tT", r"hread[ =:#]+\d+"),
        ),
    ),
    (
        ("localhost", "127.0.0.1", "0.0.0.0", "[::"),
        (
            ("l", r"ocalhost:\d+"),
            ("1", r"27\.0\.0\.1:\d+"),
            ("0", r"\.0\.0\.0:\d+"),
            (r"\[", r"::1?\]:\d+"),
        ),
    ),
    (("sh: line",), (("s", r"h: line \d+:"),)),
    (("<",), ((r"\d", r"\d*+:\d\d<\d++:\d\d"),)),
    (("/s",), ((r"\d", r"\d*+(?:\.\d++)?[ \t]?(?:it|[kKMG]?i?B)/s\b"),)),
    (tuple(f"{digit}m" for digit in range(10)), ((r"\d", r"\d*+m\d++(?:\.\d++)?s\b"),)),
    (
        ("/tmp/", "/var/"),
        (
            (
                "/",
                r"tmp/[^\s'\"`:,)\]]+|var/(?:tmp|folders)/[^\s'\"`:,)\]]+|private/var/folders/\S+",
            ),
        ),
    ),
    (("tmp",), (("t", r"mp[a-z0-9_]{6,}"),)),
    (("===", "---", "___", "~~~", "***", "###"), ((r"=_~*#\-", r"[=_~*#-]{2,}"),)),
)
#: The glyphs of rules and progress bars: a run of them is drawn to fit the text around it
#: (``==== 3 failed in 0.52s ====`` is wider than ``==== 3 failed in 1.2s ====``).
_RULE_GLYPHS: Final = frozenset("=_~*#━─═█▉▊▋▌▍▎▏░▒▓-")
#: The same, for text that is not ASCII (box drawing and block elements).
_WIDE_RULES: Final = ("━─═█▉▊▋▌▍▎▏░▒▓", "[━─═█▉▊▋▌▍▎▏░▒▓]{2,}")


#: How many lines' masked forms a ``Masker`` remembers: outputs that come back (a test run
#: again, a file viewed again, a log polled) repeat most of their lines.
SEEN_LINES: Final = 4_096
#: From how many lines masked in one text their masked forms are looked up and remembered
#: (below it, looking lines up costs more than it saves).
REMEMBERED_FROM: Final = 8


class Masker:
    """A volatile-span pattern and the lines it has masked, by what they were (at most
    ``SEEN_LINES``). Compiled, a scan masks the lines of ASCII text (``_scan.masked_lines``)
    and remembers none: it reads a line faster than a dict would hash it."""

    __slots__ = ("pattern", "seen")

    def __init__(self, pattern: re.Pattern[str]) -> None:
        self.pattern = pattern
        self.seen: dict[str, str] = {}

    def sub(self, text: str) -> str:
        """``text`` with each volatile span the pattern finds masked."""
        return self.pattern.sub(_mask, text)

    def mask(self, lines: list[str], marked: list[int]) -> None:
        """Mask ``lines[index]`` for each index in ``marked``, in place. No mask spans a line
        break, so each line is masked alone: those masked before are not scanned again, and
        the others are scanned in one pass."""
        seen = self.seen
        found = [seen.get(lines[index]) for index in marked]
        unseen = [index for index, line in zip(marked, found, strict=True) if line is None]
        for index, line in zip(marked, found, strict=True):
            if line is not None:
                lines[index] = line
        if not unseen:
            return
        if len(seen) + len(unseen) > SEEN_LINES:
            seen.clear()
        text = "\n".join(lines[index] for index in unseen)
        for index, line in zip(unseen, self.sub(text).split("\n"), strict=True):
            seen[lines[index]] = line
            lines[index] = line


@functools.lru_cache(maxsize=256)
def _volatile(extras: tuple[int, ...], wide: bool) -> Masker:
    branches = [*_CORE, *(branch for index in extras for branch in _EXTRAS[index][1])]
    if wide:
        branches.append(_WIDE_RULES)
    return Masker(re.compile("|".join(f"[{first}](?:{rest})" for first, rest in branches)))


@functools.lru_cache(maxsize=2)
def _dispatched(rules: bool) -> Masker:
    """The pattern for ASCII text (where ``\\d`` is ``[0-9]`` and no wide rule can be): every
    branch, the rules only if ``rules``, as one alternative per character that starts any
    (that character, then the rests of the branches it starts, in their order). With a literal
    first in every alternative, the engine skips at once every character that starts none."""
    extras = _EXTRAS if rules else _EXTRAS[:-1]
    rests: dict[str, list[str]] = {}
    for first, rest in [*_CORE, *(branch for _, group in extras for branch in group)]:
        starts = re.compile(f"[{first}]")
        for character in map(chr, range(128)):
            if starts.fullmatch(character):
                rests.setdefault(character, []).append(rest)
    return Masker(
        re.compile(
            "|".join(
                f"{re.escape(character)}(?:{'|'.join(alternatives)})"
                for character, alternatives in rests.items()
            ),
            re.ASCII,  # the same classes over ASCII text, tested without Unicode tables
        )
    )


_EVERY_BRANCH: Final = _volatile(tuple(range(len(_EXTRAS))), True)


def _pattern(text: str) -> Masker:
    """The volatile-span pattern with the branches ``text`` may need."""
    if text.isascii():
        # Every substring test but the rules' looks for what each match of its branches holds
        # (in ASCII text, where a digit is 0-9): only the rules' decides anything here, since
        # ``=-=-`` is a rule that none of theirs finds.
        return _dispatched(len(text) < _scan.SHORT or _rule_drawn(text))
    if len(text) < _scan.SHORT:
        return _EVERY_BRANCH
    extras = tuple(
        index
        for index, (needles, _) in enumerate(_EXTRAS)
        if any(needle in text for needle in needles)
    )
    return _volatile(extras, True)


def _rule_drawn(text: str) -> bool:
    """Whether a rule is drawn in ``text`` with three glyphs of one (``=_~*#-``): with a text
    under ``_scan.SHORT`` characters, what decides whether ``_pattern``'s pattern for it masks
    the rules, ASCII or not."""
    # A loop, not any() over a generator: compiled, a generator cannot be in a cpdef function.
    for needle in _EXTRAS[-1][0]:  # noqa: SIM110
        if needle in text:
            return True
    return False


_NUMBER = re.compile(r"\d+")
_ASCII_DIGIT = re.compile("[0-9]")


def _mask(match: re.Match[str]) -> str:
    return _masked(match.string, match.start(), match.end())


def _masked(string: str, start: int, end: int) -> str:
    """What the volatile span ``string[start:end]`` is masked with (itself where it is not
    one: part of a word, or a number that is no id)."""
    text = string[start:end]
    first = text[0]
    if first in _RULE_GLYPHS:
        return first * 3
    glued = start > 0 and (string[start - 1].isalnum() or string[start - 1] == "_")
    if first == "/":
        return "<tmp>"
    if text.startswith("sh: line"):
        return "sh: line <n>:"
    if first in "pPtT":
        # pid 42, process=42, thread #42, port 8080; or a temp name, tmpab12cd3x.
        if glued:
            return text  # part of a word: "import 3", "Report 5" say nothing of a process
        return "<tmp>" if text.startswith("tmp") else _NUMBER.sub("<n>", text)
    if ":" in text:
        host = text.rpartition(":")[0]
        if host in _LOCAL_HOSTS:
            return f"{host}:<port>"
    if glued:
        return text
    if len(text) == 36 and text[8] == "-":
        return "<uuid>"
    if text.startswith(("0x", "0X")):
        return "<hex>"
    if ":" in text or (len(text) >= 10 and text[4] == "-"):
        return "<time>"
    if text.endswith("/s"):
        return "<rate>"
    if text[-1].isalpha() and _HEX_LETTERS.isdisjoint(text[:-1].rstrip("msecondhru ")):
        return "<duration>"
    # A bare hex id: at least one digit and one letter (a plain number is not an id).
    if _has_digit(text) and not _LOWER_HEX_LETTERS.isdisjoint(text):
        return "<hex>"
    return text


_HEX_LETTERS: Final = frozenset("abcdefABCDEF")
_LOWER_HEX_LETTERS: Final = frozenset("abcdef")


_LOCAL_HOSTS: Final = frozenset({"localhost", "127.0.0.1", "0.0.0.0", "[::1]", "[::]"})


def _mask_text(text: str) -> str:
    """``text`` with its volatile tokens masked; lines with no digit are left as they are."""
    if "tmp" in text or "/var/folders" in text:
        masker = _pattern(text)
        if text.count("\n") + 1 < REMEMBERED_FROM:
            return masker.sub(text)
        lines = text.split("\n")
        marked = list(range(len(lines)))
    else:
        lines = text.split("\n")
        marked = [index for index, line in enumerate(lines) if _ASCII_DIGIT.search(line)]
        if not marked:
            return text
        chosen = text if len(marked) == len(lines) else "\n".join(lines[i] for i in marked)
        masker = _pattern(chosen)
        if len(marked) < REMEMBERED_FROM:
            masked = masker.sub(chosen)
            if chosen is text:
                return masked
            for index, line in zip(marked, masked.split("\n"), strict=True):
                lines[index] = line
            return "\n".join(lines)
    masker.mask(lines, marked)
    return "\n".join(lines)


#: Whether the scans are compiled (``_scan.COMPILED``), read once.
_SCANS: bool = cython.declare(cython.bint, _scan.COMPILED)


def _scannable(text: str) -> bool:
    """Whether a compiled scan (``_scan``) reads ``text``: in the compiled build, a str. A scan
    takes a str and not a subclass of one, which a driver may hand over; the regular
    expressions and ``str`` methods read those."""
    return _SCANS and type(text) is str


def _masked_lines(lines: list[str]) -> list[str]:
    """``lines`` masked as ``_mask_text`` masks them joined (``lines`` itself when that changes
    none of them). Compiled, ASCII lines are masked one by one with the scan
    (``_scan.masked_lines``)."""
    if _SCANS:  # the lines are strs the analysis made (not a driver's subclass of str)
        every = _scan.names_temp_path(lines)
        if _scan.all_ascii(lines):
            return _scan.masked_lines(lines, every)
        return _masked_mixed(lines, every)
    text = "\n".join(lines)
    masked = _mask_text(text)
    return lines if masked == text else masked.split("\n")


def _masked_mixed(lines: list[str], every: bool) -> list[str]:
    """``_masked_lines`` of lines not all ASCII, compiled: ``_mask_text``'s lines (every one if
    ``every``, else those with a digit), and its pattern's choice of the rules for them joined
    (``_rule_drawn``); then each ASCII one masked by the scan, the others by the pattern. No
    mask spans a line break, and over ASCII the two find the same spans."""
    marked = (
        list(range(len(lines)))
        if every
        else [index for index, line in enumerate(lines) if _ASCII_DIGIT.search(line)]
    )
    if not marked:
        return lines
    chosen = "\n".join([lines[index] for index in marked])
    rules = len(chosen) < _scan.SHORT or _rule_drawn(chosen)
    masked = list(lines)
    wide: list[int] = []
    changed = False
    for index in marked:
        line = lines[index]
        if line.isascii():
            done = _scan.mask_line(line, rules)
            if done != line:
                masked[index] = done
                changed = True
        else:
            wide.append(index)
    if wide:
        _pattern(chosen).mask(masked, wide)
        for index in wide:
            changed = changed or masked[index] != lines[index]
    return masked if changed else lines


#: In arguments only ids and clocks are volatile: a number there is what the model asked for.
_ARGUMENT_VOLATILE = re.compile(
    r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
    r"|\d{4}-\d\d-\d\d[T ]\d\d:\d\d(?::\d\d(?:[.,]\d+)?)?(?:Z|[+-]\d\d:?\d\d)?"
)


#: A leading line number as file viewers print it (``12:``, ``  12 |``, ``12\t``).
_LINE_NUMBER = re.compile(r"[ \t]*\d+(?::|[ \t]*[|│]|\t)")
_BLANKS: Final = frozenset(" \t")

# --------------------------------------------------------------------------------------------
# Error classes: the kind of failure, which stays the same while its details vary.

#: The exception class a line starts with (``ValueError: ...``, ``pkg.mod.TimeoutError``).
_EXCEPTION = re.compile(rf"(?:[\w.]+\.)?([A-Z]\w*(?:{'|'.join(_scan.KINDS)}))\b(?::|$)")
_NOT_FOUND = re.compile(
    r"\bno (?:matches|match|results?|files?) (?:found|for)\b|\bnot found\b|\bnothing found\b",
    re.IGNORECASE,
)
_ERROR_PHRASES: Final = (
    ("command not found", "command not found"),
    ("no such file or directory", "no such file or directory"),
    ("syntax error", "syntax error"),
    ("permission denied", "permission denied"),
    ("is not recognized as an internal or external command", "command not found"),
    ("traceback (most recent call last)", "traceback"),
    ("fatal:", "fatal"),
)
#: What ``error_class`` looks for in a result, in any case, in one scan (``_scan.Needles``): the
#: words an exception's name ends with (where one is, the name is read), the phrases in their
#: order, and "fo", which each phrase of ``_NOT_FOUND`` holds.
_ERROR_WORDS = _scan.Needles(
    (
        *[kind.lower() for kind in _scan.KINDS],
        *[needle for needle, _ in _ERROR_PHRASES],
        "fo",
    )
)
#: Their bits in ``_ERROR_WORDS.found``'s answer: the kinds', the phrases' (each phrase with its
#: bit and the class it names, in order), and "fo"'s.
_KIND_WORDS: Final = (1 << len(_scan.KINDS)) - 1
_PHRASES: Final = tuple(
    [
        (needle, 1 << (len(_scan.KINDS) + index), name)
        for index, (needle, name) in enumerate(_ERROR_PHRASES)
    ]
)
_PHRASE_WORDS: Final = sum([bit for _, bit, _ in _PHRASES])
_FO: Final = 1 << (len(_scan.KINDS) + len(_ERROR_PHRASES))


def _last_exception_name(text: str) -> str | None:
    """The exception class that the last line of ``text`` to start with one starts with. A name
    is on one line, and a line can start with one only if its first word names one of the
    kinds: each line is matched at its start, from the last, and only if it does. Compiled,
    a scan reads the lines back instead (``_scan.exception_name``)."""
    if _scannable(text):
        return _scan.exception_name(text)
    for line in reversed(text.split("\n")):
        # A name is all word characters and dots from the line's start: before its first space.
        if _names_kind(line) and _names_kind(line.partition(" ")[0]):
            found = _EXCEPTION.match(line)
            if found:
                name: str = found.group(1)
                return name
    return None


def _names_kind(text: str) -> bool:
    """Whether ``text`` holds a word that the name of an exception ends with."""
    for kind in _scan.KINDS:  # noqa: SIM110
        if kind in text:
            return True
    return False


def normalize_output(text: str) -> str:
    """``text`` with volatile details masked: what two runs of the same call have in common."""
    if "\x1b" in text:
        text = _ANSI.sub("", text)
    if "\r" in text:
        # A progress bar redraws its line: keep what was left on screen.
        text = "\n".join(line.rsplit("\r", 1)[-1] for line in text.split("\n"))
    return _mask_text(text).strip()


def error_class(
    content: str, *, is_error: bool = False, exit_code: int | None = None
) -> str | None:
    """The kind of failure a result reports, or None when it reports none.

    A driver's own flags decide first (``is_error``, a non-zero ``exit_code``); without them a
    few unmistakable signs in the text count (a Python traceback, "command not found", "No
    such file or directory", a shell syntax error).
    """
    failed = is_error or (exit_code is not None and exit_code != 0)
    if exit_code is not None and not failed:
        return None
    head = content[:HEAD_CHARS]
    tail = content[-TAIL_CHARS:] if len(content) > HEAD_CHARS else ""
    if _scannable(content):
        # Read apart: no word holds the line break that would join them. A text past Latin-1
        # is lowered and searched by ``found`` itself.
        words = _ERROR_WORDS.found(head) | (_ERROR_WORDS.found(tail) if tail else 0)
    else:
        # Interpreted: lowered, then searched for what is read of the answer below (a kind's
        # word, the first phrase, "fo"), each search a pass of its own, and no more of them.
        lowered = (head + "\n" + tail).lower() if tail else head.lower()
        words = 0
        if (
            "error" in lowered
            or "exception" in lowered
            or "exit" in lowered
            or "interrupt" in lowered
        ):
            words = _KIND_WORDS
        for needle, bit, _ in _PHRASES:
            if needle in lowered:
                words |= bit
                break
        if "fo" in lowered:
            words |= _FO
    found = None
    if words & _KIND_WORDS:
        found = _last_exception_name(tail or head)
    if found is None and words & _PHRASE_WORDS:
        for _, bit, name in _PHRASES:
            if words & bit:
                found = name
                break
    # Every phrase of ``_NOT_FOUND`` holds "found" or "for": a scan only when one may be there.
    if found is None and words & _FO and len(head) <= 400 and head.count("\n") <= 3:
        # A short answer that nothing was found: a search that failed, not news.
        match = _NOT_FOUND.search(head)
        if match:
            found = "not found"
    if found is None and not failed:
        return None
    if exit_code is not None and exit_code != 0:
        return f"{found or 'error'}, exit {exit_code}"
    return found or "error"


# --------------------------------------------------------------------------------------------
# Actions


def _has_digit(text: str) -> bool:
    """Whether a character of ``text`` is a digit (``str.isdigit``: superscripts too); for
    ASCII text, a search in C rather than a loop over the characters."""
    if text.isascii():
        return _ASCII_DIGIT.search(text) is not None
    return any(c.isdigit() for c in text)


def _may_be_volatile(value: str) -> bool:
    """Whether ``value`` is looked through for a uuid or a timestamp: only one with a digit
    early on, and with two dashes at least, as each of them has."""
    return len(value) >= 10 and value.count("-") >= 2 and _has_digit(value[:64])


def _volatile_in(value: str) -> bool:
    """Whether ``value`` holds a uuid or a timestamp, looked for where ``_may_be_volatile``
    says one may be. Compiled, an ASCII value is looked through by a scan
    (``_scan.volatile_argument``)."""
    if _scannable(value) and value.isascii():
        return _scan.volatile_argument(value)
    return _may_be_volatile(value) and _ARGUMENT_VOLATILE.search(value) is not None


def _mask_value(value: str) -> str:
    value = value.strip()
    if _volatile_in(value):
        value = _ARGUMENT_VOLATILE.sub(_mask, value)
    return value


#: How many levels of nested arguments ``_clean`` reads; a container deeper than that is kept
#: as ``_written(value)``. Tool arguments nest a few levels. A model's hostile ones, or a
#: driver's mapping that holds itself, must neither raise (interpreted, ``RecursionError``
#: some 300 levels down) nor recurse without end (compiled, ``_clean`` calls itself in C,
#: where no recursion limit is checked, and the stack overflows).
MAX_DEPTH: Final = 32
_NESTED: Final = (Mapping, list, tuple, set, frozenset)


def _clean(value: Any, ignored: frozenset[str], depth: int = 0) -> Any:
    if isinstance(value, str):
        return _mask_value(value)
    if depth == MAX_DEPTH and isinstance(value, _NESTED):
        return _written(value)
    depth += 1
    if type(value) is dict or isinstance(value, Mapping):
        return {
            key: _clean(item, ignored, depth)
            for key, item in value.items()
            if not (isinstance(key, str) and _scan.lowered(key) in ignored)
        }
    if isinstance(value, list | tuple):
        return [_clean(item, ignored, depth) for item in value]
    if isinstance(value, set | frozenset):
        return sorted((_clean(item, ignored, depth) for item in value), key=repr)
    return value


def _is_flat(arguments: Mapping[Any, Any], ignored: frozenset[str]) -> bool:
    for key, value in arguments.items():
        if not isinstance(key, str) or _scan.lowered(key) in ignored:
            return False
        if isinstance(value, str):
            if value:
                # Compiled, its first and last characters are read as C integers.
                first, last = value[0], value[-1]
                if first.isspace() or last.isspace():
                    return False
            # A command line has dashes and digits, but seldom a uuid or a timestamp.
            if _volatile_in(value):
                return False
        elif value is not None and not isinstance(value, bool | int | float):
            return False
    return True


def canonical_arguments(
    arguments: Mapping[str, Any] | str, ignored: frozenset[str] = DEFAULT_IGNORED_FIELDS
) -> bytes:
    """The arguments as canonical JSON bytes (sorted keys, volatile fields dropped).

    A raw JSON string is parsed first; text that is not JSON (a command line) is kept as one
    whitespace-trimmed string.
    """
    if isinstance(arguments, str):
        stripped = arguments.strip()
        if stripped[:1] in ("{", "["):
            try:
                parsed = orjson.loads(stripped)
            except orjson.JSONDecodeError:
                parsed = None
            if isinstance(parsed, dict | list):
                return canonical_arguments(parsed, ignored)  # type: ignore[arg-type]
        return _json(_mask_value(stripped))
    # A dict is told apart without the ABC's check, which costs more than the rest of the test.
    if (type(arguments) is dict or isinstance(arguments, Mapping)) and _is_flat(arguments, ignored):
        # The fast path: a flat mapping of plain values is already canonical once sorted.
        return _json(arguments, _SORT)
    return _json(_clean(arguments, ignored), _SORT)


def _json(value: Any, option: int = 0) -> bytes:
    """``value`` as JSON, by orjson; by the standard library where orjson refuses it (a str
    with a lone surrogate, an int past 64 bits), so that no argument a model writes makes the
    analysis raise. Either way the same value gives the same bytes."""
    try:
        return _dumps(value, _written_as, option)  # (value, default, option)
    except orjson.JSONEncodeError:
        try:
            text = json.dumps(value, sort_keys=bool(option), separators=(",", ":"), default=repr)
        except (TypeError, ValueError, RecursionError):
            # Keys of kinds that do not sort together; a value that holds itself; or one nested
            # past the recursion limit (orjson gives up at 255 levels, ``json`` at about 1,000).
            text = _written(value).encode("unicode_escape").decode("ascii")
        return text.encode()


#: ``_written``'s bounds, for a value too deep for ``repr``: what it shows of each level.
_BOUNDED = reprlib.Repr()
_BOUNDED.maxlevel = 8
_BOUNDED.maxdict = _BOUNDED.maxlist = _BOUNDED.maxtuple = _BOUNDED.maxset = 32
_BOUNDED.maxfrozenset = _BOUNDED.maxdeque = _BOUNDED.maxarray = 32
_BOUNDED.maxstring = _BOUNDED.maxother = _BOUNDED.maxlong = 256


def _written(value: Any) -> str:
    """``repr(value)``, which shows a container that holds itself as ``{...}``; or, for one
    nested past the recursion limit, its first levels (``_BOUNDED``), so that the same value
    is written the same way and nothing raises."""
    try:
        return repr(value)
    except RecursionError:
        return _BOUNDED.repr(value)


def action_key(
    name: str, arguments: Mapping[str, Any] | str, ignored: frozenset[str] = DEFAULT_IGNORED_FIELDS
) -> str:
    """The canonical form of a tool call: ``name`` and its canonical arguments."""
    return f"{name} {canonical_arguments(arguments, ignored).decode()}"


def result_fingerprint(
    content: str, *, is_error: bool = False, exit_code: int | None = None
) -> str:
    """A short digest of a result's normalized text, its exit code and its error class (and
    of the whole output, when the normalized text leaves some of it out). The detectors do not
    need it: they compare a result's line hashes (``ResultInfo.lines``), so it is made only
    when asked for."""
    lines, _, truncated = _sample(content)
    error = error_class(content, is_error=is_error, exit_code=exit_code)
    digest = hashlib.blake2b(digest_size=8)
    digest.update("\n".join(lines).encode("utf-8", "surrogatepass"))
    digest.update(f"\x00{exit_code}\x00{error}".encode())
    if truncated:
        digest.update(hashlib.blake2b(content.encode("utf-8", "surrogatepass")).digest())
    return digest.hexdigest()


# --------------------------------------------------------------------------------------------
# The analysis of one event, shared by every detector that looks at it


#: Held while a preview is made from what it shows (``ActionInfo.preview``), which it then
#: replaces: a thread that saw it unmade must not read it half way (a result shared by the
#: governors of a fleet may be asked for in two at once).
_making = threading.Lock()


class ActionInfo:
    """One tool call as detectors see it."""

    __slots__ = ("_made", "_preview", "echoes", "edit", "key", "name")

    def __init__(
        self,
        key: int,
        name: str,
        preview: str | None,
        echoes: tuple[str, ...] = (),
        edit: bool = False,
        shown: str = "",
    ) -> None:
        #: A hash of the canonical action (name and canonical arguments).
        self.key = key
        self.name = name
        # The preview; or, until it is first asked for, what it is made from: ``shown``, what
        # the call shows (``_shown``), which is short (``_MAY_WAIT``).
        self._made = preview is not None
        self._preview = shown if preview is None else preview
        #: The argument strings a result may merely repeat back ("No matches for 'x'").
        self.echoes = echoes
        #: Whether the call writes files (see ``is_edit``).
        self.edit = edit

    @property
    def preview(self) -> str:
        """The action, shortened, for messages. Most calls never appear in one: it is made
        when first asked for, once (``_making``)."""
        if not self._made:
            with _making:
                if not self._made:
                    self._preview = _preview_of(self.name, self._preview)
                    self._made = True
        return self._preview


#: A result's line hashes (``_line_hashes``): compiled, packed in bytes, 16 a line
#: (``_scan.line_hashes``), read in C; interpreted, a tuple of pairs of ints, which Python reads
#: faster than it would unpack bytes.
LineHashes = bytes | tuple[tuple[int, int], ...]


class ResultInfo:
    """One tool result as detectors see it. Shared by every detector that keeps it."""

    # Interpreted, ``exact`` and ``masked`` hold the hashes of the lines remembered as seen
    # (``_remember``); compiled, a table in C does (``_keys.pxd``).
    __slots__ = ("_made", "_preview", "echo_only", "error", "exact", "lines", "masked")

    def __init__(
        self,
        lines: LineHashes,
        error: str | None,
        preview: str | None,
        echo_only: bool = False,
        middle: LineHashes | None = None,
        shown: str = "",
    ) -> None:
        #: For each distinct normalized line compared (at most ``MAX_LINES``): its hash, and
        #: the hash of the same line with every digit masked (``_line_hashes``).
        self.lines = lines
        #: The same two hashes of every line remembered as seen (at most ``MAX_SEEN_LINES``):
        #: the compared lines, and those between them only remembered (``middle``).
        _remember(self, lines, middle)
        #: The error class, or None when the call did not fail.
        self.error = error
        # The preview; or, until it is first asked for, the head of the result's normalized
        # lines (``shown``) it is made from.
        self._made = preview is not None
        self._preview = shown if preview is None else preview
        #: Whether the result only repeated the call's own arguments back (``echo hi``).
        self.echo_only = echo_only

    @property
    def preview(self) -> str:
        """The result, shortened, for messages: its lines joined by spaces, cut. Made when first
        asked for."""
        if not self._made:
            with _making:
                if not self._made:
                    self._preview = _cut(self._preview.replace("\n", " "))
                    self._made = True
        return self._preview

    def __dealloc__(self) -> None:  # compiled: the table goes with the result
        _forget(self)

    def __sizeof__(self) -> int:
        return object.__sizeof__(self) + _table_size(self)


if not cython.compiled:
    # Compiled, ``_keys.pxd`` keeps a result's remembered line hashes in a table of its own.

    def _remember(info: Any, lines: Any, middle: Any) -> None:
        """Remember ``lines`` and ``middle`` (line hashes in the pure build's form, pairs of a
        line's hash and its masked hash; ``middle`` may be None) in ``info``."""
        remembered = lines if middle is None else lines + middle
        info.exact = frozenset([exact for exact, _ in remembered])
        info.masked = frozenset([masked for _, masked in remembered])

    def _forget(info: Any) -> None:
        """Nothing to free: the sets go with the result."""

    def _table_size(info: Any) -> int:
        """The bytes of a table held outside Python objects: none (the sets are objects)."""
        return 0


def _shorten(text: str, limit: int = PREVIEW_CHARS) -> str:
    """``text`` with its white space folded, cut to ``limit`` characters with an ellipsis."""
    # A long text is not folded whole: a head of it that folds to more than ``limit``
    # characters begins with the same ones as the whole, and says it is longer.
    if len(text) > 4 * limit:
        head = folded(text[: 4 * limit])
        if len(head) > limit:
            return _cut(head, limit)
    return _cut(folded(text), limit)


def folded(text: str) -> str:
    """``" ".join(text.split())``; compiled, ``text`` itself when it is folded already."""
    if _scannable(text):
        return _scan.folded(text)
    return " ".join(text.split())


def _cut(text: str, limit: int = PREVIEW_CHARS) -> str:
    """``text`` cut to ``limit`` characters, with an ellipsis if it is longer."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _shown(arguments: Mapping[str, Any] | str) -> str:
    """What a call shows in its preview: its command line; a mapping's one value; or the
    mapping, as JSON."""
    if isinstance(arguments, str):
        return arguments.strip()
    if len(arguments) == 1:
        # Its one value (compiled, read from a dict itself, not through a view of it).
        for value in arguments.values():
            if type(value) is str:
                return value
            # A subclass of str (its characters, as a str), or any other value.
            return str.__str__(value) if isinstance(value, str) else _json(value).decode()
    return _json(arguments, _SORT).decode()


#: How long what a call shows may be for its preview to wait until it is asked for
#: (``ActionInfo.preview``): a longer text is shortened at once, rather than kept. (A result's
#: waits on the head of its lines, which is never longer than a preview and one character.)
_MAY_WAIT: Final = 4 * PREVIEW_CHARS


def _preview_of(name: str, shown: str) -> str:
    """The preview of a call that shows ``shown``: led by the tool's name unless its first word
    is that name already, folded, cut."""
    # The first word is found, not split off: no list or str is made of it.
    first = shown.find(" ")
    if first < 0:
        first = len(shown)
    if not shown or (isinstance(name, str) and first == len(name) and shown.startswith(name)):
        return _shorten(shown or name)
    return _shorten(f"{name} {shown}")


def _head_tail(items: list[str], most: int) -> list[str]:
    """``items``, or its first and last halves when it holds more than ``most``."""
    if len(items) <= most:
        return items
    half = most // 2
    return items[:half] + items[-half:]


def _folded_lines(text: str) -> list[str]:
    """The distinct lines of ``text`` in order, each without the line number a file viewer
    prints before it, its white space folded and cut to ``MAX_LINE_CHARS``; empty ones left
    out. Compiled, ``_scan.folded_lines`` does the same in one pass."""
    distinct: dict[str, None] = {}
    for raw in text.split("\n"):
        first = raw[:1]
        if first in _BLANKS or first.isdecimal():  # a line number can start here
            number = _LINE_NUMBER.match(raw)
            if number:
                raw = raw[number.end() :]
        line = " ".join(raw.split())[:MAX_LINE_CHARS]
        if line:
            distinct[line] = None
    return list(distinct)


def _sample(content: str) -> tuple[list[str], list[str], bool]:
    """The distinct lines of ``content`` that detectors compare, normalized (at most
    ``MAX_LINES``: the first and last halves); the lines between them that are only remembered
    as seen (up to ``MAX_SEEN_LINES`` in all), with their whitespace normalized but their
    volatile details left as they are; and whether the compared lines leave some of the output
    out."""
    truncated = len(content) > HEAD_CHARS + TAIL_CHARS
    text = f"{content[:HEAD_CHARS]}\n{content[-TAIL_CHARS:]}" if truncated else content
    if "\x1b" in text:
        text = _ANSI.sub("", text)
    if "\r" in text:
        # A progress bar redraws its line: keep what was left on screen.
        text = "\n".join([line.rsplit("\r", 1)[-1] for line in text.split("\n")])
    lines = _scan.folded_lines(text, MAX_LINE_CHARS) if _scannable(text) else _folded_lines(text)
    middle: list[str] = []
    if len(lines) > MAX_LINES:
        half, most = MAX_LINES // 2, MAX_SEEN_LINES // 2
        middle = lines[half:-half] if len(lines) <= MAX_SEEN_LINES else lines[half:most]
        if len(lines) > MAX_SEEN_LINES:
            middle += lines[-most:-half]
        lines = _head_tail(lines, MAX_LINES)
        truncated = True
    # Masked after sampling: only the lines compared are scanned. A line only remembered is
    # kept unmasked: at worst, a later line with an id or a clock in it looks new.
    masked = _masked_lines(lines)
    return (lines if masked is lines else _distinct(masked, lines)), middle, truncated


def _distinct(masked: list[str], lines: list[str]) -> list[str]:
    """``masked`` (``lines``, distinct, each masked) without the lines that masking made the
    same as one before them. Only a line masking changed can have become another: when one
    did (a test run's summary with its duration), it is compared with the others rather than
    every line hashed again into a dict."""
    changed = -1
    for index in range(len(lines)):
        if masked[index] != lines[index]:
            if changed >= 0:
                return list(dict.fromkeys(masked))  # two or more: each may meet any other
            changed = index
    if changed < 0:
        return masked
    line = masked[changed]
    for index in range(len(masked)):
        if index != changed and masked[index] == line:
            # The first of the two stays, as dict.fromkeys keeps it.
            later = max(index, changed)
            return masked[:later] + masked[later + 1 :]
    return masked


_DIGITS = re.compile(r"\d+")
_ASCII_DIGITS = re.compile(r"\d+", re.ASCII)
#: Every ASCII digit as a NUL: what separates the pieces of a text between its numbers.
_DIGITS_AS_NUL: Final = str.maketrans("0123456789", "\x00" * 10)
#: From this length on, a translation masks an ASCII text's numbers faster than the regular
#: expression (112 characters: 2.2 µs against 1.5; 300: 2.7 against 3.8; 1 KB: 6 against 12).
_TRANSLATED_FROM: Final = 200


def _numbers_masked(text: str) -> str:
    """``text`` with each run of digits as ``#``, for the pure build's line hashes (compiled,
    ``_scan.line_hashes`` hashes a line without masking it): for a long ASCII text with no NUL
    in it, by a translation and a split (the pieces between digits, without the empty ones a
    run of several leaves) rather than a regular expression, which tries a match at every
    position."""
    if not text.isascii():
        return _DIGITS.sub("#", text)
    if len(text) < _TRANSLATED_FROM or "\x00" in text:
        return _ASCII_DIGITS.sub("#", text)
    pieces = text.translate(_DIGITS_AS_NUL).split("\x00")
    if len(pieces) == 1:
        return text
    between = [piece for piece in pieces[1:-1] if piece]
    return "#".join([pieces[0], *between, pieces[-1]])


def _line_hashes(lines: list[str]) -> LineHashes:
    """For each of ``lines``: its hash, and a hash of it with its numbers masked. Compiled,
    ``_scan.line_hashes`` makes both in one pass, without the masked line, and packs them;
    interpreted, a pass over characters in Python would cost more than ``hash`` and a masked
    copy."""
    if _SCANS:
        return _scan.line_hashes(lines)
    if not lines:
        return ()
    masked = _numbers_masked("\n".join(lines)).split("\n")
    return tuple(zip(map(hash, lines), map(hash, masked), strict=True))


_QUOTED = re.compile(r'"([^"\n]{3,200})"|\'([^\'\n]{3,200})\'')
_ECHO_COMMANDS = ("echo ", "printf ")


def _quoted(text: str) -> list[str]:
    """The strings ``_QUOTED`` finds quoted in ``text``. Compiled, ``_scan.quoted`` reads them
    from the quotes' places, without a regular expression's attempt at every character."""
    if _scannable(text):
        return _scan.quoted(text)
    return [double or single for double, single in _QUOTED.findall(text)]


_ARG = "\x00arg\x00"
_ONLY_ARGS = re.compile(r"^[\s\W]*(?:\x00arg\x00[\s\W]*)+$")


def _echoes(arguments: Mapping[str, Any] | str) -> tuple[str, ...]:
    """Strings of the arguments that a result may repeat back: quoted strings, short values,
    and what an ``echo`` prints."""
    found: dict[str, None] = {}
    if isinstance(arguments, str):
        _echoed(found, arguments.strip(), False)
    else:
        for value in arguments.values():
            if isinstance(value, str):
                _echoed(found, value.strip(), True)
    echoes = [echo for echo in found if len(echo) >= 3]
    if len(echoes) > 1:
        echoes.sort(key=len, reverse=True)
    return tuple(echoes)


def _echoed(found: dict[str, None], text: str, value: bool) -> None:
    """Into ``found``, what a result may repeat of one argument's ``text`` (stripped): the text
    itself when it is a short ``value`` of a mapping, the strings quoted in it, and what an
    ``echo`` of it prints."""
    if value and 3 <= len(text) <= 200:
        found[text] = None
    if '"' in text or "'" in text:
        for quoted in _quoted(text[:4096]):
            found[quoted.strip()] = None
    if text.startswith(_ECHO_COMMANDS) and "\n" not in text:
        printed = text.split(" ", 1)[1].strip().strip("\"'")
        if len(printed) >= 3:
            found[printed] = None


#: Tools that write files, by name (compared in lower case).
EDIT_TOOLS: Final = frozenset(
    {
        "edit",
        "edit_file",
        "write",
        "write_file",
        "create",
        "create_file",
        "insert",
        "append",
        "str_replace",
        "apply_patch",
        "patch",
        "replace_in_file",
    }
)
#: The sub-commands of an editor tool that write (``str_replace_editor``'s ``view`` reads).
_EDIT_COMMANDS: Final = frozenset({"str_replace", "insert", "create", "undo_edit", "write"})
#: What a shell command line that writes files contains.
_EDIT_SHELL: Final = ("sed -i", "cat >", "cat <<", "tee ", "patch ", "git apply", "perl -pi")


def is_edit(name: str, arguments: Mapping[str, Any] | str) -> bool:
    """Whether a call writes files: an editing tool (by its name, or the first word of its
    command line: SWE-agent's ``edit 12:14``), an editor's writing sub-command, or a shell line
    that rewrites a file in place or redirects a here-document into one."""
    if _scan.lowered(name) in EDIT_TOOLS:
        return True
    if isinstance(arguments, str):
        line = arguments
    else:
        command = arguments.get("command")
        if not isinstance(command, str):
            return False
        if command in _EDIT_COMMANDS:
            return True
        line = command
    head = line[:512].lstrip()
    first = _scan.lowered(head.split(None, 1)[0]) if head else ""
    if first in EDIT_TOOLS:
        return True
    # A loop, not any() over a generator: compiled, the generator costs more than the tests.
    for needle in _EDIT_SHELL:  # noqa: SIM110
        if needle in head:
            return True
    return False


def _analyze_call(
    name: str, arguments: Mapping[str, Any] | str, ignored: frozenset[str]
) -> ActionInfo:
    canonical = canonical_arguments(arguments, ignored)
    shown = _shown(arguments)
    return ActionInfo(
        hash((name, canonical)),
        name,
        None if len(shown) <= _MAY_WAIT else _preview_of(name, shown),
        _echoes(arguments),
        is_edit(name, arguments),
        shown,
    )


def _analyze_result(
    content: str, is_error: bool, exit_code: int | None, echoes: tuple[str, ...] = ()
) -> ResultInfo:
    lines, middle, _ = _sample(content)
    normalized = "\n".join(lines)
    error = error_class(content, is_error=is_error, exit_code=exit_code)
    echo_only = False
    judged = lines
    if echoes and normalized:
        text = normalized
        for echo in echoes:
            text = text.replace(echo, _ARG)
        # Where no echo was found, the lines stay as they are, and only arguments can be all
        # that a text holds if it holds one (a regular expression that backtracks over every
        # leading rule of a long output).
        if _ARG in text:
            echo_only = _ONLY_ARGS.match(text) is not None
            judged = list(dict.fromkeys(text.split("\n")))
        if middle:
            text = "\n".join(middle)
            for echo in echoes:
                text = text.replace(echo, _ARG)
            if _ARG in text:
                middle = text.split("\n")
    return ResultInfo(
        _line_hashes(judged),
        error,
        # Made when first asked for, from the head of its lines: they are folded already, and
        # masking left them so, so joined by spaces they are the text folded.
        None,
        echo_only,
        _line_hashes(middle) if middle else None,
        normalized[: PREVIEW_CHARS + 1],
    )


#: How many results' analyses are kept, by what they were made from (the output, its flags and
#: the call's echoes): a loop that gets the same output back, in a row or round a cycle of up to
#: 8 calls, is not analysed again. A ``ResultInfo`` is never changed once made, so events may
#: share one. The text of the last outputs is held alive, at most this many.
SEEN_RESULTS: Final = 8


class _Seen:
    """A result analysed (``_analyze_seen_result``): what its analysis was made from, with the
    hash of its content, and the analysis."""

    __slots__ = ("content", "echoes", "exit_code", "hash", "info", "is_error")

    def __init__(
        self,
        h: int,
        content: str,
        is_error: bool,
        exit_code: int | None,
        echoes: tuple[str, ...],
        info: ResultInfo,
    ) -> None:
        self.hash = h
        self.content = content
        self.is_error = is_error
        self.exit_code = exit_code
        self.echoes = echoes
        self.info = info


if cython.compiled:
    #: The last results analysed, the most recently used first. Compiled, each change of the
    #: list is one call in C, so concurrent governors may only lose an entry (analysed again).
    _results: list[_Seen] = []

    def _analyze_seen_result(
        content: str, is_error: bool, exit_code: int | None, echoes: tuple[str, ...]
    ) -> ResultInfo:
        """``_analyze_result``, remembered for the last ``SEEN_RESULTS`` results as
        ``functools.lru_cache(typed=True)`` would remember them, the content found by
        ``_scan.text_hash`` (then compared) rather than by ``hash``, and without the key
        ``lru_cache`` makes of the arguments."""
        h = _scan.text_hash(content) if _scannable(content) else hash(content)
        entries = _results
        for index in range(len(entries)):
            seen = entries[index]
            if (
                seen.hash == h
                and seen.content == content
                and seen.is_error == is_error
                and seen.exit_code == exit_code
                and seen.echoes == echoes
                and type(seen.is_error) is type(is_error)
                and type(seen.exit_code) is type(exit_code)
            ):
                # Made the most recent, unless another thread moved it meanwhile.
                if index and index < len(entries) and entries[index] is seen:
                    del entries[index]
                    entries.insert(0, seen)
                return seen.info
        info = _analyze_result(content, is_error, exit_code, echoes)
        entries.insert(0, _Seen(h, content, is_error, exit_code, echoes, info))
        if len(entries) > SEEN_RESULTS:
            entries.pop()
        return info

else:
    # Interpreted, the functools cache (in C) costs less than a lookup written in Python.
    _analyze_seen_result = functools.lru_cache(maxsize=SEEN_RESULTS, typed=True)(_analyze_result)

# One-entry memos keyed by the event's identity: every detector of a governor sees the same
# event object in turn. A tuple is swapped in whole, so concurrent governors cannot tear it.
_last_call: tuple[object, frozenset[str], ActionInfo] | None = None
_last_result: tuple[object, object, ResultInfo] | None = None


def analyze_call(event: Any, ignored: frozenset[str] = DEFAULT_IGNORED_FIELDS) -> ActionInfo:
    """The ``ActionInfo`` of a ``ToolCall`` event."""
    global _last_call
    memo = _last_call
    if memo is not None and memo[0] is event and memo[1] is ignored:
        return memo[2]
    info = _analyze_call(event.name, event.arguments, ignored)
    _last_call = (event, ignored, info)
    return info


def analyze_result(event: Any, action: ActionInfo | None = None) -> ResultInfo:
    """The ``ResultInfo`` of a ``ToolResult`` event, judged against the call that made it (what
    the result merely repeats of the call's arguments is not news)."""
    global _last_result
    memo = _last_result
    if memo is not None and memo[0] is event and memo[1] is action:
        return memo[2]
    echoes = action.echoes if action is not None else ()
    info = _analyze_seen_result(event.content or "", event.is_error, event.exit_code, echoes)
    _last_result = (event, action, info)
    return info
