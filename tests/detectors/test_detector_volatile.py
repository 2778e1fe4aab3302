"""What normalization masks and what it keeps, on outputs as real tools print them.

Timings, pids, addresses, ports, temp paths, ids and progress bars are masked: two runs of the
same command that differ only there are the same result. Every other number is kept: counts of
failures, sizes, line numbers and versions are news, and progress on the same command (9
failures, then 7, then 5; a listing whose sizes grew) is never refused.
"""

from __future__ import annotations

import time

import pytest
from detector_driver import Driver
from hypothesis import given
from hypothesis import strategies as st

from haltwise import Block, Stop
from haltwise.engine.decisions import Warn
from haltwise.engine.detectors import normalize_output, result_fingerprint, stuck
from haltwise.engine.detectors._keys import (
    _ARGUMENT_VOLATILE,
    _ASCII_DIGIT,
    _EVERY_BRANCH,
    _analyze_result,
    _dispatched,
    _mask,
    _mask_text,
    _masked,
    _masked_lines,
    _may_be_volatile,
    _pattern,
    _sample,
    _shorten,
)
from haltwise.engine.detectors._scan import (
    all_ascii,
    mask,
    masked_lines,
    names_temp_path,
    spans,
    volatile_argument,
)


def pytest_run(failed: int, seconds: str, tmp: str = "pytest-of-ci/pytest-3") -> str:
    names = "".join(
        f"FAILED tests/test_parse.py::test_case_{index} - AssertionError\n"
        for index in range(failed)
    )
    summary = f" {failed} failed, {10 - failed} passed in {seconds} "
    rule = "=" * ((78 - len(summary)) // 2)
    return (
        "============================= test session starts ==============================\n"
        "platform linux -- Python 3.11.7, pytest-8.1.1, pluggy-1.4.0\n"
        f"rootdir: /tmp/{tmp}/repo\n"
        "collected 10 items\n\n"
        f"tests/test_parse.py {'F' * failed}{'.' * (10 - failed)}  [100%]\n\n"
        "=========================== short test summary info ============================\n"
        f"{names}{rule}{summary}{rule}"
    )


def unittest_run(failures: int, seconds: str) -> str:
    return (
        "F" * failures
        + "."
        + "\n----------------------------------------------------------------------\n"
        + f"Ran 12 tests in {seconds}\n\nFAILED (failures={failures})"
    )


def cargo_run(failed: int, seconds: str) -> str:
    return (
        "   Compiling parser v0.3.1 (/home/ci/parser)\n"
        f"    Finished test [unoptimized + debuginfo] target(s) in {seconds}\n"
        "     Running unittests src/lib.rs (target/debug/deps/parser-3f9a2c1b7d0e4a55)\n\n"
        f"test result: FAILED. {14 - failed} passed; {failed} failed; 0 ignored; 0 measured; "
        f"0 filtered out; finished in {seconds}"
    )


def go_run(failed: int, seconds: str) -> str:
    lines = "".join(f"--- FAIL: TestParse{index} ({seconds})\n" for index in range(failed))
    return f"{lines}FAIL\nFAIL\texample.com/parser\t{seconds}\nFAIL"


def npm_run(failed: int, seconds: str) -> str:
    return (
        "> parser@1.4.2 test\n> jest\n\n"
        f"Tests:       {failed} failed, {20 - failed} passed, 20 total\n"
        f"Time:        {seconds}\nRan all test suites."
    )


def mvn_run(failures: int, seconds: str) -> str:
    return (
        f"[ERROR] Tests run: 31, Failures: {failures}, Errors: 0, Skipped: 0, "
        f"Time elapsed: {seconds} - in com.example.ParserTest\n"
        f"[INFO] Total time:  {seconds}\n"
        "[INFO] Finished at: 2026-11-23T05:41:07Z\n[INFO] BUILD FAILURE"
    )


def ls_long(size: int, clock: str = "05:41") -> str:
    return (
        "total 24\n"
        f"-rw-r--r-- 1 ci ci {size:>6} Nov 23 {clock} out.log\n"
        "-rw-r--r-- 1 ci ci    220 Nov 23 05:12 setup.cfg"
    )


def git_status(modified: int) -> str:
    files = "".join(f"\tmodified:   src/mod_{index}.py\n" for index in range(modified))
    return f"On branch main\nChanges not staged for commit:\n{files}"


def traceback_at(line: int, address: str = "0x7f3a9c2d10") -> str:
    return (
        "Traceback (most recent call last):\n"
        f'  File "/repo/src/parser.py", line {line}, in parse\n'
        "    return table[key]\n"
        f"KeyError: <Token object at {address}>"
    )


#: (one run, a rerun that moved only what is volatile, a run whose meaning changed)
OUTPUTS = {
    "pytest": (
        pytest_run(9, "0.52s"),
        pytest_run(9, "13.07s", "pytest-of-ci/pytest-4"),
        pytest_run(7, "0.52s"),
    ),
    "unittest": (unittest_run(3, "0.004s"), unittest_run(3, "1.250s"), unittest_run(2, "0.004s")),
    "cargo": (cargo_run(3, "0.00s"), cargo_run(3, "2.41s"), cargo_run(2, "0.00s")),
    "go test": (go_run(3, "0.012s"), go_run(3, "1.5s"), go_run(2, "0.012s")),
    "npm test": (npm_run(5, "1.234 s"), npm_run(5, "3.9 s"), npm_run(4, "1.234 s")),
    "mvn": (mvn_run(2, "0.034 s"), mvn_run(2, "12.5 s"), mvn_run(1, "0.034 s")),
    "ls -l": (ls_long(1024), ls_long(1024), ls_long(4096)),
    "git status": (git_status(2), git_status(2), git_status(3)),
    "traceback": (traceback_at(42), traceback_at(42, "0x55d1e0a9f8"), traceback_at(57)),
    "server": (
        "Serving on http://localhost:8731 (pid 4242)",
        "Serving on http://localhost:51102 (pid 77)",
        "Serving on http://localhost:8731 (pid 4242), 2 workers",
    ),
    "download": (
        "\r 10%|█         | 10/100 [00:01<00:09, 9.8it/s]\r100%|██████████| 100/100 "
        "[00:10<00:00, 9.9it/s]\nsaved model.bin (420 MB)",
        "100%|██████████| 100/100 [00:07<00:00, 14.2it/s]\nsaved model.bin (420 MB)",
        "100%|██████████| 100/100 [00:07<00:00, 14.2it/s]\nsaved model.bin (512 MB)",
    ),
    "time": (
        "real\t0m0.003s\nok 3 checks",
        "real\t0m1.250s\nok 3 checks",
        "real\t0m0.003s\nok 4 checks",
    ),
}


@pytest.mark.parametrize("tool", list(OUTPUTS))
def test_a_rerun_that_moved_only_volatile_details_is_the_same_result(tool: str) -> None:
    first, rerun, _ = OUTPUTS[tool]
    assert normalize_output(first) == normalize_output(rerun)
    assert result_fingerprint(first) == result_fingerprint(rerun)


@pytest.mark.parametrize("tool", list(OUTPUTS))
def test_a_number_that_means_something_is_kept(tool: str) -> None:
    first, _, changed = OUTPUTS[tool]
    assert result_fingerprint(first) != result_fingerprint(changed)


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("Report 5 failures", "Report 3 failures"),
        ("import 12 modules", "import 13 modules"),
        ("support: 2 platforms", "support: 4 platforms"),
    ],
)
def test_a_mask_word_inside_another_word_masks_nothing(first: str, second: str) -> None:
    assert result_fingerprint(first) != result_fingerprint(second)


def _alarms(steps: list[tuple[str, str]]) -> list[object]:
    driver = Driver(stuck())
    decisions = [driver.step("bash", {"command": command}, output) for command, output in steps]
    return [decision for decision in decisions if isinstance(decision, Warn | Block | Stop)]


@pytest.mark.parametrize(
    "runs",
    [
        [pytest_run(failed, "0.5s") for failed in (9, 7, 5, 3, 1)],
        [mvn_run(failures, "1.2 s") for failures in (6, 5, 4, 3, 2)],
        [ls_long(size) for size in (1024, 2048, 4096, 8192, 16384, 32768)],
        [go_run(failed, "0.1s") for failed in (5, 4, 3, 2, 1)],
    ],
    ids=["pytest 9→7→5→3→1", "mvn", "ls -l growing", "go test"],
)
def test_progress_on_the_same_command_is_never_refused(runs: list[str]) -> None:
    assert _alarms([("make check", output) for output in runs]) == []


def test_identical_reruns_that_differ_in_timings_pids_and_paths_are_still_a_loop() -> None:
    reruns = [
        ("make check", pytest_run(9, f"0.{index}2s", f"pytest-of-ci/pytest-{index}"))
        for index in range(6)
    ]
    alarms = _alarms(reruns)
    assert alarms
    assert isinstance(alarms[-1], Block | Stop)


def test_the_same_edit_made_again_is_not_progress_though_the_file_grew() -> None:
    # SWE-agent applying one edit over and over: the line count moves by the edit itself.
    driver = Driver(stuck())
    decisions = []
    for size in range(40, 46):
        view = f"[File: /repo/Caller.java ({size} lines total)]\n" + "\n".join(
            f"{line}: handle(response, {line % 3});" for line in range(30, 40)
        )
        decisions.append(driver.step("edit", {"command": "edit 38:38\nhandle(response);"}, view))
    assert isinstance(decisions[-1], Block | Stop)


_TEXT = st.text(
    alphabet=st.sampled_from(list("abcxyz 0123456789.:-_/=#\n\tmsµ<>[]()%|█")), max_size=200
)


#: Pieces of every kind of volatile span and of what comes near one, for ASCII texts.
_PIECES = st.sampled_from(
    [
        *"0123456789abcdefABCDEFpPtTls/[]=_~*#-.:<> \t\nxmhZ",
        *("ms", "sec", "hours", "MiB/s", "it/s", "0x", "pid ", "Process=", "thread #", "port:"),
        *("PORT ", "localhost:", "127.0.0.1:", "0.0.0.0:", "[::1]:", "sh: line ", "/tmp/"),
        *("/var/folders/", "/private/var/folders/", "tmp", "2024-01-02", "T10:20:30", "deadbeef"),
        "12345678-abcd-1234-ef00-123456789abc",
    ]
)
#: More of what stands near a span: units and their neighbours, zones, fractions, separators,
#: the other quotes and spaces a temp path ends at, words that start like a pid or a port.
_NEIGHBOURS = st.sampled_from(
    [
        *",+iBkKMGrodnuw'\"`)\x0b\x0c\r",
        *("secs", "second", "seconds", "min", "minutes", "hr", "hrs", "us", "ns", "kB/s", "B/s"),
        *("/s", "GiB/s", "pid=", "Thread:", "Port ", "PID ", "Pid#", "[::]:", "/var/tmp/"),
        *("tmpab", " 10:20", ":30", ".123", ",5", "+05:30", "-0800", "3m2.5s", "12:34<56:07"),
        *("1.5 kB/s", "12", "1234", "99999", "abcdef", "f00d", "===", "__init__", "important"),
    ]
)


@given(st.lists(_PIECES, max_size=40).map("".join))
def test_ascii_text_is_masked_as_by_every_branch_in_turn(text: str) -> None:
    # ASCII text is scanned with the branches dispatched on their first character.
    assert _dispatched(True).pattern.sub(_mask, text) == _EVERY_BRANCH.pattern.sub(_mask, text)


@given(st.lists(_PIECES | _NEIGHBOURS, max_size=40).map("".join), st.booleans())
def test_the_scan_finds_the_spans_the_pattern_finds(text: str, rules: bool) -> None:
    # The compiled build finds the volatile spans of ASCII text with a scan written by hand;
    # the pattern is its definition. Both builds run the scan here.
    pattern = _dispatched(rules).pattern
    assert spans(text, rules) == [
        bound for found in pattern.finditer(text) for bound in found.span()
    ]


@pytest.mark.parametrize("run", ["1", "12", "123", "1234", "12345", "0", "00", "1234567"])
@pytest.mark.parametrize(
    "after",
    [
        *("-01-02", ":30:45", ":30", "x1f", ".0.0.0:80", "27.0.0.1:80", ".5s", "ms", " s"),
        *("-abcd-1234-ef00-123456789abc", "abcdef0", "ABCDEF-", "f", "g", ":12<34:56", "m2s"),
        *("abCDEF1-abcd-1234-ef00-123456789abc", "ABCDEF1-abcd-1234-ef00-123456789abc"),
        *(" kB/s", "%", ".", "-", "", " x", "_", "=="),
        # The first letter of every unit: a duration's, a rate's; and each after a space.
        *("\tms", "us", "ns", "h", "it/s", "kB/s", "KiB/s", "MB/s", "GB/s", "B/s", "\tit/s"),
        *(" ms", " us", " ns", " h", " it/s", " KiB/s", " MB/s", " GB/s", " B/s", "\th", " "),
    ],
)
def test_the_scan_finds_a_span_that_starts_inside_a_run_of_digits(run: str, after: str) -> None:
    # A span that starts at a digit after the first of its run (``1234:30:45`` holds the clock
    # ``34:30:45``): the scan passes over the rest of a run only where none can.
    for text in (run + after, f"a{run}{after}", f" {run}{after} "):
        for rules in (False, True):
            pattern = _dispatched(rules).pattern
            assert spans(text, rules) == [
                bound for found in pattern.finditer(text) for bound in found.span()
            ], text


def _masked_at_once(text: str) -> str:
    """``text`` masked in one scan of the lines with a digit (or of all, with a temp path)."""
    if "tmp" in text or "/var/folders" in text:
        return _pattern(text).pattern.sub(_mask, text)
    lines = text.split("\n")
    marked = [index for index, line in enumerate(lines) if _ASCII_DIGIT.search(line)]
    if not marked:
        return text
    chosen = "\n".join(lines[index] for index in marked)
    masked = _pattern(chosen).pattern.sub(_mask, chosen).split("\n")
    for index, line in zip(marked, masked, strict=True):
        lines[index] = line
    return "\n".join(lines)


@given(st.lists(st.lists(_PIECES | _TEXT, max_size=12).map("".join), max_size=30))
def test_lines_masked_one_by_one_and_remembered_are_masked_as_at_once(lines: list[str]) -> None:
    text = "\n".join(lines)
    assert _mask_text(text) == _masked_at_once(text)
    assert _mask_text(text) == _masked_at_once(text)  # the lines remembered, this time


@given(st.lists(st.lists(_PIECES | _NEIGHBOURS, max_size=12).map("".join), max_size=30))
def test_ascii_lines_masked_by_the_scan_are_masked_as_at_once(lines: list[str]) -> None:
    # The compiled build masks ASCII lines one by one with the scan: the rules too where the
    # lines scanned are short or one draws three glyphs of one. Both builds run it. A line holds
    # no line break (``["0\n===="]`` is two lines, of which only the first has a digit).
    lines = [line.replace("\n", " ") for line in lines]
    text = "\n".join(lines)
    every = "tmp" in text or "/var/folders" in text
    assert "\n".join(masked_lines(lines, every)) == _masked_at_once(text)


@given(
    st.lists(
        st.lists(
            st.sampled_from(
                [
                    "tmp",
                    "/var/folders",
                    "t",
                    "m",
                    "tm",
                    "mp",
                    "/",
                    "/v",
                    "/var/folder",
                    "x" * 7,
                    "é",
                ]
            ),
            max_size=8,
        ).map("".join),
        max_size=6,
    )
)
def test_the_lines_are_asked_what_their_text_joined_is_asked(lines: list[str]) -> None:
    # Compiled, whether a temp path is named and whether all is ASCII are read from the lines
    # (eight characters at a time), not from them joined. Both builds run it.
    text = "\n".join(lines)
    assert names_temp_path(lines) == ("tmp" in text or "/var/folders" in text)
    assert all_ascii(lines) == text.isascii()


@pytest.mark.parametrize("glyph", "=-_~*#")
def test_a_long_line_draws_a_rule_of_each_glyph_at_any_position(glyph: str) -> None:
    # Three glyphs of one (a rule) beside a rule of mixed glyphs, which is masked only when a
    # line scanned draws three of one; past SHORT characters, and at each position of the
    # eight the compiled test reads at once, and of the last ones it reads one by one.
    for offset in range(24):
        rule = f"{'x' * offset}{glyph * 3}"
        for line in (f"{rule} =-=-=- 1 {'y' * 260}", f"1 =-=-=- {'y' * 260}{rule}"):
            assert masked_lines([line], False) == [_masked_at_once(line)]


#: What long lines are made of near the eight bytes the compiled test of a rule reads at once:
#: runs of one glyph, cut anywhere; glyphs mixed (a rule only when a line draws three of one).
_RULE_PIECES = st.sampled_from(["=", "==", "-", "--", "#", "~~", "*", "_", "=-=-=-", "x", " ", "."])


@given(st.lists(st.lists(_RULE_PIECES, max_size=40).map("".join), min_size=1, max_size=6))
def test_long_lines_draw_a_rule_wherever_its_glyphs_fall(lines: list[str]) -> None:
    # Past SHORT characters, the rules are masked only if a line scanned draws three glyphs of
    # one in a row (compiled: found eight positions at a time). Each line has a digit, to be
    # scanned, and is long enough for the rules to be decided by its glyphs.
    lines = [f"{line} 1{'y' * 260}" for line in lines]
    text = "\n".join(lines)
    assert "\n".join(masked_lines(lines, False)) == _masked_at_once(text)


@pytest.mark.parametrize(
    "lines",
    [
        ["a 1 ==== b", "é 2"],  # short: the rules too
        [f"x 1 =-=-=- {'y' * 300}", "é 2"],  # long, and no line draws one: no rules
        [f"x 1 =-=-=- {'y' * 300}", "é === 2"],  # one is drawn where the line is not ASCII
        [f"x 1 =-=-=- {'y' * 300}", "é ─── 2", "z 3 ~~~~"],
        [f"x 1 =-=-=- {'y' * 300}", "é ─── 2"],  # a wide rule is no ASCII one
        ["é /tmp/abc 1", "tmpab12cd34 x", "no digit"],  # a temp path: every line
    ],
)
def test_lines_not_all_ascii_take_the_rules_the_pattern_chose_for_them_all(
    lines: list[str],
) -> None:
    assert _masked_lines(lines) == _mask_text("\n".join(lines)).split("\n")


#: What stands in a line that is not ASCII: letters, a digit that is not ASCII, a wide rule, an
#: emoji, a no-break space.
_WIDE = st.sampled_from(["é", "µs", "٣", "───", "━━━━", "😀", "\xa0", "日本"])


@given(
    st.lists(
        st.lists(_PIECES | _NEIGHBOURS | _WIDE, max_size=12).map("".join), min_size=1, max_size=12
    )
)
def test_lines_not_all_ascii_are_masked_as_the_pattern_masks_them_joined(lines: list[str]) -> None:
    # Compiled, when some lines are not ASCII, the ASCII ones are masked by the scan with the
    # rules the pattern chose for them all, the others by the pattern. Both builds run it.
    lines = [line.replace("\n", " ") for line in lines]
    text = "\n".join(lines)
    for _ in range(2):  # the second time, the lines are remembered
        assert _masked_lines(lines) == _mask_text(text).split("\n")


@given(st.lists(_PIECES | _NEIGHBOURS, max_size=12).map("".join), st.booleans())
def test_the_scan_masks_each_span_as_the_definition_does(text: str, rules: bool) -> None:
    # Compiled, each span the scan finds is masked from its characters (``mask``); ``_masked``
    # is the definition, and what the regular expressions mask with. Both builds run it.
    found = spans(text, rules)
    for index in range(0, len(found), 2):
        start, end = found[index], found[index + 1]
        assert mask(text, start, end) == _masked(text, start, end)


@given(st.lists(_PIECES | _NEIGHBOURS | _TEXT, max_size=60).map("".join))
def test_a_results_preview_is_its_normalized_text_folded_and_cut(text: str) -> None:
    # The preview joins the normalized lines with spaces: they are folded, masked or not.
    lines, _, _ = _sample(text)
    assert _analyze_result(text, False, None).preview == _shorten("\n".join(lines))


@given(st.lists(_PIECES | _NEIGHBOURS, max_size=40).map("".join))
def test_the_argument_scan_finds_what_the_pattern_finds(text: str) -> None:
    # The compiled build looks for a uuid or a timestamp in an ASCII argument with a scan.
    # Both builds run it.
    expected = _may_be_volatile(text) and _ARGUMENT_VOLATILE.search(text) is not None
    assert volatile_argument(text) == expected
    assert volatile_argument(f"x {text}") == (
        _may_be_volatile(f"x {text}") and _ARGUMENT_VOLATILE.search(f"x {text}") is not None
    )


@given(_TEXT)
def test_masking_is_idempotent(text: str) -> None:
    once = normalize_output(text)
    assert normalize_output(once) == once


@given(
    st.integers(min_value=0, max_value=10**6),
    st.integers(min_value=0, max_value=10**6),
    st.sampled_from(
        ["{} failed", "Failures: {}", "size {} bytes", "line {}", "v1.{}.0", "{} total"]
    ),
)
def test_changing_a_kept_number_changes_the_result(first: int, second: int, shape: str) -> None:
    same = first == second
    assert (
        result_fingerprint(shape.format(first)) == result_fingerprint(shape.format(second))
    ) == same


@given(
    st.floats(min_value=0, max_value=9999, allow_nan=False).map(lambda value: f"{value:.3f}"),
    st.integers(min_value=1, max_value=99999),
    st.integers(min_value=1, max_value=65535),
)
def test_changing_a_volatile_span_does_not(seconds: str, pid: int, port: int) -> None:
    text = f"server up on localhost:{port} (pid {pid}) in {seconds}s\n3 routes"
    assert result_fingerprint(text) == result_fingerprint(
        "server up on localhost:80 (pid 1) in 0s\n3 routes"
    )


def test_the_scan_is_linear_on_runs_that_match_nothing() -> None:
    # Long runs of digits or hex digits that no branch matches (a word character after them,
    # or an unfinished progress bar): each run is read once, not from each of its positions.
    hostile = (
        "1" * 20_000 + "g",
        "a" * 20_000 + "g",
        "1a" * 10_000 + "g",
        "1" * 10_000 + ":12<" + "3" * 10_000 + "x",
        "1" * 10_000 + " " + "s" * 10_000,
    )
    for text in hostile:
        started = time.perf_counter()
        spans(text, True)
        assert time.perf_counter() - started < 0.5  # interpreted too (quadratic: seconds)


def test_masking_is_linear_on_hostile_input() -> None:
    # Long runs of what almost matches (digits, hex, rule glyphs): no backtracking blow-up.
    for unit in ("1" * 50_000, "a1" * 25_000, "=-" * 25_000, "1." * 25_000, "0x" * 25_000):
        started = time.perf_counter()
        normalize_output(unit)
        assert time.perf_counter() - started < 0.5
