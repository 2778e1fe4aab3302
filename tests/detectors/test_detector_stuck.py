"""stuck(): the measured default composite; and laws every detector keeps, as properties."""

from __future__ import annotations

import pytest
from detector_driver import Driver
from hypothesis import given, settings
from hypothesis import strategies as st

from haltwise import Block, Governor, RunStarted, Stop, Warn
from haltwise.engine.detectors import DEFAULTS, stuck
from haltwise.engine.errors import InvalidValueError
from haltwise.engine.events import ToolCall, ToolResult, TurnEnded, TurnStarting
from haltwise.engine.limits import any_of, max_cost, max_turns
from haltwise.testing import FakeClock, deep_size


def test_the_repr_echoes_the_call() -> None:
    assert repr(stuck()) == "stuck()"
    assert repr(stuck(repeat=5, cycle=None)) == "stuck(repeat=5, cycle=None)"
    assert repr(max_turns(30) | stuck()) == "max_turns(30) | stuck()"
    assert repr(stuck() | max_cost("2.00")) == "stuck() | max_cost('2.00')"
    assert repr(stuck(polling_tools={"tail_log"})) == "stuck(polling_tools={'tail_log'})"


def test_it_holds_one_detector_per_threshold() -> None:
    reasons = {leaf.reason for leaf in stuck().leaves()}
    assert reasons == {
        "stuck.repeat",
        "stuck.same_error",
        "stuck.cycle",
        "stuck.scattered",
        "stuck.no_progress",
        "stuck.monologue",
        "stuck.degenerate",
    }
    assert len(list(stuck(monologue=None, degenerate=None).leaves())) == 5
    assert set(DEFAULTS) == {
        "repeat",
        "same_error",
        "same_tool_error",
        "cycle",
        "scattered",
        "no_progress",
        "monologue",
        "degenerate",
        "paging",
        "no_effect",
        "oscillation",
        "recurring",
    }
    # Measured and found not to pay on the corpus: available, out of the defaults.
    assert DEFAULTS["no_effect"] is DEFAULTS["oscillation"] is DEFAULTS["recurring"] is None
    opted = {leaf.reason for leaf in stuck(no_effect=3, oscillation=2, recurring=5).leaves()}
    assert opted - reasons == {"stuck.no_effect", "stuck.oscillation", "stuck.recurring"}


def test_each_detector_stops_with_its_own_reason() -> None:
    driver = Driver(stuck())
    decisions = [driver.step("ls", {"path": "."}, "a b c") for _ in range(6)]
    stop = next(decision for decision in decisions if isinstance(decision, Stop))
    assert stop.outcome.reason == "stuck.repeat"
    assert stop.outcome.limit == "repeats(3)"


@pytest.mark.parametrize(
    "options",
    [
        {"repeat": 0},
        {"cycle": "3"},
        {"no_progress": 2.5},
        {"repeat": True},
        dict.fromkeys(DEFAULTS),
    ],
)
def test_bad_thresholds_are_refused(options: dict[str, object]) -> None:
    with pytest.raises(InvalidValueError):
        stuck(**options)  # type: ignore[arg-type]


def test_it_can_sit_under_all_of() -> None:
    limit = stuck() & max_turns(2)
    driver = Driver(limit)
    for _ in range(4):
        decision = driver.step("ls", {}, "same")
    assert isinstance(decision, Stop)


# --------------------------------------------------------------------------------------------
# Properties

names = st.sampled_from(["ls", "cat", "grep", "edit", "run"])
arguments = st.dictionaries(st.sampled_from(["path", "q", "n"]), st.integers(0, 3), max_size=2)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(names, arguments), min_size=1, max_size=40))
def test_results_that_bring_new_text_are_progress(calls: list[tuple[str, dict[str, int]]]) -> None:
    """Whatever the calls, a run whose every result is new text is never stopped."""
    driver = Driver(stuck(monologue=None, degenerate=None))
    for index, (name, args) in enumerate(calls):
        result = f"result number {index}: " + "word" * (index % 7) + f" page {chr(65 + index % 26)}"
        decision = driver.step(name, args, f"{result}\nnew line {index} of text")
        assert not isinstance(decision, Warn | Block | Stop)


@settings(max_examples=6, deadline=None)
@given(st.integers(min_value=60, max_value=400), st.integers(min_value=0, max_value=10**6))
def test_state_is_bounded_whatever_the_history(length: int, seed: int) -> None:
    """Detectors keep O(window) state: after hundreds of steps it is about what it was after 50
    (a history kept whole would be several times larger)."""
    limit = stuck()
    governor = Governor(limit, clock=FakeClock())
    governor.handle(RunStarted())
    leaves = list(limit.leaves())
    sizes = []
    for index in range(length):
        call_id = f"c{index}"
        governor.handle(TurnStarting())
        governor.handle(ToolCall("read", {"chunk": seed + index}, call_id=call_id))
        text = "\n".join(f"row {seed} item {index} line {line}: value" for line in range(20))
        governor.handle(ToolResult("read", text, call_id=call_id))
        governor.handle(TurnEnded())
        if index in (49, length - 1):
            sizes.append(deep_size([governor.slot(leaf).state for leaf in leaves]))
    assert sizes[-1] <= sizes[0] * 1.5


def test_the_same_events_give_the_same_decisions() -> None:
    def run() -> list[str]:
        driver = Driver(any_of(stuck(), max_turns(50)))
        script = [("ls", {"p": index % 3}, f"out {index % 3}") for index in range(30)]
        return [type(driver.step(*step)).__name__ for step in script]

    assert run() == run()


# --------------------------------------------------------------------------------------------
# One note per action per event


def _failing_edit(driver: Driver) -> object:
    return driver.step(
        "edit_file",
        {"path": "calc.py", "old_text": "return a-b", "new_text": "return a+b"},
        "old_text was not found in calc.py",
        is_error=True,
    )


def test_two_detectors_on_the_same_failing_call_give_one_note() -> None:
    # repeats and same_errors both see the third identical failure: the model reads one note.
    driver = Driver(stuck())
    decisions = [_failing_edit(driver) for _ in range(3)]
    note = decisions[-1]
    assert isinstance(note, Warn)
    assert note.message.count("You seem to be stuck") == 1
    # The detector that kept quiet still climbed its ladder: a refusal, then a stop.
    assert isinstance(_failing_edit(driver), Block)
    assert isinstance(_failing_edit(driver), Stop)


def test_one_governors_note_does_not_silence_anothers() -> None:
    limit = stuck()
    first, second = Driver(limit), Driver(limit)
    notes = []
    for _ in range(3):
        notes.append(_failing_edit(first))
        notes.append(_failing_edit(second))
    assert isinstance(notes[-2], Warn)
    assert isinstance(notes[-1], Warn)
