"""``haltwise audit --jobs N``: worker processes give the report one process gives, byte for byte.

The tests that break a reader patch it in this process: worker processes forked from it (the
default on Linux up to Python 3.13) inherit the patch; where workers start otherwise they skip.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

import pytest

from haltwise.audit import readers
from haltwise.audit.readers import find_files
from haltwise.cli import main

DATA = Path(__file__).parent / "data"
ALL = [str(DATA / name) for name in ("swe-agent", "mini", "tau", "openai", "haltwise", "broken")]


#: For the tests that patch a reader here and need the workers to see the patch.
forked_workers = pytest.mark.skipif(
    multiprocessing.get_start_method() != "fork",
    reason="worker processes are not forked here, so they cannot inherit a patched reader",
)


def _audit(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    status = main(["audit", *args, "--no-progress"])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


@pytest.mark.parametrize("options", [[], ["--json"], ["--suggest"], ["--json", "--suggest"]])
def test_two_processes_report_what_one_does(
    capsys: pytest.CaptureFixture[str], options: list[str]
) -> None:
    one = _audit(capsys, *ALL, *options, "--jobs", "1")
    two = _audit(capsys, *ALL, *options, "--jobs", "2")
    assert one == two
    assert one[0] == 1  # the broken files are errors, named on stderr
    assert "truncated.traj at line 1" in one[2]
    assert "no tool calls found" in one[2]


def test_the_html_page_is_the_same_with_two_processes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for jobs in ("1", "2"):
        _audit(capsys, *ALL, "--html", str(tmp_path / f"{jobs}.html"), "--jobs", jobs)
    assert (tmp_path / "1.html").read_bytes() == (tmp_path / "2.html").read_bytes()


def test_a_slice_of_the_real_traces(traces_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    files = [str(path) for path, _ in find_files([traces_dir])][::50]
    one = _audit(capsys, *files, "--json", "--jobs", "1")
    assert _audit(capsys, *files, "--json", "--jobs", "2") == one
    assert '"runs": [' in one[1]


@pytest.mark.parametrize("given", ["-1", "two", "1.5", ""])
def test_a_bad_number_of_jobs_is_a_one_line_usage_error(
    capsys: pytest.CaptureFixture[str], given: str
) -> None:
    status, out, err = _audit(capsys, *ALL, "--jobs", given)
    assert status == 2
    assert out == ""
    assert err == (
        f"haltwise audit: --jobs {given!r} is not a number of processes: give a whole number "
        "from 1, or 0 or auto for one per CPU\n"
    )


@pytest.mark.parametrize("given", ["0", "auto"])
def test_zero_or_auto_is_one_process_per_cpu(
    capsys: pytest.CaptureFixture[str], given: str
) -> None:
    assert _audit(capsys, *ALL, "--jobs", given) == _audit(capsys, *ALL)


@forked_workers
def test_a_reader_that_crashes_is_a_one_line_error_naming_the_file(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def crash(*args: Any) -> Iterator[Any]:
        raise KeyError("trajectory")
        yield  # a generator, as the readers are

    monkeypatch.setitem(readers._READERS, "swe-agent", crash)
    one = _audit(capsys, *ALL, "--jobs", "1")
    assert _audit(capsys, *ALL, "--jobs", "2") == one
    status, out, err = one
    assert status == 1
    assert "haltwise audit: " in out  # the other files are still reported
    crashes = [line for line in err.splitlines() if "internal error" in line]
    assert crashes == [
        f"haltwise audit: {DATA / 'swe-agent' / 'run1' / name}: could not be audited: internal "
        "error (KeyError: 'trajectory'); this is a bug in haltwise, please report it"
        for name in sorted(os.listdir(DATA / "swe-agent" / "run1"))
        if name.endswith(".traj")
    ] + [
        f"haltwise audit: {DATA / 'broken' / 'truncated.traj'}: could not be audited: internal "
        "error (KeyError: 'trajectory'); this is a bug in haltwise, please report it"
    ]


@forked_workers
def test_a_worker_that_dies_is_a_one_line_error_naming_the_file(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def die(*args: Any) -> Iterator[Any]:
        os._exit(9)
        yield

    monkeypatch.setitem(readers._READERS, "tau-bench", die)
    tau = str(DATA / "tau")
    status, out, err = _audit(capsys, tau, str(DATA / "mini"), "--jobs", "2")
    assert status == 1
    assert out == ""
    (line,) = err.splitlines()
    assert line.startswith("haltwise audit: a worker process died while auditing ")
    assert str(DATA) in line


@forked_workers
def test_a_pool_that_breaks_between_two_files_names_the_file_it_refused(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # A worker that dies while no file is in flight breaks the pool for the next one handed
    # over: that one was never audited, and the error names it (not an internal error).
    handed: list[Any] = []
    submit = ProcessPoolExecutor.submit

    def breaking(pool: ProcessPoolExecutor, *args: Any, **kwargs: Any) -> Any:
        handed.append(args[1])
        if len(handed) == 3:
            raise BrokenProcessPool("a child process terminated abruptly")
        return submit(pool, *args, **kwargs)

    monkeypatch.setattr(ProcessPoolExecutor, "submit", breaking)
    status, _, err = _audit(capsys, *ALL, "--jobs", "2")
    assert status == 1
    (line,) = [line for line in err.splitlines() if "worker process died" in line]
    assert line == f"haltwise audit: a worker process died while auditing {handed[2]}"
