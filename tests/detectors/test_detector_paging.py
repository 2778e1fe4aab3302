"""Paging through a file: progress while the pages are new, not news when they are re-read,
and ``paging()``, a budget on the first kind, off in ``stuck()`` unless asked."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from detector_driver import Driver

from haltwise import Block, Progress, Stop, Warn
from haltwise.audit.readers import read_paths
from haltwise.audit.replay import replay
from haltwise.audit.runs import Run
from haltwise.engine.decisions import Decision
from haltwise.engine.detectors import no_progress, paging, stuck
from haltwise.engine.errors import InvalidValueError
from haltwise.engine.limits import Limit
from haltwise.pricing import Prices

_WORDS = [
    "alpha",
    "beta",
    "gamma",
    "delta",
    "epsilon",
    "zeta",
    "theta",
    "kappa",
    "lambda",
    "sigma",
    "omega",
    "rho",
    "tau",
    "phi",
    "chi",
    "psi",
]

#: A 2,200-line source file whose lines differ in words, not only in their digits.
SOURCE = [
    f"    {a}_{b} = {c}({d}, {a})"
    for a, b, c, d in itertools.islice(itertools.product(_WORDS, repeat=4), 2200)
]


def view(first: int, size: int = 100) -> str:
    """The file viewer's window at line ``first`` (1-based), as SWE-agent prints it."""
    lines = SOURCE[first - 1 : first - 1 + size]
    above, below = first - 1, len(SOURCE) - (first - 1 + len(lines))
    body = "\n".join(f"{first + index}:{line}" for index, line in enumerate(lines))
    return (
        f"[File: /repo/sympy/simplify/fu.py ({len(SOURCE)} lines total)]\n"
        f"({above} more lines above)\n{body}\n({below} more lines below)"
    )


def _alarm(decision: Decision) -> bool:
    return isinstance(decision, Warn | Block | Stop)


@pytest.mark.parametrize("limit", [stuck(), stuck(paging=15)], ids=repr)
def test_scrolling_through_new_pages_is_progress(limit: Limit) -> None:
    # sympy__sympy-17139 in the corpus: open, goto 566, then 13 scroll_down, each a new page.
    driver = Driver(limit)
    steps = [("open", {"command": "open sympy/simplify/fu.py"}, view(1))]
    steps.append(("goto", {"command": "goto 566"}, view(516)))
    steps += [
        ("scroll_down", {"command": "scroll_down"}, view(616 + 100 * page)) for page in range(13)
    ]
    for name, arguments, result in steps:
        assert not _alarm(driver.step(name, arguments, result))


# --------------------------------------------------------------------------------------------
# Re-reading is not news


def test_scrolling_back_over_pages_already_read_is_not_news() -> None:
    driver = Driver(no_progress(3))
    driver.step("open", {"command": "open fu.py 100"}, view(100))
    driver.step("scroll_down", {"command": "scroll_down"}, view(200))
    decisions = [
        driver.step("scroll_up", {"command": "scroll_up"}, view(100)),
        driver.step("scroll_down", {"command": "scroll_down"}, view(200)),
        # Another window over the same region: every line in it was read already.
        driver.step("goto", {"command": "goto 150"}, view(150)),
    ]
    assert isinstance(decisions[-1], Warn)


def test_a_window_half_over_new_lines_is_news() -> None:
    driver = Driver(no_progress(2))
    driver.step("open", {"command": "open fu.py 100"}, view(100))
    for first in (150, 200, 250):
        assert not _alarm(driver.step("goto", {"command": f"goto {first}"}, view(first)))


def test_the_same_search_again_is_not_news() -> None:
    hits = "\n".join(
        f"Line {number}:{SOURCE[number - 1]}" for number in (120, 341, 877, 1290, 1655)
    )
    found = f'Found 5 matches for "beta" in /repo/fu.py:\n{hits}\nEnd of matches for "beta"'
    driver = Driver(no_progress(3))
    driver.step("search_file", {"command": 'search_file "beta"'}, found)
    driver.step("open", {"command": "open fu.py 120"}, view(120, 10))
    decisions = [
        driver.step("search_file", {"command": 'search_file "beta" fu.py'}, found),
        driver.step("goto", {"command": "goto 120"}, view(120, 10)),
        driver.step("search_file", {"command": 'search_file "beta"'}, found),
    ]
    assert isinstance(decisions[-1], Warn)


def test_lines_seen_in_another_order_are_not_news() -> None:
    listing = [f"src/{word}/{other}.py" for word in _WORDS[:4] for other in _WORDS[4:8]]
    driver = Driver(no_progress(2))
    driver.step("bash", {"command": "find src -name '*.py'"}, "\n".join(listing))
    decisions = [
        driver.step(
            "bash", {"command": "find src -name '*.py' | sort -r"}, "\n".join(listing[::-1])
        ),
        driver.step("bash", {"command": "ls src/*/*.py"}, "\n".join(sorted(listing))),
    ]
    assert isinstance(decisions[-1], Warn)


# --------------------------------------------------------------------------------------------
# paging(): a budget on paging


def test_paging_nudges_refuses_then_stops_however_new_the_pages() -> None:
    driver = Driver(paging(15))
    decisions = [
        driver.step("scroll_down", {"command": "scroll_down"}, view(1 + 100 * page))
        for page in range(17)
    ]
    assert not any(_alarm(decision) for decision in decisions[:14])
    note = decisions[14]
    assert isinstance(note, Warn)
    assert "15 times in a row" in note.message
    assert "budget" in note.message
    refusal = decisions[15]
    assert isinstance(refusal, Block)
    assert "budget" in refusal.reason
    stop = decisions[16]
    assert isinstance(stop, Stop)
    assert stop.outcome.reason == "stuck.paging"
    assert stop.outcome.limit == "paging(15)"


def test_another_action_starts_the_count_again() -> None:
    driver = Driver(paging(4))
    for page in range(3):
        driver.step("scroll_down", {"command": "scroll_down"}, view(1 + 100 * page))
    driver.step("search_file", {"command": 'search_file "tau"'}, "Found 3 matches")
    for page in range(3):
        decision = driver.step("scroll_down", {"command": "scroll_down"}, view(301 + 100 * page))
        assert not _alarm(decision)


def test_a_progress_report_starts_the_count_again() -> None:
    driver = Driver(paging(4))
    for page in range(4):
        decision = driver.step("scroll_down", {"command": "scroll_down"}, view(1 + 100 * page))
    assert isinstance(decision, Warn)
    driver.governor.handle(Progress(metric="rows read", value=400))
    for page in range(3):
        decision = driver.step("scroll_down", {"command": "scroll_down"}, view(401 + 100 * page))
        assert not _alarm(decision)


def test_polling_tools_have_a_larger_budget() -> None:
    driver = Driver(paging(3, polling_tools={"tail_log"}))
    decisions = [driver.step("tail_log", {"job": 7}, f"log line {index}") for index in range(9)]
    assert not any(_alarm(decision) for decision in decisions[:8])
    assert isinstance(decisions[8], Warn)


def test_paging_is_off_in_stuck_unless_asked() -> None:
    assert "stuck.paging" not in {leaf.reason for leaf in stuck().leaves()}
    assert "stuck.paging" in {leaf.reason for leaf in stuck(paging=15).leaves()}
    assert repr(stuck(paging=15)) == "stuck(paging=15)"
    assert repr(paging()) == "paging(15)"
    with pytest.raises(InvalidValueError):
        paging(1)


# --------------------------------------------------------------------------------------------
# On the recorded runs


@pytest.mark.parametrize("limit", [stuck(), stuck(paging=15)], ids=repr)
def test_the_recorded_scrolling_is_neither_cut_nor_nudged(traces_dir: Path, limit: Limit) -> None:
    # sympy__sympy-17139: 13 scroll_down in a row, a new page each time (three recorded runs).
    paths = sorted((traces_dir / "swe-agent-gpt4-lite").glob("run*/sympy__sympy-17139.traj"))
    assert paths
    for item in read_paths(paths, model="gpt-4-0125-preview"):
        assert isinstance(item, Run)
        (result,) = replay(item, [limit], pricer=Prices())
        assert result.stop_step is None, result.stop_message
        assert result.warn_step is None
        assert result.blocked == 0
