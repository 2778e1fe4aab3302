"""A ledger that fails: a clear error naming what is wrong, and nothing lost.

A file that is not a SQLite database and bad URLs are refused when opened, saying what would be
accepted, and the file is left as it was; a Redis URL without redis-py names the extra that
installs it; a command that only reads makes no ledger where a mistyped path points. A SQLite
file deleted under a running process stops it from spending in a file no other process sees
(its heartbeats and its reads find it out); a ledger that only reads (a dashboard) follows the
path to the new file. Reads never wait for the write lock; a stop or an answer waits a second
for it, a run's write longer, then says the ledger is busy. A Redis server that stops mid-run
stops a run with shared limits (``ledger_unavailable``, naming the URL and the error);
restarted, it has every count it had, and the ledgers that were open carry on.
"""

from __future__ import annotations

import importlib
import shutil
import sqlite3
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from haltwise import (
    CONTINUE,
    ConfigurationError,
    Governor,
    InvalidValueError,
    ModelRequest,
    ModelResponse,
    Prices,
    RunStarted,
    Status,
    Stop,
    TurnStarting,
    max_cost,
    max_turns,
)
from haltwise.engine.errors import LedgerError
from haltwise.engine.ledger import Budget, RunInfo
from haltwise.ledgers import LedgerBusy, open_ledger
from haltwise.ledgers import sqlite as sqlite_ledger
from haltwise.ledgers.sqlite import SqliteLedger

from .conftest import RedisServer

PRICES = Prices({"m": {"input": "1", "output": "10"}})


def test_a_file_that_is_not_a_ledger_is_refused_and_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "notes.db"
    path.write_bytes(b"my precious notes, not a database\n" * 100)
    before = path.read_bytes()
    with pytest.raises(ConfigurationError, match=r"cannot open the SQLite ledger .*notes\.db"):
        open_ledger(f"sqlite://{path}")
    assert path.read_bytes() == before


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("sqlite://relative.db", "sqlite:///ABSOLUTE/PATH.db"),
        ("sqlite:///", "sqlite:///ABSOLUTE/PATH.db"),
        ("redis://", "redis://HOST:PORT/DB"),
        ("redis://host:notaport/0", "redis://HOST:PORT/DB"),
        ("postgres://db/ledger", "memory:, sqlite:///ABSOLUTE/PATH.db or redis://HOST:PORT/DB"),
        ("", "memory:"),
    ],
)
def test_bad_urls_say_what_would_do(url: str, says: str) -> None:
    with pytest.raises(InvalidValueError, match="ledger") as caught:
        open_ledger(url)
    assert says in str(caught.value)


def test_a_redis_url_without_its_extra_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    # As if redis-py were not installed, and the Redis ledger not imported yet.
    monkeypatch.setitem(sys.modules, "redis", None)
    monkeypatch.delitem(sys.modules, "haltwise.ledgers.redis", raising=False)
    says = (
        r'^the Redis ledger needs its extra \(redis is missing\): pip install "haltwise\[redis\]"$'
    )
    with pytest.raises(ConfigurationError, match=says):
        open_ledger("redis://127.0.0.1:6379/0")
    with pytest.raises(ConfigurationError, match=says):
        importlib.import_module("haltwise.ledgers.redis")


def test_ledger_busy_is_a_ledger_error_importable_from_the_ledgers_too() -> None:
    from haltwise.engine import errors

    assert LedgerBusy is errors.LedgerBusy
    assert issubclass(LedgerBusy, LedgerError)


def test_a_folder_where_the_file_should_be_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="cannot open the SQLite ledger"):
        open_ledger(f"sqlite://{tmp_path}")


def test_a_reader_makes_no_ledger_where_a_mistyped_path_points(tmp_path: Path) -> None:
    missing = tmp_path / "no" / "such" / "fleet.db"
    with pytest.raises(ConfigurationError, match=r"there is no SQLite ledger .*fleet\.db"):
        open_ledger(f"sqlite://{missing}", create=False)
    assert list(tmp_path.iterdir()) == []
    open_ledger(f"sqlite://{missing}").close()  # a run makes it
    open_ledger(f"sqlite://{missing}", create=False).close()


def test_a_sqlite_file_deleted_mid_run_stops_its_spending(tmp_path: Path) -> None:
    path = tmp_path / "fleet.db"
    ledger = SqliteLedger(path)
    ledger.register(RunInfo("r1"))
    assert ledger.charge(Budget("team", "turns"), 1, 1).granted
    for leftover in tmp_path.iterdir():
        leftover.unlink()
    with pytest.raises(LedgerError, match=r"fleet\.db' was deleted while in use"):
        ledger.heartbeat("r1", {}, "running")
    # Another process now starts the file afresh: this one must not spend the budget again
    # where no one else sees it.
    SqliteLedger(path).close()
    with pytest.raises(LedgerError, match="was deleted while in use"):
        ledger.charge(Budget("team", "turns"), 1, 1)
    ledger.close()


def test_a_spender_finds_its_sqlite_file_replaced_at_a_read_too(tmp_path: Path) -> None:
    path = tmp_path / "fleet.db"
    ledger = SqliteLedger(path)
    assert ledger.charge(Budget("team", "turns"), 1, 1).granted
    for leftover in tmp_path.iterdir():
        leftover.unlink()
    SqliteLedger(path).close()  # another process starts the file afresh
    # Its reads (a run waiting for an answer, looking for a stop) fail as its heartbeat would.
    with pytest.raises(LedgerError, match=r"fleet\.db' was replaced by another file while in use"):
        ledger.pending("r1")
    with pytest.raises(LedgerError, match="was replaced by another file while in use"):
        ledger.runs()
    ledger.close()


def test_a_reader_follows_its_sqlite_file_replaced_and_fails_while_there_is_none(
    tmp_path: Path,
) -> None:
    path = tmp_path / "fleet.db"
    with SqliteLedger(path) as before:
        before.register(RunInfo("old-run"))
    watching = SqliteLedger(path)  # a dashboard: it reads, and stops and answers runs
    try:
        assert [info.run_id for info in watching.runs()] == ["old-run"]
        assert watching.kill("old-run", "enough") == ["old-run"]
        for leftover in tmp_path.iterdir():
            leftover.unlink()
        # Not the old file's runs, as if they were still live: an error saying why.
        with pytest.raises(LedgerError, match=r"fleet\.db' was deleted: no file is there now"):
            watching.runs()
        with pytest.raises(LedgerError, match="was deleted: no file is there now"):
            watching.kill("old-run", "enough")
        assert not path.exists()  # and it made none
        with SqliteLedger(path) as after:  # the fleet goes on in a new file
            after.register(RunInfo("new-run"))
            after.charge(Budget("team", "turns"), 2, 5)
        assert [info.run_id for info in watching.runs()] == ["new-run"]
        assert [state.spent for state in watching.budgets()] == [2]
        assert watching.kill("new-run", "enough") == ["new-run"]
        with SqliteLedger(path) as after:
            assert after.killed("new-run") == "enough"
    finally:
        watching.close()


def test_reads_never_wait_for_the_write_lock(tmp_path: Path) -> None:
    path = tmp_path / "fleet.db"
    ledger = SqliteLedger(path)
    ledger.register(RunInfo("r1"))
    ledger.ask("r1", "Go on?", ("continue", "abort"))
    held = ledger.reserve(Budget("team", "turns"), 2, 5, holder="r1", lease=0.05)
    assert held.granted
    time.sleep(0.1)  # the hold lapses: it is not counted, though no write swept it yet
    locker = sqlite3.connect(path, isolation_level=None)
    locker.execute("BEGIN EXCLUSIVE")  # another process writes, for longer than any wait
    failed: list[str] = []

    def stop() -> None:
        try:
            ledger.kill("r1", "enough")
        except LedgerError as error:
            failed.append(str(error))

    stopping = threading.Thread(target=stop)
    try:
        stopping.start()
        time.sleep(0.2)  # the stop waits for the lock
        started = time.monotonic()
        assert [info.run_id for info in ledger.runs()] == ["r1"]
        assert [(s.spent, s.reserved) for s in ledger.budgets()] == [(0, 0)]
        assert [p.question for p in ledger.pending()] == ["Go on?"]
        info = ledger.run_info("r1")
        assert info is not None
        assert info.live
        assert ledger.killed("r1") is None
        assert time.monotonic() - started < 1.0  # none waited behind the stop, nor the lock
        stopping.join(timeout=10)
        assert failed == [
            f"the SQLite ledger {str(path)!r} is busy: another process holds its write lock "
            "(waited 1s); nothing was changed, try again"
        ]
    finally:
        locker.execute("ROLLBACK")
        locker.close()
        stopping.join(timeout=10)
        ledger.close()


def test_a_stop_or_an_answer_waits_a_second_for_the_write_lock_and_a_run_its_whole_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_ledger, "_BUSY_SECONDS", 2.5)  # a run's write gives up sooner here
    path = tmp_path / "fleet.db"
    ledger = SqliteLedger(path)
    ledger.register(RunInfo("r1"))
    ledger.ask("r1", "Go on?", ("continue", "abort"))
    locker = sqlite3.connect(path, isolation_level=None)  # another process, on the same file
    busy = f"the SQLite ledger {str(path)!r} is busy: another process holds its write lock"
    try:
        locker.execute("BEGIN IMMEDIATE")  # it writes, for longer than any wait
        actions: list[Callable[[], object]] = [
            lambda: ledger.kill("r1", "enough"),
            lambda: ledger.answer("r1", "continue"),
            lambda: ledger.heartbeat("r1", {"turns": 1}, "running"),  # the run's own
        ]
        for action, waited in zip(actions, (1.0, 1.0, 2.5), strict=True):
            started = time.monotonic()
            with pytest.raises(LedgerBusy) as refused:
                action()
            assert waited <= time.monotonic() - started < waited + 1.0
            assert str(refused.value) == (
                f"{busy} (waited {waited:g}s); nothing was changed, try again"
            )
    finally:
        locker.execute("ROLLBACK")
        locker.close()
    assert ledger.killed("r1") is None
    assert ledger.pending("r1")[0].answer is None
    assert ledger.kill("r1", "enough") == ["r1"]  # the same, once the lock is let go of
    assert ledger.answer("r1", "continue").answer == "continue"
    ledger.close()


def test_redis_stopped_mid_run_stops_the_run_and_restarted_has_every_count(
    tmp_path: Path,
) -> None:
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed: `apt-get install redis-server` to run this")
    server = RedisServer(tmp_path, persistent=True)
    try:
        ledger = open_ledger(server.url)
        run = Governor(
            max_cost("1", key="team") | max_turns(9, key="team"), ledger=ledger, pricer=PRICES
        )
        assert run.handle(RunStarted("work")) is CONTINUE
        assert run.handle(TurnStarting()) is CONTINUE
        assert run.handle(ModelRequest("m", max_tokens=100, input_tokens=1_000)) is CONTINUE
        run.handle(ModelResponse("m", input_tokens=1_000, output_tokens=50))  # $0.0015
        idle = open_ledger(server.url)
        assert len(idle.budgets()) == 2  # its connection is open, and not used until the end
        server.stop()
        stop = run.handle(TurnStarting())
        assert isinstance(stop, Stop)
        assert stop.outcome.status is Status.ABANDONED
        assert stop.outcome.reason == "ledger_unavailable"
        assert server.url in stop.outcome.message
        assert stop.outcome.usage.turns == 1  # the refused turn never started
        server.start()
        spent = {s.budget.metric: s.spent for s in open_ledger(server.url).budgets()}
        assert spent == {"nano_usd": 1_500_000, "turns": 1}
        # A ledger that was idle meanwhile finds its connection closed, and the server
        # without its scripts: it connects again and loads them.
        assert idle.charge(Budget("after", "turns"), 1, 1).granted
    finally:
        server.stop()
