"""What is over is dropped after the ledger's retention; what is needed is never dropped.

Finished runs (from their end), gone runs (from when they went silent) and budget windows (from
when they reset) go once ``retention`` has passed; live runs, current windows and budgets with
no period stay, every count in them intact. The memory and SQLite ledgers are driven by a fake
clock; a real redis-server expires its keys itself, so there the retention is one second.
"""

from __future__ import annotations

import json
import sqlite3
import time
import uuid
from pathlib import Path

import pytest
import redis

from haltwise.engine.ledger import RETENTION, Budget, Ledger, MemoryLedger, RunInfo
from haltwise.ledgers.sqlite import SqliteLedger

from .conftest import RedisServer
from .test_fleet_cli import fleet_env, haltwise

HOUR = 3600.0
START = 1_800_000_000.0  # a fixed epoch, so that windows are where the test puts them


def _window(name: str, resets_at: float | None) -> Budget:
    return Budget("team", "turns", name, resets_at)


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_runs_and_windows_past_their_retention_are_dropped(kind: str, tmp_path: Path) -> None:
    now = [START]

    def clock() -> float:
        return now[0]

    ledger: Ledger = (
        MemoryLedger(clock) if kind == "memory" else SqliteLedger(tmp_path / "l.db", clock=clock)
    )
    for run_id in ("done", "gone", "live"):
        ledger.register(RunInfo(run_id, keys=("team",), interval=2.0))
    ledger.finish("done", {"status": "completed", "reason": "completed"})
    ledger.ask("gone", "Go on?", ("continue", "abort"))  # and then its process died
    old = _window("old", START + HOUR)  # resets an hour from the start
    forever = _window("forever", None)
    ledger.charge(old, 3, 10)
    ledger.charge(forever, 4, 10)
    ledger.reserve(old, 2, 10, holder="live", lease=60)  # never committed: it lapses
    ledger.kill("live", "later")

    # A day short of the retention: everything is kept; the old window is listed as past.
    now[0] = START + HOUR + RETENTION - 86400
    ledger.heartbeat("live", {"turns": 9}, "running")
    ledger.register(RunInfo("newer"))  # registering is when runs are pruned
    assert {info.run_id for info in ledger.runs(live=False)} == {
        "done",
        "gone",
        "live",
        "newer",
    }
    assert {s.budget.window: s.budget.ended(now[0]) for s in ledger.budgets()} == {
        "old": True,
        "forever": False,
    }

    # Past the retention (by the gone run's silence too): the ended, the gone and the old
    # window go; the live run (its kill flag with it), and the budget with no period, stay.
    now[0] = START + HOUR + RETENTION + 2 * HOUR
    ledger.heartbeat("live", {"turns": 10}, "running")
    current = _window("current", now[0] + HOUR)
    ledger.charge(current, 5, 10)  # spending prunes the windows (every ten minutes at most)
    ledger.register(RunInfo("newest"))
    assert {info.run_id for info in ledger.runs(live=False)} == {"live", "newer", "newest"}
    assert ledger.killed("live") == "later"
    assert {s.budget.window: (s.spent, s.reserved) for s in ledger.budgets()} == {
        "forever": (4, 0),
        "current": (5, 0),
    }
    assert ledger.charge(current, 5, 10).granted
    assert not ledger.charge(current, 1, 10).granted  # the current window's count is whole
    if isinstance(ledger, SqliteLedger):  # the rows are gone, not only hidden
        with sqlite3.connect(ledger.path) as raw:
            assert raw.execute("SELECT run_id FROM ledger_pending").fetchall() == []
            assert raw.execute("SELECT run_id FROM ledger_kills").fetchall() == [("live",)]
            assert raw.execute("SELECT holder FROM ledger_reservations").fetchall() == []
    ledger.close()


def test_redis_keys_expire_and_the_indexes_let_go_of_them(redis_server: RedisServer) -> None:
    from haltwise.ledgers.redis import RedisLedger

    prefix = f"test-{uuid.uuid4().hex[:8]}:"
    ledger = RedisLedger(redis_server.url, prefix=prefix, retention=1.0, gone_after=0.2)
    raw = redis.Redis.from_url(redis_server.url, decode_responses=True)
    for run_id in ("done", "gone", "live"):
        ledger.register(RunInfo(run_id, keys=("team",), interval=0.05))
    ledger.finish("done", {"status": "completed", "reason": "completed"})
    ledger.ask("gone", "Go on?", ("continue", "abort"))
    ledger.kill("gone", "never heard")
    wall = time.time()
    old = _window("old", wall - HOUR)  # a window that reset an hour ago
    current = _window("current", wall + HOUR)
    forever = _window("forever", None)
    for budget in (old, current, forever):
        ledger.charge(budget, 3, 10)
    ledger.reserve(old, 2, 10, holder="gone", lease=0.1)
    assert HOUR < raw.ttl(f"{prefix}budget:{current.id}") <= HOUR + 2  # its end, and 1 s
    assert raw.ttl(f"{prefix}budget:{forever.id}") == -1  # no period: never expires

    # The live run beats on while everything else expires (in a second, or two for the runs
    # that went silent: their silence, then the retention).
    deadline = time.monotonic() + 2.6
    while time.monotonic() < deadline:
        ledger.heartbeat("live", {"turns": 1}, "running")
        time.sleep(0.1)
    ledger.prune()  # as a run registers, every ten minutes at most
    assert [info.run_id for info in ledger.runs(live=False)] == ["live"]
    assert [info.run_id for info in ledger.runs()] == ["live"]
    assert ledger.ended_runs() == []
    assert ledger.pending() == []
    assert {s.budget.window: s.spent for s in ledger.budgets()} == {"current": 3, "forever": 3}
    assert not ledger.charge(current, 8, 10).granted  # the current window's count is whole
    left = sorted(raw.scan_iter(f"{prefix}*"))
    assert left == sorted(
        [
            f"{prefix}budget:{current.id}",
            f"{prefix}budget:{forever.id}",
            f"{prefix}budgets",
            f"{prefix}ended:indexed",  # says the first releases' ended runs are indexed: kept
            f"{prefix}live",
            f"{prefix}run:live",
            f"{prefix}runs",
        ]
    )
    assert raw.zrange(f"{prefix}runs", 0, -1) == ["live"]
    assert raw.smembers(f"{prefix}budgets") == {
        f"{prefix}budget:{current.id}",
        f"{prefix}budget:{forever.id}",
    }
    assert 0 < raw.ttl(f"{prefix}run:live") <= 2  # renewed by every heartbeat
    raw.close()
    ledger.close()


def test_haltwise_budgets_shows_the_current_windows_and_all_of_them_with_all(
    tmp_path: Path,
) -> None:
    now = time.time()
    with SqliteLedger(tmp_path / "fleet.db") as ledger:
        for window, resets in (("past", now - HOUR), ("now", now + HOUR), ("forever", None)):
            ledger.charge(_window(window, resets), 1, 10)
    env = fleet_env(tmp_path)
    shown = haltwise("budgets", "--json", env=env)
    assert shown.returncode == 0, shown.stderr
    assert sorted(b["window"] for b in json.loads(shown.stdout)) == ["forever", "now"]
    everything = haltwise("budgets", "--all", "--json", env=env)
    assert sorted(b["window"] for b in json.loads(everything.stdout)) == [
        "forever",
        "now",
        "past",
    ]
    table = haltwise("budgets", env=env).stdout
    assert "(current windows; --all for 1 past)" in table
    assert "past" not in table.replace("1 past", "")
