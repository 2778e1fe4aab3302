"""A stopped run resumes with the counts it had, in one process, with the default ledger: a
new ``Governor`` (or ``Guard``), with a memory ledger of its own, restores the checkpoint its
outcome names (``Governor(limits).restore(outcome.checkpoint)``, as the README has it)."""

from __future__ import annotations

import pytest

from haltwise import Governor, Guard, LedgerError, Status, max_tool_calls, max_turns
from haltwise.engine import ledger as ledger_module
from haltwise.engine.decisions import CONTINUE, Stop
from haltwise.engine.events import RunStarted, TurnStarting
from haltwise.engine.ledger import MemoryLedger
from haltwise.testing import FakeClock


def stopped_run(run_id: str) -> Guard:
    """A guard whose run ``run_id`` stopped at its turn limit, after 3 turns, 2 tool calls and
    one model call."""
    guard = Guard(max_turns(3))
    with guard.run("long task", run_id=run_id) as run:
        run.model_request("m", max_tokens=50, input_tokens=40)
        run.model_response(model="m", input_tokens=40, output_tokens=12)
        for number in range(5):
            run.turn()
            if number < 2:
                run.tool_call("grep", {"n": number}, f"c{number}")
                run.tool_result("grep", "found", f"c{number}")
    assert run.outcome is not None and run.outcome.reason == "turn_limit"
    return guard


def test_a_new_governor_with_its_own_memory_ledger_resumes_the_run() -> None:
    outcome = stopped_run("resume-1").governor.outcome
    assert outcome is not None and outcome.checkpoint == "memory:resume-1"

    resumed = Governor(max_turns(5) | max_tool_calls(3))
    resumed.restore(outcome.checkpoint)
    usage = resumed.usage
    assert resumed.run_id == "resume-1"
    assert (usage.turns, usage.tool_calls, usage.model_calls) == (3, 2, 1)
    assert (usage.input_tokens, usage.output_tokens) == (40, 12)
    assert resumed.handle(TurnStarting()) is CONTINUE
    assert resumed.handle(TurnStarting()) is CONTINUE
    stop = resumed.handle(TurnStarting())
    assert isinstance(stop, Stop) and stop.outcome.reason == "turn_limit"
    assert stop.outcome.usage.turns == 5


def test_the_checkpoint_outlives_the_governor_that_saved_it() -> None:
    checkpoint = stopped_run("resume-2").governor.outcome.checkpoint  # type: ignore[union-attr]
    assert checkpoint is not None
    # The guard, its governor and its ledger are gone; the process keeps the checkpoint.
    resumed = Governor(max_turns(3), clock=FakeClock(), ledger=MemoryLedger())
    resumed.restore(checkpoint)
    assert resumed.usage.turns == 3
    assert isinstance(resumed.handle(TurnStarting()), Stop)  # the same limit stops it again


def test_a_new_guard_resumes_within_a_run_it_starts() -> None:
    """As the adapters' ``run(resume=...)`` does: the run starts, then takes up the counts."""
    checkpoint = stopped_run("resume-3").governor.outcome.checkpoint  # type: ignore[union-attr]
    assert checkpoint is not None
    guard = Guard(max_turns(4))
    with guard.run("go on") as run:
        guard.governor.restore(checkpoint)
        for _ in range(3):
            run.turn()
    assert run.outcome is not None
    assert run.outcome.reason == "turn_limit"
    assert run.outcome.usage.turns == 4  # three before, one more now
    assert run.outcome.usage.tool_calls == 2


def test_a_checkpoint_saved_again_is_the_latest() -> None:
    first = Governor(max_turns(1))
    first.handle(RunStarted("task", run_id="resume-4"))
    first.handle(TurnStarting())
    first.handle(TurnStarting())  # stops: checkpoint with one turn
    second = Governor(max_turns(2))
    second.handle(RunStarted("task", run_id="resume-4"))
    for _ in range(3):
        second.handle(TurnStarting())  # stops: checkpoint with two turns
    resumed = Governor(max_turns(9))
    resumed.restore("memory:resume-4")
    assert resumed.usage.turns == 2


def test_a_checkpoint_that_is_nowhere_in_this_process_says_how_to_keep_one() -> None:
    governor = Governor(max_turns(3))
    with pytest.raises(LedgerError, match="no checkpoint 'memory:never-saved'") as missing:
        governor.restore("memory:never-saved")
    assert "another process" in str(missing.value)
    assert "ledger='sqlite:///PATH'" in str(missing.value)
    with pytest.raises(LedgerError, match="another kind of ledger") as foreign:
        governor.restore("sqlite:some-run")
    assert "Governor(limits, ledger='sqlite:///PATH')" in str(foreign.value)
    assert governor.run_id == ""  # nothing was restored


def test_memory_keeps_the_latest_checkpoints(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ledger_module, "MEMORY_CHECKPOINTS", 2)
    one, two = MemoryLedger(), MemoryLedger()
    refs = [(one if n % 2 else two).save_checkpoint(f"kept-{n}", {"n": n}) for n in range(3)]
    with pytest.raises(LedgerError, match="no checkpoint 'memory:kept-0'.*latest 2 are kept"):
        one.load_checkpoint(refs[0])
    assert [two.load_checkpoint(ref)["n"] for ref in refs[1:]] == [1, 2]


def test_a_restored_run_that_stops_again_keeps_counting() -> None:
    checkpoint = stopped_run("resume-5").governor.outcome.checkpoint  # type: ignore[union-attr]
    assert checkpoint is not None
    resumed = Governor(max_turns(4))
    resumed.restore(checkpoint)
    stop = None
    while stop is None:
        decision = resumed.handle(TurnStarting())
        stop = decision if isinstance(decision, Stop) else None
    assert stop.outcome.status is Status.ABANDONED
    assert stop.outcome.checkpoint == checkpoint
    again = Governor(max_turns(10))
    again.restore(checkpoint)
    assert again.usage.turns == 4
