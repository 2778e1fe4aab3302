"""The Redis ledger with a fleet's numbers and a fleet's accidents: a listing of recent runs
reads only the runs it shows, however many were ever recorded; and live runs that a restarted
server (with no persistence) forgot are recorded again by their next heartbeat."""

from __future__ import annotations

import shutil
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import redis

from haltwise import Guard, max_turns
from haltwise.engine.ledger import RunInfo
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
