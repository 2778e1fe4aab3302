"""What the dashboard makes of the ledger: snapshots sent only on change, stale runs flagged,
a run's timeline from its heartbeats, and what a stop saved."""

from __future__ import annotations

from typing import Any

from haltwise.dashboard.watch import Watcher
from haltwise.engine.ledger import Budget, MemoryLedger, RunInfo


def test_the_snapshot_goes_out_only_when_the_ledger_changed() -> None:
    now = [1_000.0]
    ledger = MemoryLedger(clock=lambda: now[0])
    watcher = Watcher(ledger, clock=lambda: now[0])
    ledger.register(RunInfo("r1", keys=("team-a",)))
    assert watcher.poll()
    assert not watcher.poll()
    ledger.charge(Budget("team-a", "turns"), 1, 10)
    assert watcher.poll()
    assert watcher.state["budgets"][0]["spent_text"] == "1"
    now[0] += 16  # no heartbeat for longer than STALE_SECONDS: flagged
    assert watcher.poll()
    assert watcher.state["live"][0]["stale"]


def test_the_timeline_takes_each_heartbeats_events_once_and_names_gaps() -> None:
    now = [1_000.0]
    ledger = MemoryLedger(clock=lambda: now[0])
    watcher = Watcher(ledger, clock=lambda: now[0])
    ledger.register(RunInfo("r1"))
    watcher.poll()  # seen from its start

    def beat(*events: list[Any], cost: str, status: str = "running") -> None:
        now[0] += 2
        activity = {"turn_limit": 5, "events": list(events), "warnings": []}
        ledger.heartbeat("r1", {"turns": 1, "cost": cost, "activity": activity}, status)
        watcher.poll()

    beat(
        [1, 1_001.0, "TurnStarting", "", "Continue"],
        [2, 1_001.5, "ToolCall", "ls", "Continue"],
        cost="0.01",
    )
    watcher.poll()  # the same heartbeat read again adds nothing
    beat([5, 1_003.0, "ToolCall", "ls", "Warn"], cost="0.03", status="waiting")
    ledger.finish(
        "r1",
        {
            "status": "cancelled",
            "reason": "killed",
            "message": "Stopped.",
            "usage": {"turns": 1, "cost": "0.03"},
        },
    )
    watcher.poll()
    detail = watcher.run_detail("r1")
    assert detail is not None
    kinds = [(entry["kind"], entry["label"]) for entry in detail["timeline"]]
    assert kinds == [
        ("started", ""),
        ("TurnStarting", ""),
        ("ToolCall", "ls"),
        ("missed", "2 events not seen"),
        ("ToolCall", "ls"),
        ("waiting", "for a human's answer"),
        ("ended", "killed"),
    ]
    assert [point["cost"] for point in detail["spend"]] == [0.0, 0.01, 0.03]
    assert detail["run"]["outcome"]["reason"] == "killed"


def test_what_a_stop_saved_is_what_its_limits_still_allowed() -> None:
    ledger = MemoryLedger()
    ledger.register(RunInfo("r1"))
    limits = [
        {"limit": "max_turns(10)", "reason": "turn_limit", "used": 4, "cap": 10},
        {"limit": "max_cost('5')", "reason": "cost_limit", "used": "1.25", "cap": "5"},
        {"limit": "max_time(60)", "reason": "time_limit", "used": 12.0, "cap": 60.0},
        {"limit": "max_cost('9', key='team')", "reason": "cost_limit", "used": "1", "cap": "9"},
    ]
    ledger.heartbeat("r1", {"turns": 4, "activity": {"limits": limits}}, "running")
    ledger.finish("r1", {"status": "cancelled", "reason": "killed", "usage": {"turns": 4}})
    ledger.register(RunInfo("r2"))
    ledger.heartbeat("r2", {"turns": 4, "activity": {"limits": limits}}, "running")
    ledger.finish("r2", {"status": "completed", "reason": "completed", "usage": {"turns": 4}})
    watcher = Watcher(ledger)
    watcher.poll()
    saved = {run["run_id"]: run["saved"] for run in watcher.state["recent"]}
    assert saved == {"r1": ["6 turns", "$3.75"], "r2": []}
