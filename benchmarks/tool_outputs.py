"""Tool results that change every call, for the benchmarks that time a tool call and its result
(``bench_stuck`` and the peer comparison): realistic test-runner output, so that no cache of a
result seen before makes the work trivially cheap."""

from __future__ import annotations


def short_result(index: int) -> str:
    """A 3-line test run, its figures different every call."""
    failed = 1 + index % 7
    return (
        f"FAILED tests/test_api.py::test_case_{index % 97} - AssertionError: "
        f"assert {index} == {index + 1}\n"
        f"{failed} failed, {40 + index % 13} passed in {1 + index % 9}.{index % 100:02d}s\n"
        f"exit code 1 (run {index})"
    )


def long_result(index: int) -> str:
    """About 1 KB of test output: per-file progress lines, a failure, a summary."""
    lines = [
        "============================= test session starts ==============================",
        f"platform linux -- Python 3.11.7, pytest-8.3.{index % 5}, pluggy-1.5.0",
        f"rootdir: /work/repo  collected {120 + index % 50} items",
    ]
    lines += [
        f"tests/test_mod_{(index + file) % 40:02d}.py {'.' * (8 + (index + file) % 9)}"
        f"{'F' if file == index % 6 else ''} [{10 * (file + 1):3d}%]"
        for file in range(9)
    ]
    lines += [
        "=================================== FAILURES ===================================",
        f"___ test_handler_{index % 211} ___",
        f"E   AssertionError: expected status 200, got {400 + index % 100} (case {index})",
        f"=== 1 failed, {119 + index % 50} passed in {2 + index % 7}.{index % 100:02d}s ===",
    ]
    return "\n".join(lines)
