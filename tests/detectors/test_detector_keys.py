"""Canonical action keys, normalized outputs, error classes and result fingerprints."""

from __future__ import annotations

import functools
import importlib.util
import json
import re
from array import array
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from haltwise.engine.decisions import CONTINUE
from haltwise.engine.detectors import _keys as keys
from haltwise.engine.detectors import _scan as scan
from haltwise.engine.detectors import (
    action_key,
    canonical_arguments,
    error_class,
    normalize_output,
    result_fingerprint,
    stuck,
)
from haltwise.engine.detectors._base import Recent
from haltwise.engine.detectors._keys import (
    _ERROR_PHRASES,
    _NOT_FOUND,
    _ONLY_ARGS,
    _QUOTED,
    _SORT,
    HEAD_CHARS,
    MAX_LINE_CHARS,
    SEEN_RESULTS,
    TAIL_CHARS,
    LineHashes,
    ResultInfo,
    _analyze_result,
    _cut,
    _distinct,
    _echoes,
    _folded_lines,
    _json,
    _last_exception_name,
    _line_hashes,
    _numbers_masked,
    _preview_of,
    _quoted,
    _sample,
    _shorten,
    _shown,
    analyze_call,
    analyze_result,
)
from haltwise.engine.detectors._scan import exception_name, folded, folded_lines, line_hashes
from haltwise.engine.events import RunStarted, ToolCall, ToolResult
from haltwise.engine.governor import Governor
from haltwise.testing import deep_size


def test_keys_are_sorted_canonical_json() -> None:
    assert action_key("read", {"b": 2, "a": "x"}) == action_key("read", {"a": "x", "b": 2})
    assert action_key("read", '{"b": 2, "a": "x"}') == action_key("read", {"a": "x", "b": 2})
    assert canonical_arguments({"b": 2, "a": "x"}) == b'{"a":"x","b":2}'


def test_nested_arguments_are_canonical_too() -> None:
    first = {"filter": {"z": [1, 2], "a": {"y": True}}, "limit": 5}
    second = {"limit": 5, "filter": {"a": {"y": True}, "z": [1, 2]}}
    assert action_key("search", first) == action_key("search", second)
    assert action_key("search", first) != action_key("search", {**second, "limit": 6})


def _nested(depth: int, leaf: object = 1) -> dict[str, Any]:
    value: dict[str, Any] = {"a": [leaf]}
    for _ in range(depth - 1):
        value = {"a": [value]}
    return value


def test_arguments_nested_past_the_bound_are_written_whole_not_read_level_by_level() -> None:
    # Canonical down to MAX_DEPTH levels (keys sorted), then each deeper container as written.
    def within(lists: int) -> bytes:
        return canonical_arguments({"x": json.loads("[" * lists + '{"b":1,"a":2}' + "]" * lists)})

    last = keys.MAX_DEPTH - 2  # the mapping, then lists, then the innermost mapping
    assert within(last).endswith(b'{"a":2,"b":1}' + b"]" * last + b"}")
    assert within(last + 1).endswith(b"\"{'b': 1, 'a': 2}\"" + b"]" * (last + 1) + b"}")
    assert action_key("t", _nested(40, 1)) == action_key("t", _nested(40, 1))
    assert action_key("t", _nested(40, 1)) != action_key("t", _nested(40, 2))


def test_arguments_that_hold_themselves_or_nest_without_end_neither_raise_nor_crash() -> None:
    # Compiled, reading these level by level overflowed the C stack (the process died);
    # interpreted, 300 levels of JSON a framework parsed raised RecursionError.
    itself: dict[str, object] = {"path": "a.py"}
    itself["self"] = itself
    inside: list[object] = []
    inside.append(inside)
    parsed = json.loads('{"a":[' * 300 + "1" + "]}" * 300)
    cases: list[dict[str, Any]] = [itself, {"items": inside}, parsed, _nested(20_000)]
    for arguments in cases:
        assert action_key("tool", arguments) == action_key("tool", arguments)
        governor = Governor(stuck())
        governor.handle(RunStarted("x"))
        assert governor.handle(ToolCall("tool", arguments, "c1")) is CONTINUE
        assert governor.handle(ToolResult("tool", "done", "c1")) is CONTINUE


def test_volatile_fields_and_thoughts_are_left_out() -> None:
    plain = action_key("fetch", {"url": "https://a.test"})
    noisy = {
        "url": "https://a.test",
        "request_id": "r-81",
        "timestamp": 1700000000,
        "thought": "maybe this time",
        "reasoning": "it failed before",
    }
    assert action_key("fetch", noisy) == plain


def test_ids_and_clocks_inside_values_are_masked_but_numbers_are_not() -> None:
    first = {"query": "job 550e8400-e29b-41d4-a716-446655440000 at 2024-05-01T10:00:00Z"}
    second = {"query": "job 123e4567-e89b-12d3-a456-426614174000 at 2024-06-02T11:30:00Z"}
    assert action_key("logs", first) == action_key("logs", second)
    assert action_key("goto", {"line": 100}) != action_key("goto", {"line": 200})


def test_command_lines_are_trimmed_not_rewritten() -> None:
    assert action_key("bash", "ls -la \n") == action_key("bash", "ls -la")
    assert action_key("bash", "ls -la") != action_key("bash", "ls -l")


def test_other_fields_to_ignore_can_be_given() -> None:
    assert canonical_arguments({"q": "x", "page_token": "abc"}, frozenset({"page_token"})) == (
        canonical_arguments({"q": "x"})
    )


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("\x1b[31mFAILED\x1b[0m test_a", "FAILED test_a"),
        ("started pid 4242", "started pid 77"),
        ("object at 0x7f3a9c2d10", "object at 0x55d1e0a9f8"),
        ("commit 3f9a2c1b7d in main", "commit a81c0e45ff in main"),
        ("ran in 0.53s", "ran in 12.9s"),
        ("done at 2024-05-01 10:00:01", "done at 2025-01-09 23:59:59"),
        ("wrote /tmp/tmpa8x9_2kq/out.txt", "wrote /tmp/tmpzz12ab_p/out.txt"),
        (
            "/bin/bash: line 968: javac: command not found",
            "/bin/bash: line 12: javac: command not found",
        ),
        (
            "request 550e8400-e29b-41d4-a716-446655440000",
            "request 123e4567-e89b-12d3-a456-426614174000",
        ),
    ],
)
def test_volatile_details_are_masked(first: str, second: str) -> None:
    assert normalize_output(first) == normalize_output(second)
    assert result_fingerprint(first) == result_fingerprint(second)


def test_what_matters_is_kept() -> None:
    assert result_fingerprint("3 failed, 10 passed") != result_fingerprint("2 failed, 11 passed")
    assert result_fingerprint("ok", exit_code=0) != result_fingerprint("ok", exit_code=1)
    assert result_fingerprint("x = 1") != result_fingerprint("x = 2")


def test_a_truncated_output_is_told_apart_by_a_digest_of_the_whole() -> None:
    head, tail = "start\n" * 3000, "end\n" * 2000
    first = head + "middle one\n" + tail
    second = head + "middle two\n" + tail
    assert result_fingerprint(first) != result_fingerprint(second)
    assert result_fingerprint(first) == result_fingerprint(first)


@pytest.mark.parametrize(
    ("content", "flags", "expected"),
    [
        ("Traceback (most recent call last):\n  ...\nKeyError: 'x'", {}, "KeyError"),
        ("/bin/bash: line 3: javac: command not found", {}, "command not found"),
        ("cat: nope.txt: No such file or directory", {}, "no such file or directory"),
        ('No matches found for "Parser" in /repo', {}, "not found"),
        ("all good", {}, None),
        ("all good", {"exit_code": 0}, None),
        ("boom", {"exit_code": 2}, "error, exit 2"),
        ("ValueError: bad", {"exit_code": 1}, "ValueError, exit 1"),
        ("something went wrong", {"is_error": True}, "error"),
        # A passing command that prints an exception's name is not a failure.
        ("KeyError: expected in this test", {"exit_code": 0}, None),
    ],
)
def test_error_classes(content: str, flags: dict[str, object], expected: str | None) -> None:
    assert error_class(content, **flags) == expected  # type: ignore[arg-type]


def test_a_long_listing_mentioning_not_found_is_not_an_error() -> None:
    listing = "\n".join(f"test_case_{index}: expects 'not found' handling" for index in range(30))
    assert error_class(listing) is None


def _error_class_by_definition(content: str, exit_code: int | None) -> str | None:
    """``error_class`` as it was written before one scan found its words: the text lowered,
    then searched for each word in turn."""
    if exit_code == 0:
        return None
    head = content[:HEAD_CHARS]
    tail = content[-TAIL_CHARS:] if len(content) > HEAD_CHARS else ""
    lowered = (head + "\n" + tail).lower() if tail else head.lower()
    found = None
    if any(kind.lower() in lowered for kind in scan.KINDS):
        found = _last_exception_name(tail or head)
    if found is None:
        found = next((name for needle, name in _ERROR_PHRASES if needle in lowered), None)
    if found is None and len(head) <= 400 and head.count("\n") <= 3 and _NOT_FOUND.search(head):
        found = "not found"
    if found is None and exit_code is None:
        return None
    return ", ".join([found or "error", *([f"exit {exit_code}"] if exit_code else [])])


#: What a result is made of near the words ``error_class`` looks for, in any case, and near the
#: border between the head and the tail it reads of a long one.
_ERROR_PARTS = st.sampled_from(
    [
        *("Error", "EXCEPTION", "exit", "Interrupt", "KeyError: x", "ValueError", "\n"),
        *("Command Not Found", "no such file or directory", "Syntax error", "fatal:"),
        *("Permission denied", "Traceback (most recent call last):", "not found", "FO", "für"),
        *("is not recognized as an internal or external command", "İ", "K", "Ëxit", " ", "a"),
        *("command not", " found", "x" * 4000),
        # Each word but its last character, before another.
        *("erro", "Exi", "fatal", "command not foun", "xxxxxxxx", "f"),
    ]
)


@given(st.lists(_ERROR_PARTS, max_size=12).map("".join), st.sampled_from([None, 0, 1]))
def test_the_error_class_is_found_as_by_its_definition(content: str, exit_code: int | None) -> None:
    assert error_class(content, exit_code=exit_code) == _error_class_by_definition(
        content, exit_code
    )


@given(st.lists(_ERROR_PARTS, max_size=8).map("".join))
def test_needles_are_found_as_by_searching_the_lowered_text(text: str) -> None:
    # Compiled, one scan finds them all, a pair of characters at a time; interpreted, the
    # lowered text is searched for each (the definition itself).
    if not scan.COMPILED:
        pytest.skip("the pure build searches the lowered text: the definition itself")
    words = ("error", "exit", "command not found", "fatal:", "fo", "not found", "x" * 9)
    needles = scan.Needles(words)
    for sample in (text, text + "é", text + "\u0130", "\xe5" + text):  # Latin-1, then wider
        lowered = sample.lower()
        expected = sum(1 << k for k, word in enumerate(words) if word in lowered)
        assert needles.found(sample) == expected


@pytest.mark.parametrize("words", [(), ("Error",), ("x",), ("ünïcode",), ("a",) * 17])
def test_needles_take_lower_case_ascii_words(words: tuple[str, ...]) -> None:
    with pytest.raises(ValueError, match="lower-case ASCII words"):
        scan.Needles(words)


def test_an_output_seen_again_is_not_analysed_again() -> None:
    call = ToolCall("bash", {"command": "make check"}, call_id="c1")
    action = analyze_call(call)
    first = analyze_result(ToolResult("bash", "3 failed in 0.5s", call_id="c1"), action)
    again = analyze_result(ToolResult("bash", "3 failed in 0.5s", call_id="c2"), action)
    failed = analyze_result(ToolResult("bash", "3 failed in 0.5s", "c3", exit_code=1), action)
    assert again is first
    assert failed is not first
    assert failed.error is not None


def test_the_last_results_are_remembered_and_the_least_recently_used_forgotten_first() -> None:
    action = analyze_call(ToolCall("bash", {"command": "make check"}, call_id="c1"))

    def seen(text: str) -> object:
        return analyze_result(ToolResult("bash", text, call_id="c1"), action)

    kept = seen("kept: 3 failed in 0.5s")
    for index in range(SEEN_RESULTS - 1):
        seen(f"other {index}: 3 failed")
    assert seen("kept: 3 failed in 0.5s") is kept  # the oldest of 8, and now the most recent
    for index in range(SEEN_RESULTS - 1):
        seen(f"more {index}: 3 failed")
    assert seen("kept: 3 failed in 0.5s") is kept
    for index in range(SEEN_RESULTS):
        seen(f"last {index}: 3 failed")
    assert seen("kept: 3 failed in 0.5s") is not kept


@given(st.text(alphabet=st.sampled_from(list("ab\x00é€😀")), min_size=1, max_size=24))
def test_a_text_hash_tells_apart_texts_that_differ_in_one_character(text: str) -> None:
    assert scan.text_hash(text) == scan.text_hash("".join(list(text)))
    for index in range(len(text)):
        for other in ("a", "\x00", "€"):
            if text[index] != other:
                changed = text[:index] + other + text[index + 1 :]
                assert scan.text_hash(changed) != scan.text_hash(text)
    assert scan.text_hash(text + "\x00") != scan.text_hash(text)


@given(st.text(alphabet=st.sampled_from(list("ab 09\n\x00٣²")), max_size=40))
def test_numbers_are_masked_as_by_a_regular_expression(text: str) -> None:
    # Short texts are masked by a regular expression, long ones (200 characters on) otherwise.
    for sized in (text, text * 10):
        assert _numbers_masked(sized) == re.sub(r"\d+", "#", sized)


#: What a line of a result holds near its line number and its white space.
_LINE_PARTS = st.sampled_from(
    [
        *" \t\n\x0b\x0c\x1c\x1f\x85\xa0\u3000\u2028:|│#x09٣²😀",
        *("12", "  7 |", "3\t", "42:", "\t\t9 │", "08 x", "word", "a b", "a  b", " ", "\x00"),
        # Runs of eight characters and more, which the compiled fold copies eight at a time.
        *("abcdefghij", "x" * 9, "path/to-file_1.py:", "0123456789", "long\x01word", "é" * 9),
    ]
)


@given(st.lists(_LINE_PARTS, max_size=60).map("".join), st.sampled_from([4, 9, MAX_LINE_CHARS]))
def test_the_lines_scan_folds_lines_as_split_and_join_do(text: str, most: int) -> None:
    # The compiled build reads a result's lines with one scan: each line's number dropped and
    # its white space folded as a regular expression and str.split() do. Both builds run it.
    assert folded(text) == " ".join(text.split())
    expected = _folded_lines(text)
    if most == MAX_LINE_CHARS:
        assert folded_lines(text, most) == expected
    else:
        cut = {line[:most]: None for raw in text.split("\n") for line in _folded_lines(raw)}
        assert folded_lines(text, most) == list(cut)
    lines = [*expected, "٣ and 3", "# and #", "no digit", "no digit 42"]
    _assert_hashes_tell_lines_apart(lines)


@given(
    st.lists(
        st.sampled_from(["a", "b 1", "  12 | a", "x" * 9, "é", "", "😀 z", "c\td"]), max_size=200
    ).map("\n".join)
)
def test_the_lines_scan_keeps_the_first_of_equal_lines_however_many(text: str) -> None:
    # Compiled, the lines already read are looked for in a table of their own: on the stack
    # for up to 32 lines, in memory allocated for more.
    assert folded_lines(text, MAX_LINE_CHARS) == _folded_lines(text)
    many = "\n".join(f"line {index % 50}" for index in range(120))
    assert folded_lines(many, MAX_LINE_CHARS) == [f"line {index}" for index in range(50)]


def _assert_hashes_tell_lines_apart(lines: list[str]) -> None:
    # Two hashes of each line: one that two lines share exactly when they are equal, one that
    # they share exactly when, masked, they are equal.
    masked = [re.sub(r"\d+", "#", line) for line in lines]
    for hashes in (_pairs(line_hashes(lines)), _pairs(_line_hashes(lines))):
        assert len(hashes) == len(lines)
        for texts, kept in (
            (lines, [exact for exact, _ in hashes]),
            (masked, [m for _, m in hashes]),
        ):
            for first, first_hash in zip(texts, kept, strict=True):
                assert -(2**63) <= first_hash < 2**63
                for second, second_hash in zip(texts, kept, strict=True):
                    assert (first_hash == second_hash) == (first == second)


@pytest.mark.parametrize("offset", range(17))
def test_a_run_of_digits_is_masked_alike_wherever_the_words_read_split_it(offset: int) -> None:
    # Compiled, a line is hashed eight characters at a time: a run of digits that a word's end
    # cuts is still one "#", and the runs that two words hold are two.
    head = "x" * offset
    _assert_hashes_tell_lines_apart(
        [
            *(f"{head}{digits} passed" for digits in ("7", "12", "1234567", "123456789012345")),
            *(f"{head}1{gap}2 s" for gap in ("a", "ab", "abcdefgh", " 3 ")),
            f"{head}# passed",
            f"{head}#",
        ]
    )


def _pairs(hashes: LineHashes) -> list[tuple[int, int]]:
    """Line hashes as pairs of ints, from either form (packed in bytes, or pairs already)."""
    if isinstance(hashes, bytes):
        values = array("q")
        values.frombytes(hashes)
        return list(zip(values[::2], values[1::2], strict=True))
    return list(hashes)


#: What a line is made of near the edges of the eight characters the compiled hash reads at once.
_HASHED_PARTS = st.sampled_from(
    ["a", "bcdefgh", "0", "12345678", "#", " ", "é", "٣", "😀", "x" * 9]
)


@given(st.lists(st.lists(_HASHED_PARTS, max_size=12).map("".join), min_size=1, max_size=8))
def test_line_hashes_tell_lines_apart_wherever_their_digits_fall(lines: list[str]) -> None:
    _assert_hashes_tell_lines_apart(lines)


@given(st.lists(st.lists(_HASHED_PARTS, max_size=12).map("".join), min_size=1, max_size=8))
def test_the_compiled_line_hashes_are_the_interpreted_ones(lines: list[str]) -> None:
    # The compiled scan feeds eight ASCII characters without a digit into each hash at once, and
    # the rest one by one; its interpreted twin feeds every byte of the same streams one by one.
    if not scan.COMPILED:
        pytest.skip("the pure build runs the interpreted line hashes only")
    assert line_hashes(lines) == _interpreted_scan().line_hashes(lines)


#: What quoted strings are made of near the bounds of what counts as one (3 to 200 characters).
_QUOTE_PARTS = st.sampled_from(['"', "'", "\n", "a", "bc", "x" * 97, "y" * 100, "é", "😀", " "])


#: Quoted strings at those bounds, and quotes that close none or open another.
_QUOTED_TEXTS = [
    '"bc"',
    '"abc"',
    '"' + "x" * 200 + '"',
    '"' + "x" * 201 + '"',
    "'" + "é" * 199 + '😀\' and "yy"',
    '"ab\ncd" "efg"',
    "\"a'bcd'e\" 'f\"gh\"'",
    '"abc"def"',
    "''" + "''abc'",
]


@pytest.mark.parametrize("text", _QUOTED_TEXTS)
def test_the_quoted_strings_at_their_bounds_are_those_the_pattern_finds(text: str) -> None:
    assert scan.quoted(text) == [d or s for d, s in _QUOTED.findall(text)]


@given(st.lists(_QUOTE_PARTS, max_size=24).map("".join))
def test_the_quoted_strings_are_those_the_pattern_finds(text: str) -> None:
    # Compiled, the strings a call quotes are read from its quotes' places; the regular
    # expression is their definition. Both builds run the scan here.
    assert scan.quoted(text) == [d or s for d, s in _QUOTED.findall(text)]
    assert _quoted(text) == scan.quoted(text)


@functools.cache
def _interpreted_scan() -> Any:
    """``_scan`` imported from its source, beside the compiled one: the same seed (a string's
    hash in this process), read by the interpreted twins."""
    spec = importlib.util.spec_from_file_location(
        "haltwise.engine.detectors._scan_interpreted", Path(scan.__file__).with_name("_scan.py")
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert not module.COMPILED
    return module


#: What names an exception at the start of a line, and what comes near such a name.
_EXCEPTION_PARTS = st.sampled_from(
    [
        "ValueError",
        "os.TimeoutError",
        "SystemExit",
        "KeyboardInterrupt",
        "MyException",
        ":",
        " ",
        "\n",
        "\r",
        "x",
        "E",
        "rror",
        ".",
        "_",
        "é",
        "Error:",
        "a.b.",
        "raise ",
        *("Exception", "Exit", "Interrupt", "Ab", "..", "-", "\t", "٣", "²"),
    ]
)


@given(st.lists(_EXCEPTION_PARTS, max_size=30))
def test_the_last_exception_is_the_last_that_a_line_starts_with(parts: list[str]) -> None:
    # Each line is matched at its start, from the last: what a multi-line search finds last.
    text = "".join(parts)
    every = re.findall(
        r"^(?:[\w.]+\.)?([A-Z]\w*(?:Error|Exception|Exit|Interrupt))\b(?::|$)", text, re.MULTILINE
    )
    assert _last_exception_name(text) == (every[-1] if every else None)
    assert exception_name(text) == (every[-1] if every else None)  # the compiled build's scan


_PREVIEW_PARTS = st.sampled_from(["a", "word", "x" * 30, " ", "\n\t", " " * 200, "y" * 100])


@given(st.lists(_PREVIEW_PARTS, max_size=60), st.integers(min_value=1, max_value=120))
def test_a_preview_is_the_text_folded_and_cut(parts: list[str], limit: int) -> None:
    # Long texts are folded from a head only; the preview is still the whole text's.
    text = "".join(parts)
    folded = " ".join(text.split())
    expected = folded if len(folded) <= limit else folded[: limit - 1] + "…"
    assert _shorten(text, limit) == expected


class _Text(str):
    """A subclass of str, as some frameworks hand tool output and arguments over."""


def _preview_defined(name: Any, arguments: Any) -> str:
    """What a call's preview is: the action's text, folded and cut, led by the tool's name
    unless its first word (to the first space) is that name already."""
    if isinstance(arguments, str):
        shown = arguments.strip()
    elif len(arguments) == 1:
        (value,) = arguments.values()
        shown = str(value) if isinstance(value, str) else _json(value).decode()
    else:
        shown = _json(arguments, _SORT).decode()
    if shown.split(" ", 1)[0] == name or not shown:
        return _shorten(shown or name)
    return _shorten(f"{name} {shown}")


_COMMAND_PARTS = st.sampled_from(
    ["bash", "bashful", "ls", " ", "\t", "\n", "-la", "x" * 90, " " * 200, "y" * 300]
)


@given(
    st.sampled_from(["bash", "ls", "b", "bash -c", "", "Bash"]),
    st.lists(_COMMAND_PARTS, max_size=8).map("".join),
    st.sampled_from(["str", "one", "subclass", "two", "number"]),
)
def test_a_call_is_previewed_with_its_name_unless_it_starts_with_it(
    name: str, command: str, form: str
) -> None:
    # The first word is found with ``find``, not split off: it must agree with the split.
    arguments: Any = {
        "str": command,
        "one": {"command": command},
        "subclass": {"command": _Text(command)},
        "two": {"command": command, "cwd": "/work"},
        "number": {"n": 12},
    }[form]
    preview = _preview_of(name, _shown(arguments))
    assert preview == _preview_defined(name, arguments)
    assert type(preview) is str
    # A call's analysis makes it when first asked for (or at once, from a long text): the same.
    action = analyze_call(ToolCall(name or "tool", arguments))
    assert action.preview == _preview_defined(name or "tool", arguments)
    assert action.preview is action.preview  # made once


@given(st.lists(st.sampled_from(["FAILED x", "\n", "  ", "é", "12 passed", "y" * 70]), max_size=12))
def test_a_results_preview_is_its_normalized_lines_joined_and_cut(parts: list[str]) -> None:
    # Made when first asked for, from the head of the lines kept: as if made at once.
    text = "".join(parts)
    info = _analyze_result(text, False, None, ())
    assert info.preview == _cut(" ".join(_sample(text)[0]))
    assert info.preview is info.preview


def test_a_call_with_a_long_argument_keeps_only_its_preview() -> None:
    # What a call shows waits for its preview only while it is short: a file written whole is
    # not kept in every detector's window until a message asks for it.
    for arguments in ({"content": "x " * 50_000}, "cat <<EOF\n" + "y" * 100_000):
        action = analyze_call(ToolCall("write", arguments))
        assert deep_size(action) < 2_000
        assert action.preview == _preview_defined("write", arguments)


def test_a_preview_is_made_under_its_lock(monkeypatch: pytest.MonkeyPatch) -> None:
    # Made from what the call shows, which it then replaces: a thread that found it unmade must
    # not make it again from a preview another just made ("bash -c" would be led twice). The
    # lock is taken to make it, and whether it is made is asked again under it.
    if scan.COMPILED:
        pytest.skip("compiled, the preview is made by a call in C, which no patch replaces")
    made: list[bool] = []
    make = keys._preview_of

    def watched(name: str, shown: str) -> str:
        made.append(keys._making.locked())
        return make(name, shown)

    monkeypatch.setattr(keys, "_preview_of", watched)
    action = analyze_call(ToolCall("bash -c", {"command": "echo 1"}))
    with ThreadPoolExecutor(4) as pool:
        seen = set(pool.map(lambda _: action.preview, range(16)))
    assert seen == {"bash -c echo 1"}
    assert made == [True]


def test_a_call_under_a_name_that_is_no_str_is_previewed_with_it() -> None:
    # Governor.handle refuses such a call; the analysis, called directly, must not raise.
    assert _preview_of(7, _shown({"command": "7 up"})) == "7 7 up"  # type: ignore[arg-type]


@given(st.one_of(st.text(), st.text(alphabet="abcXYZ_-09 \u00e9\u0130").map(_Text)))
def test_lowered_is_lower(text: str) -> None:
    # Compiled, a str of ASCII with no capital letter is handed back, not copied.
    lowered = scan.lowered(text)
    assert lowered == text.lower()
    assert type(lowered) is str
    if scan.COMPILED and type(text) is str and text.isascii() and text == text.lower():
        assert lowered is text


def _echoes_defined(arguments: Any) -> tuple[str, ...]:
    """What a result may repeat of its call, longest first: each string value of 3 to 200
    characters (of a mapping), the strings quoted in one, what an ``echo`` or ``printf`` of one
    prints; stripped, of 3 characters or more, each once."""
    values = [arguments] if isinstance(arguments, str) else list(arguments.values())
    found: list[str] = []
    for value in values:
        if not isinstance(value, str):
            continue
        text = value.strip()
        if not isinstance(arguments, str) and 3 <= len(text) <= 200:
            found.append(text)
        found += [quoted.strip() for quoted in _QUOTED_TEXT(text[:4096])]
        if text.startswith(("echo ", "printf ")) and "\n" not in text:
            found.append(text.split(" ", 1)[1].strip().strip("\"'"))
    kept = [echo for echo in dict.fromkeys(found) if len(echo) >= 3]
    return tuple(sorted(kept, key=len, reverse=True))


def _QUOTED_TEXT(text: str) -> list[str]:  # noqa: N802 (the regular expression's findall)
    return [double or single for double, single in _QUOTED.findall(text)]


_ARGUMENT_PARTS = st.sampled_from(
    ["echo ", "printf ", "grep ", "'needle'", '"two words"', " ", "\n", "ab", "x" * 120, "'x'"]
)


@given(
    st.lists(_ARGUMENT_PARTS, max_size=6).map("".join),
    st.lists(_ARGUMENT_PARTS, max_size=6).map("".join),
    st.sampled_from(["str", "one", "two", "subclass", "mixed"]),
)
def test_a_calls_echoes_are_its_short_values_quotes_and_what_it_echoes(
    first: str, second: str, form: str
) -> None:
    arguments: Any = {
        "str": first,
        "one": {"command": first},
        "two": {"command": first, "pattern": second},
        "subclass": {"command": _Text(first)},
        "mixed": {"n": 3, "command": first, "flags": [second]},
    }[form]
    assert _echoes(arguments) == _echoes_defined(arguments)


_ECHO_PARTS = st.sampled_from(
    ["No matches for ", "'needle'", "needle", "\n", " ", "- ", "===", "\x00arg\x00", "3 found", "x"]
)


@given(
    st.lists(_ECHO_PARTS, max_size=30).map("".join),
    st.lists(st.sampled_from(["needle", "'needle'", "found", "abc"]), max_size=2, unique=True),
)
def test_what_a_result_repeats_of_its_call_is_set_aside(text: str, echoes: list[str]) -> None:
    # Its lines are judged with each echo of the call's arguments replaced by a marker, and the
    # result only echoed the call if nothing but markers and punctuation is left.
    ordered = tuple(sorted(echoes, key=len, reverse=True))
    info = _analyze_result(text, False, None, ordered)
    lines = _sample(text)[0]
    replaced = "\n".join(lines)
    for echo in ordered:
        replaced = replaced.replace(echo, "\x00arg\x00")
    judged = list(dict.fromkeys(replaced.split("\n"))) if lines and ordered else lines
    assert info.lines == _line_hashes(judged)
    assert info.echo_only == bool(lines and ordered and _ONLY_ARGS.match(replaced))


@given(
    st.lists(st.sampled_from(["a", "b", "c", "d", "e", "f"]), min_size=1, max_size=6, unique=True),
    st.data(),
)
def test_lines_made_alike_by_masking_are_kept_once_as_a_dict_keeps_them(
    lines: list[str], data: st.DataObject
) -> None:
    # Masking changes some of a result's distinct lines, perhaps into one another: a line each
    # text stands for once, at its first place, whichever lines changed.
    masks = st.sampled_from(["a", "b", "c", "<n>", "<n> x"])
    masked = [data.draw(st.one_of(st.just(line), masks)) for line in lines]
    assert _distinct(masked, lines) == list(dict.fromkeys(masked))


_WORDS = ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india")


@given(st.integers(2, 4), st.lists(st.integers(0, 3), max_size=9), st.data())
def test_a_window_remembers_the_last_results_it_was_given_and_no_others(
    size: int, keys: list[int], data: st.DataObject
) -> None:
    # Each result is two lines of a word of its own: a later action that shows them again
    # shows nothing new while one of the last ``size`` results held them, and news after.
    results = [ResultInfo(_line_hashes([f"{w} one", f"{w} two"]), None, w) for w in _WORDS]
    window = Recent(size)
    for key, result in zip(keys, results, strict=False):
        window.push(key, result)
    assert len(window) == min(size, len(keys))
    shown = data.draw(st.integers(0, len(_WORDS) - 1))
    again = ResultInfo(_line_hashes([f"{_WORDS[shown]} one", f"{_WORDS[shown]} two"]), None, "")
    remembered = len(keys) - size <= shown < len(keys)
    assert window.is_new(99, again) is not remembered


@pytest.mark.parametrize("output", ["", "   ", "\n\n  \t\n"])
def test_an_empty_result_has_no_line_to_compare_in_either_build(output: str) -> None:
    # The pure build once masked the lines joined and split them again: no line came back as one
    # empty line, judged as text where the compiled build saw a quiet result.
    info = analyze_result(ToolResult("bash", output, call_id="c1"))
    assert _pairs(info.lines) == []
    assert _sample(output)[0] == []


def test_a_results_size_counts_the_lines_it_remembers() -> None:
    # Compiled, the hashes are kept in memory of the result's own, outside any Python object:
    # its size must still say what it holds, for the bounds on a detector's state.
    many = ResultInfo(_line_hashes([f"line {n}" for n in range(256)]), None, "x")
    assert deep_size(many) - deep_size(many.lines) >= 256 * 2 * 8


def test_a_subclass_of_str_is_analysed_as_the_str() -> None:
    # The compiled scans take a str, not a subclass of it: the analyses must not hand them one.
    output = "FAILED test_x.py - AssertionError\n  12 | 3 failed in 0.52s\n/tmp/tmpab12cd3x"
    argument = "pytest 123e4567-e89b-12d3-a456-426614174000 -k case at 2024-05-01T10:00:00Z"
    lines = []
    for call_id, text in (("c1", output), ("c2", _Text(output))):
        action = analyze_call(ToolCall("bash", {"command": _Text(argument)}, call_id=call_id))
        plain = analyze_call(ToolCall("bash", {"command": argument}, call_id=call_id))
        assert (action.key, action.preview, action.echoes, action.edit) == (
            plain.key,
            plain.preview,
            plain.echoes,
            plain.edit,
        )
        lines.append(analyze_result(ToolResult("bash", text, call_id=call_id), action).lines)
        assert result_fingerprint(text) == result_fingerprint(output)
        assert normalize_output(_Text(output)) == normalize_output(output)
    assert lines[0] == lines[1]


def test_arguments_orjson_refuses_still_give_a_canonical_key() -> None:
    # A model's JSON may hold a lone surrogate ("\ud800") or an int past 64 bits: orjson
    # refuses both, and the analysis must not raise from inside a governor for it.
    hostile: list[Any] = [
        {"command": "echo \ud800"},
        {"b": "\udfff", "a": {"nested": ["\ud800", 2**70]}},
        {"n": 2**70},
        {1: "\ud800", "x": 2},
        "grep \ud800 file",
    ]
    for arguments in hostile:
        first = analyze_call(ToolCall("bash", arguments, call_id="c1"))
        again = analyze_call(ToolCall("bash", arguments, call_id="c2"))
        assert first.key == again.key
        assert first.preview
    assert (
        analyze_call(ToolCall("bash", {"n": 2**70})).key
        != analyze_call(ToolCall("bash", {"n": 2**71})).key
    )
    assert canonical_arguments({"b": "\ud800", "a": 1}) == canonical_arguments(
        {"a": 1, "b": "\ud800"}
    )
    governor = Governor(stuck())
    governor.handle(RunStarted(prompt="go"))
    for index in range(3):
        call = ToolCall("bash", {"command": "echo \ud800"}, call_id=f"c{index}")
        assert governor.handle(call) is not None
        governor.handle(ToolResult("bash", "\ud800 again", call_id=f"c{index}"))
