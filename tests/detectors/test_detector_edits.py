"""Edits with no effect, edits that oscillate, the same error recurring round a cycle; and
``stuck(profile=...)``, thresholds fitted to one's own runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from detector_driver import Driver

from haltwise import Block, Stop
from haltwise.engine.decisions import Decision, Warn
from haltwise.engine.detectors import (
    DEFAULTS,
    load_profile,
    no_effect,
    oscillation,
    recurring_errors,
    stuck,
)
from haltwise.engine.detectors._keys import is_edit
from haltwise.engine.errors import InvalidValueError

FAILING = "FAILED tests/test_parse.py::test_empty - AssertionError\n1 failed, 9 passed in 0.4s"


def _alarm(decision: Decision) -> bool:
    return isinstance(decision, Warn | Block | Stop)


@pytest.mark.parametrize(
    ("name", "arguments", "expected"),
    [
        ("edit", {"command": "edit 12:14\n    return x\nend_of_edit"}, True),
        ("str_replace_editor", {"command": "str_replace", "path": "a.py"}, True),
        ("str_replace_editor", {"command": "view", "path": "a.py"}, False),
        ("bash", {"command": "sed -i 's/a/b/' src/a.py"}, True),
        ("bash", "cat > fix.py <<'EOF'\nprint(1)\nEOF", True),
        ("bash", {"command": "python -m pytest -q"}, False),
        ("read_file", {"path": "a.py"}, False),
        # Names and first words are compared in lower case.
        ("Write_File", {"path": "a.py"}, True),
        ("bash", {"command": "  APPLY_PATCH <<'EOF'"}, True),
        ("\u00c9dit", {"path": "a.py"}, False),
    ],
)
def test_what_counts_as_an_edit(name: str, arguments: object, expected: bool) -> None:
    assert is_edit(name, arguments) is expected  # type: ignore[arg-type]


def test_the_same_check_after_edits_that_change_nothing_trips_no_effect() -> None:
    driver = Driver(no_effect(2))
    decisions = [driver.step("bash", {"command": "pytest -q"}, FAILING)]
    for attempt in range(3):
        decisions.append(
            driver.step("edit", {"command": f"edit 3:3\nx = {attempt}\nend_of_edit"}, "[File]")
        )
        decisions.append(driver.step("bash", {"command": "pytest -q"}, FAILING))
    assert not any(_alarm(decision) for decision in decisions[:4])
    assert isinstance(decisions[4], Warn)
    assert "the same result after 2 rounds of edits" in decisions[4].message
    assert isinstance(decisions[-1], Block | Stop)


def test_edits_that_move_the_check_are_progress() -> None:
    driver = Driver(no_effect(2))
    for failed in (5, 4, 3, 2, 1):
        driver.step("edit", {"command": f"edit 3:3\nx = {failed}\nend_of_edit"}, "[File]")
        decision = driver.step(
            "bash", {"command": "pytest -q"}, f"{failed} failed, {10 - failed} passed in 0.4s"
        )
        assert not _alarm(decision)


def test_rerunning_a_check_with_no_edit_between_is_not_counted_here() -> None:
    driver = Driver(no_effect(2))
    decisions = [driver.step("bash", {"command": "pytest -q"}, FAILING) for _ in range(5)]
    assert not any(_alarm(decision) for decision in decisions)


def test_a_change_undone_and_redone_trips_oscillation() -> None:
    driver = Driver(oscillation(2))
    first = {"command": "edit 3:3\nreturn a\nend_of_edit"}
    second = {"command": "edit 3:3\nreturn b\nend_of_edit"}
    decisions = [driver.step("edit", edit, "[File: a.py]") for edit in (first, second, first)]
    assert not any(_alarm(decision) for decision in decisions)
    assert isinstance(driver.step("edit", second, "[File: a.py]"), Warn)


def test_the_same_edit_twice_in_a_row_is_not_an_oscillation() -> None:
    driver = Driver(oscillation(1))
    edit = {"command": "edit 3:3\nreturn a\nend_of_edit"}
    assert not any(_alarm(driver.step("edit", edit, "[File: a.py]")) for _ in range(3))


def test_the_same_error_recurring_round_a_cycle_trips_recurring_errors() -> None:
    driver = Driver(recurring_errors(3))
    decisions = []
    for attempt in range(3):
        decisions.append(driver.step("edit", {"command": f"edit 3:3\ny = {attempt}"}, "[File]"))
        decisions.append(
            driver.step(
                "python",
                {"command": "python reproduce.py"},
                f"Traceback (most recent call last):\n  line {attempt}\nKeyError: 'k{attempt}'",
            )
        )
    assert not any(_alarm(decision) for decision in decisions[:-1])
    assert isinstance(decisions[-1], Warn)
    assert "KeyError" in decisions[-1].message


# --------------------------------------------------------------------------------------------
# Profiles


def _write(tmp_path: Path, document: object) -> Path:
    path = tmp_path / "profile.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


def test_a_profile_replaces_the_defaults_and_explicit_thresholds_win(tmp_path: Path) -> None:
    path = _write(tmp_path, {"stuck": {"repeat": 6, "no_progress": 9, "paging": None}})
    assert load_profile(path) == {"repeat": 6, "no_progress": 9, "paging": None}
    limit = stuck(profile=path, no_progress=5)
    shown = {repr(leaf) for leaf in limit.leaves()}
    assert "repeats(6)" in shown
    assert "no_progress(5)" in shown
    assert repr(limit) == f"stuck(profile={str(path)!r}, no_progress=5)"


def test_a_looser_profile_lets_a_solved_agent_retry(tmp_path: Path) -> None:
    path = _write(tmp_path, {"stuck": {"repeat": 6, "scattered": 8, "no_progress": 8}})
    strict, loose = Driver(stuck()), Driver(stuck(profile=path))
    steps = [("bash", {"command": "make"}, "waiting for lock") for _ in range(4)]
    assert any(_alarm(strict.step(*step)) for step in steps)
    assert not any(_alarm(loose.step(*step)) for step in steps)


@pytest.mark.parametrize(
    ("content", "complaint"),
    [
        ("not json", "a JSON profile file"),
        ("[1, 2]", '"stuck" table'),
        ('{"stuck": {"repeats": 4}}', "stuck.repeats"),
        ('{"stuck": {"repeat": 1}}', "at least 2"),
        ('{"stuck": {"repeat": "4"}}', "an integer"),
    ],
)
def test_a_bad_profile_is_refused_naming_the_file(
    tmp_path: Path, content: str, complaint: str
) -> None:
    path = tmp_path / "agent.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(InvalidValueError) as raised:
        stuck(profile=path)
    assert "agent.json" in str(raised.value)
    assert complaint in str(raised.value)


def test_a_missing_profile_is_refused_naming_the_file(tmp_path: Path) -> None:
    with pytest.raises(InvalidValueError, match="nowhere.json"):
        stuck(profile=tmp_path / "nowhere.json")


def test_every_default_is_a_valid_profile_value(tmp_path: Path) -> None:
    path = _write(tmp_path, {"stuck": DEFAULTS})
    assert load_profile(path) == DEFAULTS
