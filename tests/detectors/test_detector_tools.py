"""same_errors, cycles, scattered and no_progress, on small scripted runs."""

from __future__ import annotations

from detector_driver import Driver

from haltwise import Block, Injected, Stop, TurnEnded, TurnStarting, Warn
from haltwise.engine.decisions import Decision
from haltwise.engine.detectors import cycles, no_progress, same_errors, scattered


def _alarm(decision: Decision) -> bool:
    return isinstance(decision, Warn | Block | Stop)


# --------------------------------------------------------------------------------------------
# same_errors


def test_the_same_action_failing_the_same_way_trips_however_the_message_varies() -> None:
    driver = Driver(same_errors(3))
    decisions = [
        driver.step(
            "bash",
            {"command": "python run.py"},
            f"Traceback (most recent call last):\n  File 'run.py', line {line}\n"
            f"KeyError: 'attempt {line}'",
            exit_code=1,
        )
        for line in range(3)
    ]
    assert isinstance(decisions[-1], Warn)
    assert "KeyError" in decisions[-1].message
    assert "exit 1" in decisions[-1].message


def test_a_success_between_failures_clears_the_count() -> None:
    driver = Driver(same_errors(3))
    fail = (
        "bash",
        {"command": "make"},
        "make: *** [all] Error 2",
    )
    driver.step(*fail, exit_code=2)
    driver.step(*fail, exit_code=2)
    driver.step("bash", {"command": "make"}, "ok", exit_code=0)
    assert not _alarm(driver.step(*fail, exit_code=2))


def test_different_errors_are_not_the_same_error() -> None:
    driver = Driver(same_errors(3))
    for error in ("ValueError: x", "TypeError: y", "KeyError: z"):
        decision = driver.step("bash", {"command": "python t.py"}, error, exit_code=1)
    assert not _alarm(decision)


# --------------------------------------------------------------------------------------------
# cycles


def test_an_a_b_cycle_learning_nothing_trips() -> None:
    driver = Driver(cycles(3))
    decisions = []
    for _ in range(3):
        decisions.append(driver.step("open", {"path": "a.py"}, "class A: pass"))
        decisions.append(driver.step("open", {"path": "b.py"}, "class B: pass"))
    assert isinstance(decisions[-1], Warn)
    assert "the same 2 calls" in decisions[-1].message
    # The next call of the cycle is refused, then the run stops.
    assert isinstance(driver.step("open", {"path": "a.py"}, "class A: pass"), Block)
    stop = driver.step("open", {"path": "b.py"}, "class B: pass")
    assert isinstance(stop, Stop)
    assert stop.outcome.reason == "stuck.cycle"


def test_a_longer_period_is_found() -> None:
    driver = Driver(cycles(3))
    searches = ["Alpha.java", "Beta.java", "Gamma.java", "Delta.java", "Epsilon.java"]
    decisions = [
        driver.step("search_dir", {"name": name}, f'No matches found for "{name}" in /repo')
        for _ in range(3)
        for name in searches
    ]
    assert any(isinstance(decision, Warn) for decision in decisions)
    warning = next(decision for decision in decisions if isinstance(decision, Warn))
    assert "the same 5 calls" in warning.message


def test_a_cycle_whose_results_move_on_is_progress() -> None:
    # cd into a folder, list it: the same two commands, a new listing each time.
    driver = Driver(cycles(3))
    for depth in range(8):
        driver.step("cd", {"path": ".."}, "")
        decision = driver.step("ls", {}, f"folder_{depth}_alpha\nfolder_{depth}_beta")
        assert not _alarm(decision)


# --------------------------------------------------------------------------------------------
# scattered


def test_the_same_call_scattered_within_the_window_trips() -> None:
    driver = Driver(scattered(4, window=20))
    decisions = []
    for turn in range(4):
        decisions.append(driver.step("open", {"path": "Config.java"}, "class Config {}"))
        decisions.append(
            driver.step("search", {"q": f"term{turn}"}, f"{turn} hits: file_{turn}.py")
        )
    assert any(isinstance(decision, Warn) for decision in decisions)


def test_duplicates_that_left_the_window_are_forgotten() -> None:
    driver = Driver(scattered(3, window=4))
    for turn in range(12):
        driver.step("open", {"path": "Config.java"}, "class Config {}")
        for other in range(4):
            decision = driver.step("read", {"n": turn * 10 + other}, f"chunk {turn}-{other} text")
            assert not _alarm(decision)


# --------------------------------------------------------------------------------------------
# no_progress


def test_turns_that_bring_nothing_new_trip() -> None:
    driver = Driver(no_progress(4))
    driver.step("open", {"path": "a.py"}, "alpha\nbeta")
    driver.step("open", {"path": "b.py"}, "gamma\ndelta")
    decisions = [
        driver.step("open", {"path": path, "view": turn}, text)
        for turn in range(3)
        for path, text in (("a.py", "alpha\nbeta"), ("b.py", "gamma\ndelta"))
    ]
    assert any(isinstance(decision, Warn) for decision in decisions)


def test_an_echo_of_the_call_is_not_news() -> None:
    driver = Driver(no_progress(4))
    farewells = ["Goodbye!", "Session closed.", "Thank you.", "Bye now.", "The end.", "Done."]
    decisions = [
        driver.step("bash", {"command": f'echo "{text}"'}, f"{text}\n") for text in farewells
    ]
    assert any(isinstance(decision, Warn) for decision in decisions)


def test_failing_searches_for_different_names_are_not_news() -> None:
    driver = Driver(no_progress(4))
    decisions = [
        driver.step("find_file", {"name": name}, f'No matches found for "{name}" in /repo')
        for name in ("A.java", "B.java", "C.java", "D.java", "E.java", "F.java")
    ]
    assert any(isinstance(decision, Warn) for decision in decisions)


def test_batch_edits_across_files_are_progress() -> None:
    # sed -i prints nothing: each new, successful, quiet call may have changed state.
    driver = Driver(no_progress(3))
    for index in range(15):
        decision = driver.step(
            "bash", {"command": f"sed -i 's/old/new/' src/module_{index}.py"}, ""
        )
        assert not _alarm(decision)


def test_a_user_message_is_news() -> None:
    driver = Driver(no_progress(3))
    driver.step("ls", {}, "a b")
    for _ in range(2):
        driver.step("ls", {"all": True}, "a b")
    driver.governor.handle(Injected(text="look in src/ instead"))
    assert not _alarm(driver.step("ls", {"long": True}, "a b"))


def _talk(driver: Driver) -> Decision:
    driver.governor.handle(TurnStarting())
    return driver.governor.handle(TurnEnded(text="thinking..."))


def test_turns_without_a_tool_call_neither_count_nor_break_the_count() -> None:
    # Turns of talk (or format errors) bring no result to judge: monologue counts those.
    driver = Driver(no_progress(3))
    driver.step("ls", {}, "a.py\nb.py")
    assert not any(_alarm(_talk(driver)) for _ in range(10))
    driver.step("ls", {"all": True}, "a.py\nb.py")
    _talk(driver)
    driver.step("ls", {"long": True}, "a.py\nb.py")
    _talk(driver)
    assert isinstance(driver.step("ls", {"sort": "size"}, "a.py\nb.py"), Warn)


def test_a_refused_call_is_a_turn_without_progress() -> None:
    driver = Driver(no_progress(2))
    driver.step("ls", {}, "a.py\nb.py")
    decisions = [driver.step("ls", {"all": True}, "a.py\nb.py") for _ in range(4)]
    assert [type(decision).__name__ for decision in decisions] == [
        "Continue",
        "Warn",
        "Block",
        "Stop",
    ]


def test_polling_tools_are_not_counted() -> None:
    driver = Driver(no_progress(3, polling_tools={"job_status"}))
    driver.step("job_status", {"id": 7}, "running")
    for _ in range(10):
        assert not _alarm(driver.step("job_status", {"id": 7}, "running"))


def test_the_same_tool_failing_the_same_way_whatever_its_arguments() -> None:
    driver = Driver(same_errors(3, tool_n=3))
    decisions = [
        driver.step("bash", {"command": f"javac {name}.java"}, "bash: javac: command not found")
        for name in ("A", "B", "C")
    ]
    assert isinstance(decisions[-1], Warn)
    assert "whatever its arguments" in decisions[-1].message
    assert repr(same_errors(3, tool_n=4)) == "same_errors(3, tool_n=4)"
