"""A run whose process died without ending it (SIGKILL) is gone once its heartbeats stop: still
listed, as gone, but its question is closed, and answering it is an error saying the run is not
running. A real process is killed here, on SQLite and on a real redis-server; the ledgers that
watch it take a run as gone after half a second (``gone_after``) rather than a minute.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from haltwise.engine.errors import LedgerError
from haltwise.engine.ledger import Ledger, RunInfo
from haltwise.ledgers.sqlite import SqliteLedger

from .conftest import RedisServer

#: Seconds without a heartbeat after which the watching ledgers take a run as gone.
GONE_AFTER = 0.5

# A headless run that asks at its turn limit and waits for an answer through the ledger,
# heartbeating every 50 ms; the ledger it opens is the one the test names.
_WAITER = textwrap.dedent(
    """
    import sys
    from haltwise import Guard, max_turns

    kind, where, prefix = sys.argv[1:4]
    if kind == "sqlite":
        from haltwise.ledgers.sqlite import SqliteLedger
        ledger = SqliteLedger(where)
    else:
        from haltwise.ledgers.redis import RedisLedger
        ledger = RedisLedger(where, prefix=prefix)
    guard = Guard(
        max_turns(1, on_limit="ask"), ledger=ledger, heartbeat=0.05, approval_timeout=600
    )
    with guard.run("task", run_id="doomed") as run:
        run.turn()
        run.turn()  # asks, and waits until it is killed
    """
)

Opener = Callable[..., Ledger]


@pytest.fixture(params=["sqlite", "redis"])
def fleet(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[list[str], Opener]]:
    """The waiter's arguments, and a function that opens the same ledger (with options)."""
    made: list[Ledger] = []
    if request.param == "sqlite":
        path = str(tmp_path / "fleet.db")
        arguments = ["sqlite", path, ""]

        def open_it(**options: Any) -> Ledger:
            made.append(SqliteLedger(path, **options))
            return made[-1]

    else:
        from haltwise.ledgers.redis import RedisLedger

        server: RedisServer = request.getfixturevalue("redis_server")
        prefix = f"test-{uuid.uuid4().hex[:8]}:"
        arguments = ["redis", server.url, prefix]

        def open_it(**options: Any) -> Ledger:
            made.append(RedisLedger(server.url, prefix=prefix, **options))
            return made[-1]

    yield arguments, open_it
    for ledger in made:
        ledger.close()


def _wait_for(check: Callable[[], Any], seconds: float = 20.0) -> Any:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError("timed out waiting")


def test_a_killed_run_is_gone_its_question_closed_and_answering_it_an_error(
    fleet: tuple[list[str], Opener],
) -> None:
    arguments, open_it = fleet
    watcher = open_it(gone_after=GONE_AFTER)
    waiter = subprocess.Popen([sys.executable, "-c", _WAITER, *arguments])
    try:
        (question,) = _wait_for(watcher.pending)
        assert (question.run_id, question.answer) == ("doomed", None)
        (info,) = _wait_for(lambda: [i for i in watcher.runs() if i.status == "waiting"])
        assert info.interval == 0.05  # said at registration: a slow beat is not a death
        assert info.running(info.heartbeat, watcher.gone_after)
        os.kill(waiter.pid, signal.SIGKILL)
        assert waiter.wait(timeout=10) == -signal.SIGKILL
    finally:
        if waiter.poll() is None:
            waiter.kill()
            waiter.wait()
    _wait_for(lambda: not watcher.pending())  # within GONE_AFTER of its last heartbeat
    assert watcher.pending("doomed") == []
    with pytest.raises(
        LedgerError,
        match=r"^run 'doomed' is not running: it has not been heard from for \d+s "
        r"\(more than 0.5s\): its process is gone, and its question with it$",
    ):
        watcher.answer("doomed", "continue")
    # Still listed among the live runs (nothing recorded its end), as gone.
    (info,) = watcher.runs()
    assert (info.run_id, info.status, info.outcome) == ("doomed", "waiting", None)
    assert info.gone(time.time(), GONE_AFTER)
    # A ledger that allows a slower heartbeat (the default: a minute) still has it running.
    patient = open_it()
    assert [p.run_id for p in patient.pending()] == ["doomed"]
    # A heartbeat (the process was only stalled) makes it running again, its question open.
    watcher.heartbeat("doomed", {"turns": 1}, "waiting")
    assert [p.run_id for p in watcher.pending()] == ["doomed"]
    assert watcher.answer("doomed", "abort").answer == "abort"


def test_only_running_runs_questions_are_listed_and_answered(
    fleet: tuple[list[str], Opener],
) -> None:
    _, open_it = fleet
    ledger = open_it(gone_after=GONE_AFTER)
    ledger.register(RunInfo("asks"))
    ledger.register(RunInfo("ends"))
    for run_id in ("asks", "ends", "never-registered"):
        ledger.ask(run_id, "Go on?", ("continue", "abort"))
    ledger.finish("ends", {"status": "completed", "reason": "completed"})
    assert [p.run_id for p in ledger.pending()] == ["asks"]
    with pytest.raises(
        LedgerError, match=r"^run 'ends' is not running: it has ended \(completed\)$"
    ):
        ledger.answer("ends", "continue")
    with pytest.raises(
        LedgerError, match=r"^run 'never-registered' is not running: no run has that id"
    ):
        ledger.answer("never-registered", "continue")
    with pytest.raises(LedgerError, match=r"^run 'nobody' is not running: no run has that id"):
        ledger.answer("nobody", "continue")
    assert ledger.answer("asks", "continue").answer == "continue"
