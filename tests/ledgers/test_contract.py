"""One contract, three ledgers: in memory, SQLite and a real redis-server.

Each test opens the ledger twice where it matters (two "processes" on one store): what one
spends, the other sees.
"""

from __future__ import annotations

import threading
import time

import pytest

from haltwise.engine.errors import LedgerError
from haltwise.engine.ledger import Budget, RunInfo

from .conftest import LedgerFactory

#: A daily budget whose window ends long after any run of these tests (2100-01-01).
TEAM = Budget("team-a", "nano_usd", "2099-12-31", 4_102_444_800.0)
TURNS = Budget("alice", "turns")


def test_checkpoints_round_trip(make_ledger: LedgerFactory) -> None:
    ref = make_ledger().save_checkpoint("r1", {"run": {"turns": 3}, "text": "é"})
    assert make_ledger().load_checkpoint(ref) == {"run": {"turns": 3}, "text": "é"}
    with pytest.raises(LedgerError, match="no checkpoint"):
        make_ledger().load_checkpoint(ref.replace("r1", "nope"))


def test_a_charge_is_granted_only_within_the_limit(make_ledger: LedgerFactory) -> None:
    one, two = make_ledger(), make_ledger()
    grants = [(one if n % 2 else two).charge(TURNS, 1, 3) for n in range(5)]
    assert [grant.granted for grant in grants] == [True, True, True, False, False]
    assert [grant.used for grant in grants] == [0, 1, 2, 3, 3]
    assert not one.charge(TURNS, 2, 4).granted  # 3 used + 2 > 4
    assert one.charge(TURNS, 1, 4).granted


def test_a_reservation_counts_until_it_is_committed_or_released(
    make_ledger: LedgerFactory,
) -> None:
    one, two = make_ledger(), make_ledger()
    held = one.reserve(TEAM, 600, 1_000, holder="run-1")
    assert (held.amount, held.used) == (600, 0)
    refused = two.reserve(TEAM, 500, 1_000, holder="run-2")
    assert (refused.granted, refused.used) == (False, 600)
    assert two.commit(TEAM, held.id, 250) == 250  # it cost less than its worst case
    later = two.reserve(TEAM, 500, 1_000, holder="run-2")
    assert later.granted
    two.release(TEAM, later.id)
    (state,) = [s for s in one.budgets() if s.budget.key == "team-a"]
    assert (state.spent, state.reserved, state.limit) == (250, 0, 1_000)
    assert state.budget == TEAM


def test_a_reservation_may_take_less_than_asked_but_not_less_than_its_minimum(
    make_ledger: LedgerFactory,
) -> None:
    ledger = make_ledger()
    ledger.charge(Budget("k", "total_tokens"), 700, 1_000)
    partial = ledger.reserve(Budget("k", "total_tokens"), 500, 1_000, holder="r", minimum=101)
    assert (partial.amount, partial.used) == (300, 700)
    refused = ledger.reserve(Budget("k", "total_tokens"), 500, 1_000, holder="r", minimum=1)
    assert not refused.granted


def test_settling_is_idempotent(make_ledger: LedgerFactory) -> None:
    one, two = make_ledger(), make_ledger()
    held = one.reserve(TEAM, 100, 1_000, holder="r")
    assert one.commit(TEAM, held.id, 80) == 80
    assert two.commit(TEAM, held.id, 80) == 80  # a retry after a lost reply
    assert one.spend(TEAM, 5, "op-1") == 85
    assert two.spend(TEAM, 5, "op-1") == 85
    two.release(TEAM, held.id)  # too late: it was spent
    assert one.spend(TEAM, 0, "op-2") == 85


def test_an_expired_reservation_is_released_and_still_spent_if_committed(
    make_ledger: LedgerFactory,
) -> None:
    one, two = make_ledger(), make_ledger()
    lapsing = one.reserve(TEAM, 400, 1_000, holder="dead", lease=0.2)
    kept = one.reserve(TEAM, 300, 1_000, holder="live", lease=0.2)
    two.heartbeat("live", {}, "running", lease=30)  # renews the live run's holds only
    time.sleep(0.4)
    assert two.reserve(TEAM, 701, 1_000, holder="other").granted is False  # 300 still held
    assert two.reserve(TEAM, 600, 1_000, holder="other").granted
    # The answer to the lapsed request came after all: it is spent, once.
    assert one.commit(TEAM, lapsing.id, 50) == 50 + 300 + 600
    assert one.commit(TEAM, kept.id, 300) == 50 + 300 + 600


def test_budgets_are_separate_by_key_metric_and_window(make_ledger: LedgerFactory) -> None:
    ledger = make_ledger()
    ledger.charge(Budget("a", "turns", "2026-11-23"), 2, 2)
    assert ledger.charge(Budget("a", "turns", "2026-11-24"), 2, 2).granted
    assert ledger.charge(Budget("b", "turns", "2026-11-23"), 2, 2).granted
    assert ledger.charge(Budget("a", "tool_calls", "2026-11-23"), 2, 2).granted
    states = {(s.budget.key, s.budget.metric, s.budget.window): s.spent for s in ledger.budgets()}
    assert states == {
        ("a", "turns", "2026-11-23"): 2,
        ("a", "turns", "2026-11-24"): 2,
        ("b", "turns", "2026-11-23"): 2,
        ("a", "tool_calls", "2026-11-23"): 2,
    }


def test_runs_register_beat_and_finish(make_ledger: LedgerFactory) -> None:
    one, two = make_ledger(), make_ledger()
    one.register(RunInfo("r1", host="h", pid=7, model="m", limits="max_turns(3)", keys=("a",)))
    one.register(RunInfo("r2", keys=("b",)))
    assert two.heartbeat("r1", {"turns": 2}, "waiting") is None
    live = {info.run_id: info for info in two.runs()}
    assert set(live) == {"r1", "r2"}
    assert (live["r1"].counts, live["r1"].status, live["r1"].pid) == ({"turns": 2}, "waiting", 7)
    assert live["r1"].heartbeat >= live["r1"].started > 0
    one.finish("r1", {"status": "completed", "reason": "completed"})
    assert [info.run_id for info in two.runs()] == ["r2"]
    ended = {info.run_id: info for info in two.runs(live=False)}
    assert ended["r1"].outcome == {"status": "completed", "reason": "completed"}
    assert ended["r1"].status == "completed"


def test_kill_flags_reach_a_run_by_id_by_key_or_all(make_ledger: LedgerFactory) -> None:
    one, two = make_ledger(), make_ledger()
    for run_id, key in (("r1", "a"), ("r2", "b"), ("r3", "b")):
        one.register(RunInfo(run_id, keys=(key,)))
    assert two.kill("r1", "enough") == ["r1"]
    assert one.heartbeat("r1", {}, "running") == "enough"
    assert one.killed("r2") is None
    assert sorted(two.kill(None, "budget", key="b")) == ["r2", "r3"]
    assert one.killed("r3") == "budget"
    assert sorted(two.kill(None, "all")) == ["r1", "r2", "r3"]


def test_only_live_runs_are_told_to_stop(make_ledger: LedgerFactory) -> None:
    one, two = make_ledger(), make_ledger()
    one.register(RunInfo("c2e94760a1b2c3d4", keys=("a",)))
    one.register(RunInfo("ended", keys=("a",)))
    one.finish("ended", {"status": "completed", "reason": "completed"})
    assert two.kill("c2e94760", "a shortened id") == []
    assert two.kill("never-ran", "no such run") == []
    assert two.kill("ended", "too late") == []
    assert [one.killed(run_id) for run_id in ("c2e94760", "never-ran", "ended")] == [None] * 3
    assert two.kill(None, "all") == ["c2e94760a1b2c3d4"]


def test_a_kill_flag_ends_with_its_run(make_ledger: LedgerFactory) -> None:
    one, two = make_ledger(), make_ledger()
    one.register(RunInfo("r1"))
    assert two.kill("r1", "enough") == ["r1"]
    one.finish("r1", {"status": "cancelled", "reason": "killed"})
    assert two.killed("r1") is None
    one.register(RunInfo("r1"))  # resumed: it runs on
    assert one.heartbeat("r1", {}, "running") is None
    # A run whose process died before it ended registers again when resumed: the flag that
    # was for the dead process does not stop the new one.
    assert two.kill("r1", "stuck") == ["r1"]
    one.register(RunInfo("r1"))
    assert one.heartbeat("r1", {}, "running") is None


def test_stop_all_reaches_every_live_run(make_ledger: LedgerFactory) -> None:
    one, two = make_ledger(), make_ledger()
    for number in range(150):
        one.register(RunInfo(f"r{number:03d}", keys=("a" if number % 3 else "b",)))
    assert len(one.runs()) == 100  # what a listing shows by default
    assert len(two.kill(None, "budget", key="a")) == 100
    assert len(two.kill(None, "all")) == 150
    assert all(one.killed(f"r{number:03d}") for number in range(150))


def test_a_heartbeat_records_again_a_run_the_ledger_lost(make_ledger: LedgerFactory) -> None:
    one, two = make_ledger(), make_ledger()
    info = RunInfo("lost", host="h", pid=7, keys=("a",))
    assert one.heartbeat("lost", {"turns": 1}, "running") is None
    assert two.runs() == []  # without its registration, a heartbeat records nothing
    one.heartbeat("lost", {"turns": 2}, "waiting", info=info)
    (found,) = two.runs()
    assert (found.run_id, found.pid, found.keys) == ("lost", 7, ("a",))
    assert (found.counts, found.status) == ({"turns": 2}, "waiting")
    assert found.heartbeat >= found.started > 0
    assert two.kill(None, "found again") == ["lost"]


def test_recent_runs_are_the_newest_first(make_ledger: LedgerFactory) -> None:
    one = make_ledger()
    for number in range(5):
        one.register(RunInfo(f"r{number}", started=1_000.0 + number))
        one.finish(f"r{number}", {"status": "completed", "reason": "completed"})
    assert [info.run_id for info in make_ledger().runs(live=False, limit=2)] == ["r4", "r3"]
    assert make_ledger().runs(live=False, limit=0) == []


def test_ended_runs_are_the_latest_ended_first_however_long_ago_they_started(
    make_ledger: LedgerFactory,
) -> None:
    one, two = make_ledger(), make_ledger()
    one.register(RunInfo("long", started=1_000.0))  # started an hour before the others
    for number in range(60):
        one.register(RunInfo(f"short-{number:02d}", started=4_600.0 + number))
        one.finish(f"short-{number:02d}", {"status": "completed", "reason": "completed"})
        time.sleep(0.001)  # each ends after the one before, on every ledger's clock
    assert two.ended_runs(limit=1)[0].run_id == "short-59"
    one.finish("long", {"status": "abandoned", "reason": "cost_limit"})
    ended = two.ended_runs(limit=50)
    assert [info.run_id for info in ended[:3]] == ["long", "short-59", "short-58"]
    assert len(ended) == 50
    assert all(not info.live for info in ended)
    # Resumed, a run is live again: no longer among the ended ones.
    one.register(RunInfo("short-59"))
    assert [info.run_id for info in two.ended_runs(limit=2)] == ["long", "short-58"]
    assert two.ended_runs(limit=0) == []


def test_any_run_kept_is_found_by_its_id_and_the_live_ones_counted(
    make_ledger: LedgerFactory,
) -> None:
    one, two = make_ledger(), make_ledger()
    for number in range(120):
        one.register(RunInfo(f"team-a/job-{number:03d}", started=1_000.0 + number))
    one.finish("team-a/job-000", {"status": "completed", "reason": "completed"})
    found = two.run_info("team-a/job-000")  # the oldest, and over: in no short listing
    assert found is not None
    assert (found.run_id, found.status, found.live) == ("team-a/job-000", "completed", False)
    assert two.run_info("team-a/job-119") == two.runs(limit=1)[0]
    assert two.run_info("team-a") is None
    assert two.live_count() == 119
    assert len(two.runs()) == 100


def test_an_answer_is_its_question_answered_even_if_the_run_ends_at_once(
    make_ledger: LedgerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    one, two = make_ledger(), make_ledger()
    one.register(RunInfo("r1"))
    one.ask("r1", "Go on?", ("continue", "abort"))
    # The run ends (its question goes) the moment the answer is taken: nothing is read after.
    monkeypatch.setattr(two, "pending", lambda run_id=None: [])
    answered = two.answer("r1", "continue")
    assert (answered.run_id, answered.question, answered.choices) == (
        "r1",
        "Go on?",
        ("continue", "abort"),
    )
    assert (answered.answer, answered.amount, answered.asked > 0) == ("continue", None, True)


def test_the_first_answer_wins(make_ledger: LedgerFactory) -> None:
    one, two = make_ledger(), make_ledger()
    one.register(RunInfo("r1"))
    with pytest.raises(LedgerError, match="run 'r1' is not waiting for an answer"):
        two.answer("r1", "continue")
    one.ask("r1", "You've used 3 turns. Continue?", ("continue", "extend", "wrap_up", "abort"))
    (open_question,) = two.pending()
    assert (open_question.question, open_question.answer) == (
        "You've used 3 turns. Continue?",
        None,
    )
    with pytest.raises(LedgerError, match="not a choice"):
        two.answer("r1", "maybe")
    answered = two.answer("r1", "extend", 2)
    assert (answered.answer, answered.amount) == ("extend", 2)
    with pytest.raises(LedgerError, match="already answered"):
        one.answer("r1", "abort")
    assert one.pending("r1")[0].answer == "extend"
    one.ask("r1", "Again?", ("continue", "abort"))  # a new question replaces the answered one
    assert one.pending("r1")[0].answer is None


def test_threads_never_pass_a_limit(make_ledger: LedgerFactory) -> None:
    ledgers = [make_ledger() for _ in range(4)]
    granted: list[int] = []
    lock = threading.Lock()

    def spend(index: int) -> None:
        ledger = ledgers[index % len(ledgers)]
        mine = 0
        for _ in range(60):
            grant = ledger.reserve(TEAM, 7, 1_000, holder=f"t{index}")
            if grant.granted:
                ledger.commit(TEAM, grant.id, 7)
                mine += 7
            if ledger.charge(TURNS, 1, 150).granted:
                mine += 1_000_000
        with lock:
            granted.append(mine)

    threads = [threading.Thread(target=spend, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    total = sum(granted)
    assert total // 1_000_000 == 150  # exactly the turn limit
    assert total % 1_000_000 == 994  # the most 7s that fit 1,000
