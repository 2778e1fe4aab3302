"""The Redis ledger with a fleet's numbers and a fleet's accidents: a listing of recent runs
reads only the runs it shows, however many were ever recorded; live runs that a restarted
server (with no persistence) forgot are recorded again by their next heartbeat; and runs that
an older haltwise ended, with no entry in the index of ended runs, are put in it."""

from __future__ import annotations

import json
import math
import shutil
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import redis

from haltwise import Guard, max_turns
from haltwise.engine.ledger import RETENTION, RunInfo
from haltwise.ledgers import redis as redis_ledger
from haltwise.ledgers.redis import RedisLedger

from .conftest import RedisServer


def _hgets(server: RedisServer) -> int:
    stats: dict[str, Any] = redis.Redis.from_url(server.url).info("commandstats")
    return int(stats.get("cmdstat_hget", {}).get("calls", 0))


def test_recent_runs_read_only_the_runs_shown(redis_server: RedisServer) -> None:
    ledger = RedisLedger(redis_server.url, prefix=f"test-{uuid.uuid4().hex[:8]}:")
    try:
        for number in range(300):
            ledger.register(RunInfo(f"r{number:03d}", started=1_000.0 + number))
            ledger.finish(f"r{number:03d}", {"status": "completed", "reason": "completed"})
        before = _hgets(redis_server)
        recent = ledger.runs(live=False, limit=10)
        assert [info.run_id for info in recent] == [f"r{n:03d}" for n in range(299, 289, -1)]
        assert _hgets(redis_server) - before == 10
    finally:
        ledger.close()


def test_a_restarted_server_sees_its_live_runs_again(tmp_path: Path) -> None:
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed: `apt-get install redis-server` to run this")
    server = RedisServer(tmp_path)  # no persistence: a restart forgets everything
    try:
        guard = Guard(max_turns(100), ledger=server.url, heartbeat=0.05)
        other = RedisLedger(server.url)
        with guard.run("task", run_id="survivor") as run:
            run.turn()
            server.stop()
            server.start()
            deadline = time.monotonic() + 5
            while not other.runs() and time.monotonic() < deadline:
                time.sleep(0.05)
            (found,) = other.runs()
            assert (found.run_id, found.status, found.counts["turns"]) == ("survivor", "running", 1)
            assert other.kill("survivor", "seen again") == ["survivor"]
            deadline = time.monotonic() + 5
            while not guard.governor.cancel_requested and time.monotonic() < deadline:
                time.sleep(0.02)
            run.turn()
        assert run.outcome is not None
        assert run.outcome.reason == "killed"
        other.close()
    finally:
        server.stop()


# --- runs ended by an older haltwise, before the index of ended runs -----------------------------

HOUR = 3600.0


def finish_as_before(
    raw: redis.Redis, prefix: str, run_id: str, ended: float, *, expires: bool = True
) -> None:
    """End a registered run as ``RedisLedger.finish`` did before the index of ended runs (no
    entry in it), at ``ended`` (server epoch seconds); ``expires=False``: as it did before
    retention too (the record never expires)."""
    key = f"{prefix}run:{run_id}"
    data = json.loads(str(raw.hget(key, "info")))
    data.update(outcome={"status": "completed", "reason": "completed"}, heartbeat=ended)
    data["status"] = "completed"
    pipe = raw.pipeline()
    pipe.hset(key, "info", json.dumps(data))
    if expires:  # what its EXPIRE, ``retention`` from its end, left of it by now
        pipe.expireat(key, math.ceil(ended + RETENTION))
    else:
        pipe.persist(key)
    pipe.zadd(f"{prefix}runs", {run_id: float(data["started"])})
    pipe.srem(f"{prefix}live", run_id)
    pipe.delete(f"{prefix}holder:{run_id}", f"{prefix}pending:{run_id}")
    pipe.zrem(f"{prefix}pendings", run_id)
    pipe.hdel(f"{prefix}kills", run_id)
    pipe.execute()


def server_now(raw: redis.Redis) -> float:
    seconds, micros = raw.time()
    return float(seconds) + float(micros) / 1_000_000


def older_fleet(server: RedisServer) -> tuple[str, redis.Redis]:
    """A fleet whose runs an older haltwise ended, and one run this haltwise ended: under a new
    prefix, with a client of its own."""
    prefix = f"test-{uuid.uuid4().hex[:8]}:"
    raw = redis.Redis.from_url(server.url, decode_responses=True)
    now = server_now(raw)
    ledger = RedisLedger(server.url, prefix=prefix)
    # (run, started, ended or None while live, whether its record expires), by start
    runs = [
        ("old-2", now - 4 * HOUR, now - 3 * HOUR, True),
        ("old-1", now - 5 * HOUR, now - 1 * HOUR, True),
        ("no-expiry", now - 6 * HOUR, now - 2 * HOUR, False),
        ("still-live", now - 7 * HOUR, None, True),
        ("twin-a", now - 8 * HOUR, now - 1.5 * HOUR, True),  # two runs that started together
        ("twin-b", now - 8 * HOUR, now - 1.6 * HOUR, True),
        ("oldest", now - 9 * 86400, now - 8 * 86400, False),  # ended before the retention
    ]
    for run_id, started, ended, expires in runs:
        ledger.register(RunInfo(run_id, started=started))  # as an older haltwise did too
        if ended is not None:
            finish_as_before(raw, prefix, run_id, ended, expires=expires)
    raw.hset(f"{prefix}run:garbled", "info", "{not JSON")  # not read, and no read fails on it
    raw.zadd(f"{prefix}runs", {"garbled": now - 10 * HOUR})
    ledger.register(RunInfo("new", started=now - 0.5 * HOUR))
    ledger.finish("new", {"status": "completed", "reason": "completed"})
    ledger.close()
    return prefix, raw


#: The runs ``older_fleet`` ended within the retention, the latest end first.
ENDED = ["new", "old-1", "twin-a", "twin-b", "no-expiry", "old-2"]


def test_runs_ended_by_an_older_haltwise_are_recently_finished(redis_server: RedisServer) -> None:
    prefix, raw = older_fleet(redis_server)
    ledger = RedisLedger(redis_server.url, prefix=prefix)
    try:
        assert [info.run_id for info in ledger.ended_runs()] == ENDED
        assert [info.run_id for info in ledger.ended_runs(limit=2)] == ENDED[:2]
        assert raw.get(f"{prefix}ended:indexed") == "done"
        # The retention holds as it does for runs ended now: a run that ended eight days ago
        # is not listed, and its record, which had no expiry, is dropped; the others' records
        # expire seven days after their end.
        assert raw.exists(f"{prefix}run:oldest") == 0
        left = raw.ttl(f"{prefix}run:no-expiry")
        assert RETENTION - 2 * HOUR - 60 < left <= RETENTION - 2 * HOUR + 1
        assert [info.run_id for info in ledger.runs()] == ["still-live"]
    finally:
        ledger.close()
        raw.close()


def test_a_read_of_ended_runs_decodes_a_few_records_at_most(
    redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(redis_ledger, "_INDEX_BYTES", 1)  # one record a read, however small
    prefix, raw = older_fleet(redis_server)
    ledger = RedisLedger(redis_server.url, prefix=prefix)
    try:
        # "new" is in the index already: its record is not read.
        assert [info.run_id for info in ledger.ended_runs()] == ["new", "old-2"]
        assert [info.run_id for info in ledger.ended_runs()] == ["new", "old-1", "old-2"]
    finally:
        ledger.close()
        raw.close()


def test_the_index_of_ended_runs_is_completed_a_few_runs_at_a_time_and_once(
    redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(redis_ledger, "_INDEX_RUNS", 3)
    prefix, raw = older_fleet(redis_server)
    one, two, late, again = (RedisLedger(redis_server.url, prefix=prefix) for _ in range(4))
    try:
        # Each read looks at three runs of the index by start, the newest first, where the one
        # before left off, whichever process made it; the twins are one each side of a cut.
        assert [info.run_id for info in one.ended_runs()] == ["new", "old-1", "old-2"]
        assert raw.get(f"{prefix}ended:indexed") != "done"
        assert [info.run_id for info in two.ended_runs()] == [
            "new",
            "old-1",
            "twin-b",
            "no-expiry",
            "old-2",
        ]
        assert [info.run_id for info in one.ended_runs()] == ENDED
        assert raw.get(f"{prefix}ended:indexed") != "done"  # it ended on a full read
        assert [info.run_id for info in two.ended_runs()] == ENDED
        assert raw.get(f"{prefix}ended:indexed") == "done"
        # Done for good: a run the older haltwise ends now is not looked for...
        late.register(RunInfo("late"))
        finish_as_before(raw, prefix, "late", server_now(raw))
        assert [info.run_id for info in late.ended_runs()] == ENDED
        # ...unless the key is deleted: then each run is looked at again, and added once.
        raw.delete(f"{prefix}ended:indexed")
        for _ in range(4):
            found = [info.run_id for info in again.ended_runs()]
        assert found == ["late", *ENDED]
        assert raw.zcard(f"{prefix}ended") == len(found)
    finally:
        for ledger in (one, two, late, again):
            ledger.close()
        raw.close()
