"""repeats(): the same action and result N times in a row, and the ladder every detector climbs."""

from __future__ import annotations

import pytest
from detector_driver import Driver

from haltwise import (
    Block,
    Progress,
    RunStarted,
    Stop,
    StuckError,
    TurnStarting,
    Warn,
)
from haltwise.engine.detectors import repeats, stuck
from haltwise.engine.errors import InvalidValueError, error_for
from haltwise.engine.limits import max_turns


def test_nudge_then_refuse_then_stop() -> None:
    driver = Driver(repeats(3))
    same = ("find_file", {"name": "JsonParser"}, 'No matches found for "JsonParser" in /repo')
    assert not isinstance(driver.step(*same), Warn)
    assert not isinstance(driver.step(*same), Warn)
    warn = driver.step(*same)
    assert isinstance(warn, Warn)
    assert "find_file JsonParser" in warn.message
    assert "3 times in a row" in warn.message
    assert warn.limit == "repeats(3)"
    block = driver.step(*same)
    assert isinstance(block, Block)
    assert block.call.name == "find_file"
    assert "Refused" in block.reason
    stop = driver.step(*same)
    assert isinstance(stop, Stop)
    assert stop.outcome.reason == "stuck.repeat"
    assert stop.outcome.limit == "repeats(3)"
    assert isinstance(error_for(stop.outcome), StuckError)


def test_results_that_change_are_progress_not_a_loop() -> None:
    driver = Driver(repeats(3))
    for page in range(20):
        window = "\n".join(f"{page * 100 + line}: code line {page}-{line}" for line in range(30))
        decision = driver.step("scroll_down", {}, window)
        assert not isinstance(decision, Warn | Block | Stop)


def test_a_result_that_only_moved_its_numbers_is_the_same_result() -> None:
    # The same edit applied again and again: the file grows, the view shows the same code.
    driver = Driver(repeats(3))
    decisions = []
    for size in range(40, 46):
        view = f"[File: /repo/Caller.java ({size} lines total)]\n" + "\n".join(
            f"{line}: if (responseException.getContent() != null) {{ handle({line % 3}); }}"
            for line in range(1, 12)
        )
        decisions.append(driver.step("edit", {"command": "edit 194:194\n..."}, view))
    assert any(isinstance(decision, Warn) for decision in decisions)
    assert isinstance(decisions[-1], Stop | Block)


def test_volatile_fields_and_thoughts_do_not_make_calls_different() -> None:
    driver = Driver(repeats(3))
    decisions = [
        driver.step(
            "http_get",
            {"url": "https://x.test/a", "request_id": f"req-{i}", "thought": f"try {i}"},
            f"503 Service Unavailable at 2024-05-0{i + 1}T10:00:0{i}Z (pid {1000 + i})",
        )
        for i in range(3)
    ]
    assert isinstance(decisions[-1], Warn)


def test_raw_json_arguments_equal_mapping_arguments() -> None:
    driver = Driver(repeats(3))
    driver.step("read", '{"b": 1, "a": "x"}', "same")
    driver.step("read", {"a": "x", "b": 1}, "same")
    assert isinstance(driver.step("read", ' {"a":"x","b":1} ', "same"), Warn)


def test_progress_event_resets_the_ladder() -> None:
    driver = Driver(repeats(3))
    same: tuple[str, dict[str, object], str] = ("run_tests", {}, "3 failed")
    for _ in range(3):
        driver.step(*same)
    driver.governor.handle(Progress(metric="failing_tests", value=2))
    assert not isinstance(driver.step(*same), Block | Stop)


def test_a_new_user_prompt_resets() -> None:
    driver = Driver(repeats(3))
    same: tuple[str, dict[str, object], str] = ("run_tests", {}, "3 failed")
    for _ in range(3):
        driver.step(*same)
    driver.governor.handle(RunStarted(prompt="now try this"))
    assert not isinstance(driver.step(*same), Warn | Block | Stop)
    assert not isinstance(driver.step(*same), Warn | Block | Stop)


def test_another_result_after_the_nudge_clears_it() -> None:
    driver = Driver(repeats(3))
    same = ("cat", {"path": "a.py"}, "print(1)")
    for _ in range(3):
        driver.step(*same)
    driver.step("cat", {"path": "b.py"}, "entirely different content here")
    assert not isinstance(driver.step(*same), Block | Stop)


def test_polling_tools_have_their_own_threshold() -> None:
    driver = Driver(repeats(3, polling_tools={"tail_log"}, polling_n=6))
    decisions = [driver.step("tail_log", {}, "waiting for server") for _ in range(6)]
    assert not any(isinstance(decision, Warn) for decision in decisions[:5])
    assert isinstance(decisions[5], Warn)


def test_without_the_ladder_it_stops_at_once() -> None:
    driver = Driver(repeats(2, ladder=False))
    driver.step("ls", {}, "a b")
    stop = driver.step("ls", {}, "a b")
    assert isinstance(stop, Stop)
    assert "Stuck" in stop.outcome.message


def test_shadow_mode_records_and_never_interferes() -> None:
    driver = Driver(repeats(2, shadow=True))
    decisions = [driver.step("ls", {}, "a b") for _ in range(8)]
    assert not any(isinstance(decision, Warn | Block | Stop) for decision in decisions)
    assert len(driver.governor.shadow_trips) == 1
    assert "Stuck" in driver.governor.shadow_trips[0].message


def test_repr_echoes_what_was_written() -> None:
    assert repr(repeats(3)) == "repeats(3)"
    assert repr(repeats(4, polling_tools={"tail"}, polling_n=9)) == (
        "repeats(4, polling_tools={'tail'}, polling_n=9)"
    )
    assert repr(max_turns(30) | repeats(5)) == "max_turns(30) | repeats(5)"


@pytest.mark.parametrize("bad", [0, 1, -3, True, "3", 2.5])
def test_bad_thresholds_name_the_valid_values(bad: object) -> None:
    with pytest.raises(InvalidValueError, match=r"repeats\(n\)"):
        repeats(bad)  # type: ignore[arg-type]


def test_composes_with_other_limits() -> None:
    driver = Driver(max_turns(3) | stuck())
    for index in range(3):
        assert not isinstance(driver.step("ls", {"i": index}, f"out {index}"), Stop)
    stop = driver.governor.handle(TurnStarting())
    assert isinstance(stop, Stop)
    assert stop.outcome.reason == "turn_limit"
