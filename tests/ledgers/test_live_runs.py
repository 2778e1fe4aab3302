"""Live runs through a shared ledger: seen, stopped and answered from elsewhere.

A ``Guard`` on a SQLite or Redis ledger registers each run and heartbeats; another ledger object
on the same store (another process, in real use) lists it, stops it, or answers its question.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from typing import Any

import pytest

from haltwise import Guard, Status, max_tool_calls, max_turns
from haltwise.engine.errors import LedgerError
from haltwise.engine.ledger import MemoryLedger

from .conftest import LedgerFactory


def _wait_for(check: Any, seconds: float = 5.0) -> Any:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError("timed out waiting")


def test_a_run_is_registered_beats_and_records_its_outcome(make_shared: LedgerFactory) -> None:
    guard = Guard(max_turns(5, key="team"), ledger=make_shared(), heartbeat=0.05)
    other = make_shared()
    with guard.run("task", run_id="live-1") as run:
        run.turn()
        run.turn()
        info = _wait_for(lambda: [i for i in other.runs() if i.counts.get("turns") == 2])[0]
        assert (info.run_id, info.keys, info.status) == ("live-1", ("team",), "running")
        assert info.limits == "max_turns(5, key='team')"
    assert run.outcome is not None
    assert [i.run_id for i in other.runs()] == []
    (ended,) = other.runs(live=False)
    assert ended.outcome is not None
    assert ended.outcome["status"] == "completed"


def test_stop_from_elsewhere_ends_the_run_killed(make_shared: LedgerFactory) -> None:
    guard = Guard(max_turns(100), ledger=make_shared(), heartbeat=0.05)
    other = make_shared()
    with guard.run("task", run_id="live-2") as run:
        run.turn()
        assert other.kill("live-2", "enough for today") == ["live-2"]
        _wait_for(lambda: guard.governor.cancel_requested)
        run.turn()
    assert run.outcome is not None
    assert (run.outcome.status, run.outcome.reason) == (Status.CANCELLED, "killed")
    assert run.outcome.message == "The run was stopped from elsewhere: enough for today."
    assert run.outcome.checkpoint is not None


def test_a_run_waiting_on_a_call_notices_a_stop_within_a_heartbeat(
    make_shared: LedgerFactory,
) -> None:
    guard = Guard(max_turns(100), ledger=make_shared(), heartbeat=0.1)
    other = make_shared()

    async def hung_agent() -> Any:
        async with guard.arun("task", run_id="live-3") as run:
            await run.turn()
            await asyncio.sleep(60)  # a model call that never returns
        return run

    async def main() -> tuple[Any, float]:
        task = asyncio.create_task(hung_agent())
        await asyncio.sleep(0.3)
        told = time.monotonic()
        other.kill("live-3", "stop")
        run = await asyncio.wait_for(task, 5)
        return run, time.monotonic() - told

    run, took = asyncio.run(main())
    assert run.outcome.reason == "killed"
    assert took < 0.5


def test_a_headless_run_waits_for_approval_from_elsewhere(make_shared: LedgerFactory) -> None:
    guard = Guard(
        max_turns(2, on_limit="ask"), ledger=make_shared(), heartbeat=0.05, approval_timeout=0.5
    )
    other = make_shared()
    turns: list[int] = []

    def approve() -> None:
        (question,) = _wait_for(lambda: [p for p in other.pending("live-4") if p.answer is None])
        assert question.question == "You've used 2 turns. Continue?"
        assert question.choices == ("continue", "extend", "wrap_up", "abort")
        assert _wait_for(lambda: [i for i in other.runs() if i.status == "waiting"])
        other.answer("live-4", "extend", 2)

    approver = threading.Thread(target=approve)
    approver.start()
    with guard.run("task", run_id="live-4") as run:
        for _ in range(10):
            run.turn()
            turns.append(len(turns) + 1)
    approver.join()
    # Two turns, the question, two more turns, then the limit again: no answer means abort.
    assert turns == [1, 2, 3, 4]
    with pytest.raises(LedgerError, match=r"run 'live-4' is not running: it has ended"):
        other.answer("live-4", "abort")  # too late: the run has ended
    assert run.outcome is not None
    assert run.outcome.reason == "turn_limit"


def test_no_answer_in_time_stops_the_run(make_shared: LedgerFactory) -> None:
    guard = Guard(
        max_tool_calls(1, on_limit="ask"),
        ledger=make_shared(),
        heartbeat=0.05,
        approval_timeout=0.3,
    )
    with guard.run("task", run_id="live-5") as run:
        run.tool_call("t")
        run.tool_call("t")
    assert run.outcome is not None
    assert run.outcome.status is Status.ABANDONED
    assert "No answer came" in run.outcome.message


def test_a_memory_ledger_keeps_runs_to_this_process() -> None:
    guard = Guard(max_turns(1, on_limit="ask"), ledger=MemoryLedger())
    assert guard.live is False
    assert guard.prompter is None  # no UI: a limit that asks stops the run
    with guard.run("task") as run:
        run.turn()
        run.turn()
    assert run.outcome is not None
    assert run.outcome.reason == "turn_limit"


def test_heartbeats_carry_the_runs_activity_and_none_of_its_text(
    make_shared: LedgerFactory,
) -> None:
    secret = "the-prompt-and-tool-output-stay-private"
    guard = Guard(max_turns(5) | max_tool_calls(1), ledger=make_shared(), heartbeat=60.0)
    other = make_shared()
    with guard.run(secret, run_id="live-a") as run:
        run.turn()
        run.model_request("gpt-4o", max_tokens=100)
        run.model_response(model="gpt-4o", input_tokens=30, output_tokens=12)
        run.tool_call("read_file", {"path": secret})
        run.tool_result("read_file", secret, is_error=True)
        run.turn_ended(secret)
        run.turn()
        run.tool_call("read_file", {"path": secret})  # over max_tool_calls(1): the run stops
    assert run.outcome is not None
    (ended,) = other.runs(live=False)
    # With a heartbeat a minute apart, only the last one (sent as the run ends) was made.
    assert ended.counts["turns"] == 2
    activity = ended.counts["activity"]
    events = [(kind, label, decision) for _, _, kind, label, decision in activity["events"]]
    assert events[:6] == [
        ("TurnStarting", "", "Continue"),
        ("ModelRequest", "gpt-4o", "Continue"),
        ("ModelResponse", "42 tokens", "Continue"),
        ("ToolCall", "read_file", "Continue"),
        ("ToolResult", "read_file (failed)", "Continue"),
        ("TurnEnded", "", "Continue"),
    ]
    assert events[-1][::2] == ("ToolCall", "Stop")
    numbers = [entry[0] for entry in activity["events"]]
    assert numbers == list(range(1, len(numbers) + 1))
    assert activity["turn_limit"] == 5
    assert {standing["limit"] for standing in activity["limits"]} == {
        "max_turns(5)",
        "max_tool_calls(1)",
    }
    assert secret not in json.dumps(ended.counts)


def test_a_stop_while_the_run_waits_for_an_answer_ends_it_killed(
    make_shared: LedgerFactory,
) -> None:
    guard = Guard(
        max_turns(2, on_limit="ask"), ledger=make_shared(), heartbeat=0.05, approval_timeout=30
    )
    other = make_shared()

    def stop_when_it_waits() -> None:
        deadline = time.monotonic() + 5
        while not other.pending("live-6") and time.monotonic() < deadline:
            time.sleep(0.02)
        assert other.kill("live-6", "enough") == ["live-6"]

    stopper = threading.Thread(target=stop_when_it_waits)
    stopper.start()
    with guard.run("task", run_id="live-6") as run:
        for _ in range(5):
            run.turn()
    stopper.join()
    assert run.outcome is not None
    assert (run.outcome.status, run.outcome.reason) == (Status.CANCELLED, "killed")
    assert run.outcome.message == "The run was stopped from elsewhere: enough."
    assert run.outcome.usage.turns == 2
    assert other.killed("live-6") is None  # the flag ended with the run
