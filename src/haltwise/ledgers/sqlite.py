"""The SQLite ledger: one file, safe for any number of processes on one machine.

Every budget operation is one ``BEGIN IMMEDIATE`` transaction, so a check and the spend it
allows are one step across processes (SQLite takes the write lock at the start of the
transaction; others wait for it, with short pauses, for up to 30 seconds; what a person does
from elsewhere, a stop or an answer, waits a second at most: they are waiting to see it done,
and can try again). A write that waited in vain changed nothing: ``LedgerBusy``. Each budget's
row keeps what is spent and what is held, so a check reads one row; reservations lapse lazily
(swept when they would refuse a request, and every ten minutes). WAL mode lets readers go on
meanwhile: reads go through a connection of their own, so that a read (a dashboard's poll) never
waits behind a write waiting for that lock, and no read takes the write lock (what is held is
read net of the reservations that lapsed). ``synchronous=NORMAL`` means a process that dies
loses nothing it committed, and a power cut may lose the last transactions but never leaves
the file inconsistent. Leases and heartbeats use ``time.time()``: every process on one machine
shares that clock.

A file deleted or replaced while in use is noticed by heartbeats and reads (one ``stat``): a
ledger that has spent from a budget or recorded a run fails from then on (what it spent is in
the old file, which no other process reads); one that has only read, answered and stopped runs
(a dashboard) follows the path to the new file, and is unreachable while there is none.

Retention: every ten minutes at most, as a process registers a run or spends a budget, the
rows over for longer than ``retention`` (7 days by default) are deleted, a few hundred at a
time: finished runs from their end, gone runs (not heard from: see ``haltwise.engine.ledger``)
from when they went silent, with their questions and kill flags; and budget windows from when
they reset. Live runs, current windows, budgets with no period and checkpoints are kept.

The agent's store (``haltwise.agent.store.Store``) is this ledger with the agent's own tables
added; any ``sqlite:///PATH`` URL may point at the agent's store file.
"""

from __future__ import annotations

import json
import os
import random
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

from ..engine.errors import ConfigurationError, LedgerBusy, LedgerError
from ..engine.ledger import (
    DEFAULT_LEASE,
    GONE_SECONDS,
    PRUNE_SECONDS,
    RETENTION,
    Budget,
    BudgetState,
    Grant,
    Ledger,
    Pending,
    RunInfo,
    new_id,
    not_running,
)

__all__ = ["SqliteLedger"]

T = TypeVar("T")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS checkpoints (
    run_id TEXT PRIMARY KEY,
    saved_at REAL NOT NULL,
    messages INTEGER,
    data TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS ledger_budgets (
    id TEXT PRIMARY KEY,
    key TEXT NOT NULL,
    metric TEXT NOT NULL,
    window TEXT NOT NULL,
    resets_at REAL,
    spent INTEGER NOT NULL DEFAULT 0,
    lim INTEGER,
    held INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS ledger_reservations (
    id TEXT PRIMARY KEY,
    budget TEXT NOT NULL,
    amount INTEGER NOT NULL,
    holder TEXT NOT NULL,
    expires REAL NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS ledger_settled (
    id TEXT PRIMARY KEY,
    at REAL NOT NULL
) WITHOUT ROWID;
CREATE VIEW IF NOT EXISTS ledger_holds AS SELECT id, budget, amount, holder, expires
    FROM ledger_reservations;
CREATE TABLE IF NOT EXISTS ledger_runs (
    run_id TEXT PRIMARY KEY,
    info TEXT NOT NULL,
    started REAL NOT NULL,
    heartbeat REAL NOT NULL,
    live INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS ledger_runs_heartbeat ON ledger_runs (heartbeat);
CREATE TABLE IF NOT EXISTS ledger_kills (
    run_id TEXT PRIMARY KEY,
    reason TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS ledger_pending (
    run_id TEXT PRIMARY KEY,
    question TEXT NOT NULL,
    choices TEXT NOT NULL,
    asked REAL NOT NULL,
    answer TEXT,
    amount INTEGER
);
"""

#: How long a call waits for another process's write to end, in seconds, before it fails.
_BUSY_SECONDS = 30.0
#: The same for what a person does from elsewhere (``kill`` and ``answer``, from ``haltwise
#: stop``, ``haltwise approve`` or the dashboard): they wait to see it done, or to try again.
_ACTION_SECONDS = 1.0

#: The first and the longest pause while waiting for it, in seconds (each pause is doubled).
_FIRST_PAUSE = 0.00005
_LONGEST_PAUSE = 0.002

#: How long the ids of settled grants and spends are remembered (a retry comes much sooner).
_SETTLED_DAYS = 7

#: How often each process sweeps the lapsed reservations of every budget, forgets settled ids
#: past ``_SETTLED_DAYS`` (reading the whole table of settled ids) and drops runs and budget
#: windows past their retention, in seconds.
_TIDY_SECONDS = PRUNE_SECONDS

#: At most this many runs, and budget windows, are dropped at a time (the rest, next time).
_PRUNE_ROWS = 500

#: The layout of the budget tables (``PRAGMA user_version``): 2 keeps a running total of
#: what is held in each budget's row. Files written before (numbered 0) summed a table of
#: holds on every call (``ledger_holds``, ``ledger_done``) and are moved on when opened.
_VERSION = 2

# From the first layout, in one transaction. ``ledger_holds`` becomes a view: the older
# haltwise can neither open the file any more (it indexes that table) nor, where it has it open
# already, reserve, charge, settle or heartbeat (each writes that table): its runs stop, rather
# than spend without keeping the running total.
_FROM_FIRST_LAYOUT = (
    "ALTER TABLE ledger_budgets ADD COLUMN held INTEGER NOT NULL DEFAULT 0",
    "INSERT INTO ledger_reservations (id, budget, amount, holder, expires) "
    "SELECT id, budget, amount, holder, expires FROM ledger_holds",
    "UPDATE ledger_budgets SET held = COALESCE("
    "(SELECT SUM(amount) FROM ledger_reservations WHERE budget = ledger_budgets.id), 0)",
    "INSERT INTO ledger_settled (id, at) SELECT id, at FROM ledger_done",
    "DROP TABLE ledger_holds",
    "DROP TABLE ledger_done",
    "CREATE VIEW ledger_holds AS SELECT id, budget, amount, holder, expires "
    "FROM ledger_reservations",
)


class SqliteLedger(Ledger):
    """A ledger in one SQLite file. Thread-safe; safe across processes (WAL, waits for the
    write lock with short pauses)."""

    #: Tables of subclasses, created with the ledger's.
    schema = ""

    def __init__(
        self,
        path: str | Path,
        *,
        clock: Callable[[], float] = time.time,
        create: bool = True,
        gone_after: float = GONE_SECONDS,
        retention: float = RETENTION,
    ) -> None:
        """Open the ledger in ``path``, made (with its folders) if it is not there, unless
        ``create`` is False: a command that only reads a ledger must not leave a new one where
        a mistyped path points. ``gone_after`` and ``retention``: see
        ``haltwise.engine.ledger``."""
        self.path = Path(path).expanduser()
        self._clock = clock
        self.gone_after = gone_after
        self.retention = retention
        if not create and not self.path.exists():
            raise ConfigurationError(
                f"there is no SQLite ledger {str(self.path)!r}: check the path (runs that "
                "share a ledger make the file when they first use it)"
            )
        try:
            if create:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = self._connect()
            #: The file opened (device, inode): one put in its place, or none, is not it.
            self._file = _identity(self.path)
        except (OSError, sqlite3.Error) as error:
            raise ConfigurationError(
                f"cannot open the SQLite ledger {str(self.path)!r}: {error}. Check that the "
                "folder is writable and the file is a SQLite database, or choose another file"
            ) from None
        #: Guards the connection that writes (and the one that reads, while the file is
        #: opened again: taken first).
        self._lock = threading.Lock()
        #: The connection reads go through (opened at the first read), and its lock: in WAL
        #: mode a read does not wait for the write lock, so none waits behind a write.
        self._reader: sqlite3.Connection | None = None
        self._read_lock = threading.Lock()
        self._next_tidy = 0.0
        #: Why this ledger can no longer be used (its file was deleted or replaced), once
        #: a heartbeat or a read found it: every later call fails with it.
        self._lost: LedgerError | None = None
        #: Whether it has spent from a budget or recorded a run: then a file put in the place
        #: of its own is an error for good (see the module's docstring).
        self._spender = False

    def _connect(self) -> sqlite3.Connection:
        """A connection that writes to the file at ``path``, its tables made or moved on."""
        db = sqlite3.connect(self.path, timeout=30.0, isolation_level=None, check_same_thread=False)
        try:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            db.execute("PRAGMA busy_timeout=30000")
            db.executescript(_SCHEMA + self.schema)
            self._upgrade(db)
            db.execute("PRAGMA busy_timeout=0")  # from here on, see _patiently
        except BaseException:
            db.close()
            raise
        return db

    def _upgrade(self, db: sqlite3.Connection) -> None:
        """Number a new file's layout, or move an older file's tables on to it."""
        if db.execute("PRAGMA user_version").fetchone()[0] == _VERSION:
            return
        db.execute("BEGIN IMMEDIATE")
        try:
            version = db.execute("PRAGMA user_version").fetchone()[0]
            if version > _VERSION:
                raise ConfigurationError(
                    f"the SQLite ledger {str(self.path)!r} was written by a newer haltwise "
                    f"(layout {version}; this one reads {_VERSION}). Upgrade haltwise "
                    "(pip install -U haltwise) or choose another file"
                )
            old = db.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'ledger_holds'"
            ).fetchone()
            if old is not None:
                for statement in _FROM_FIRST_LAYOUT:
                    db.execute(statement)
            db.execute(f"PRAGMA user_version = {_VERSION}")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")

    def close(self) -> None:
        with self._lock, self._read_lock:
            self._db.close()
            if self._reader is not None:
                self._reader.close()

    def __enter__(self) -> SqliteLedger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"sqlite://{self.path}" if self.path.is_absolute() else f"sqlite:///{self.path}"

    @contextmanager
    def _transaction(self, *, patience: float | None = None) -> Iterator[sqlite3.Connection]:
        """A write transaction, once the write lock is taken: waited for ``patience`` seconds
        at most (``_BUSY_SECONDS`` by default), else ``LedgerBusy``."""
        if self._lost is not None:
            raise self._lost
        seconds = _BUSY_SECONDS if patience is None else patience
        with self._lock:
            try:
                try:
                    self._patiently(lambda: self._db.execute("BEGIN IMMEDIATE"), seconds)
                except sqlite3.OperationalError as error:
                    if not _locked(error):
                        raise
                    raise LedgerBusy(
                        f"the SQLite ledger {str(self.path)!r} is busy: another process holds "
                        f"its write lock (waited {seconds:g}s); nothing was changed, try again"
                    ) from None
                try:
                    yield self._db
                except BaseException:
                    self._db.execute("ROLLBACK")
                    raise
                self._db.execute("COMMIT")
            except sqlite3.Error as error:
                raise LedgerError(f"the SQLite ledger {str(self.path)!r} failed: {error}") from None

    def _query(self, sql: str, args: Sequence[Any] = ()) -> list[Any]:
        """Rows read through the reading connection, once the file is found to be the one
        opened (``_check_file``)."""
        self._check_file()
        with self._read_lock:
            try:
                if self._reader is None:
                    # ``mode=rw``: a file deleted meanwhile is an error, not a new empty file.
                    self._reader = sqlite3.connect(
                        self.path.absolute().as_uri() + "?mode=rw",
                        uri=True,
                        isolation_level=None,
                        check_same_thread=False,
                    )
                    self._reader.execute("PRAGMA busy_timeout=0")  # see _patiently
                reader = self._reader
                return self._patiently(lambda: reader.execute(sql, args).fetchall(), _BUSY_SECONDS)
            except sqlite3.Error as error:
                raise LedgerError(f"the SQLite ledger {str(self.path)!r} failed: {error}") from None

    @staticmethod
    def _patiently(action: Callable[[], T], seconds: float) -> T:
        """``action``, tried again after a short pause while another connection holds the lock
        it needs (SQLite's own busy handler is off: it sleeps a millisecond at least, while
        the lock is let go of and taken again many times), for ``seconds`` at most."""
        pause = _FIRST_PAUSE
        deadline = 0.0
        while True:
            try:
                return action()
            except sqlite3.OperationalError as error:
                if not _locked(error):
                    raise
                now = time.monotonic()
                deadline = deadline or now + seconds
                if now > deadline:
                    raise
            time.sleep(pause * (0.5 + random.random()))  # jittered, so waiters do not collide
            pause = min(2 * pause, _LONGEST_PAUSE)

    # --- checkpoints -----------------------------------------------------------------------

    def save_checkpoint(self, run_id: str, data: dict[str, Any]) -> str:
        with self._transaction() as db:
            db.execute(
                "INSERT INTO checkpoints (run_id, saved_at, messages, data) VALUES (?, ?, NULL, ?) "
                "ON CONFLICT(run_id) DO UPDATE SET saved_at=excluded.saved_at, data=excluded.data",
                (run_id, self._clock(), json.dumps(data)),
            )
        return "sqlite:" + run_id

    def load_checkpoint(self, ref: str) -> dict[str, Any]:
        run_id = ref.removeprefix("sqlite:")
        rows = self._query("SELECT data FROM checkpoints WHERE run_id = ?", (run_id,))
        if not rows:
            raise LedgerError(f"no checkpoint {ref!r} in the SQLite ledger {str(self.path)!r}")
        data: dict[str, Any] = json.loads(rows[0][0])
        return data

    # --- budgets ---------------------------------------------------------------------------

    def _standing(self, db: sqlite3.Connection, budget: Budget, limit: int | None) -> int:
        """What the budget has used (spent and held), its row made if it has none yet."""
        row = db.execute(
            "SELECT spent + held FROM ledger_budgets WHERE id = ?", (budget.id,)
        ).fetchone()
        if row is not None:
            return int(row[0])
        db.execute(
            "INSERT INTO ledger_budgets (id, key, metric, window, resets_at, spent, held, lim) "
            "VALUES (?, ?, ?, ?, ?, 0, 0, ?)",
            (budget.id, budget.key, budget.metric, budget.window, budget.resets_at, limit),
        )
        return 0

    def _sweep(self, db: sqlite3.Connection, now: float, budget_id: str | None = None) -> bool:
        """Let go of the reservations whose lease ran out (of one budget, or all); whether
        there were any."""
        where = "expires <= ?" + ("" if budget_id is None else " AND budget = ?")
        args = (now,) if budget_id is None else (now, budget_id)
        db.execute(
            "UPDATE ledger_budgets SET held = held - (SELECT SUM(amount) FROM "
            f"ledger_reservations WHERE budget = ledger_budgets.id AND {where}) "
            f"WHERE id IN (SELECT budget FROM ledger_reservations WHERE {where})",
            args + args,
        )
        return db.execute(f"DELETE FROM ledger_reservations WHERE {where}", args).rowcount > 0

    def _tidy(self, db: sqlite3.Connection, now: float) -> None:
        """Every lapsed reservation swept, settled ids past remembering forgotten, and runs
        and budget windows past their retention dropped."""
        self._sweep(db, now)
        db.execute("DELETE FROM ledger_settled WHERE at < ?", (now - _SETTLED_DAYS * 86400,))
        self._prune(db, now)
        self._next_tidy = now + _TIDY_SECONDS

    def _prune(self, db: sqlite3.Connection, now: float) -> None:
        """Drop, a few hundred at a time, the runs (with their questions and kill flags) and
        the budget windows over for longer than ``retention``. A live run is dropped only once
        gone for that long: the index on heartbeats finds the candidates, and each is checked
        against its own heartbeat interval."""
        rows = db.execute(
            "SELECT run_id, info FROM ledger_runs WHERE heartbeat < ? ORDER BY heartbeat LIMIT ?",
            (now - self.retention, _PRUNE_ROWS),
        ).fetchall()
        dropped = [
            (run_id,)
            for run_id, info in rows
            if RunInfo.from_dict(json.loads(info)).kept_until(self.gone_after, self.retention) < now
        ]
        for table in ("ledger_runs", "ledger_pending", "ledger_kills"):
            db.executemany(f"DELETE FROM {table} WHERE run_id = ?", dropped)
        # Old questions of runs the ledger does not have (never registered).
        db.execute(
            "DELETE FROM ledger_pending WHERE asked < ? AND run_id NOT IN "
            "(SELECT run_id FROM ledger_runs)",
            (now - self.retention,),
        )
        # A window's reservations lapsed long before it is dropped: they go with it.
        windows = db.execute(
            "SELECT id FROM ledger_budgets WHERE resets_at IS NOT NULL AND resets_at < ? LIMIT ?",
            (now - self.retention, _PRUNE_ROWS),
        ).fetchall()
        db.executemany("DELETE FROM ledger_reservations WHERE budget = ?", windows)
        db.executemany("DELETE FROM ledger_budgets WHERE id = ?", windows)

    def _grant(
        self, db: sqlite3.Connection, budget: Budget, amount: int, limit: int, need: int
    ) -> tuple[int, int, float]:
        """What of ``amount`` fits ``limit`` (0 if less than ``need``), what was used before,
        and the time. Lapsed reservations are not swept on every call: only when they would
        refuse this one, and every ten minutes (so that the table stays small)."""
        now = self._clock()
        if now >= self._next_tidy:
            self._tidy(db, now)
        used = self._standing(db, budget, limit)
        if min(amount, limit - used) < need and self._sweep(db, now, budget.id):
            used = self._standing(db, budget, limit)
        granted = min(amount, limit - used)
        return (granted if granted >= need else 0), used, now

    def charge(self, budget: Budget, amount: int, limit: int) -> Grant:
        self._spender = True
        with self._transaction() as db:
            granted, used, _ = self._grant(db, budget, amount, limit, amount)
            db.execute(
                "UPDATE ledger_budgets SET spent = spent + ?, lim = ? WHERE id = ?",
                (granted, limit, budget.id),
            )
            return Grant("", granted, used)

    def reserve(
        self,
        budget: Budget,
        amount: int,
        limit: int,
        *,
        holder: str,
        minimum: int | None = None,
        lease: float = DEFAULT_LEASE,
    ) -> Grant:
        need = amount if minimum is None else max(minimum, 1)
        self._spender = True
        with self._transaction() as db:
            granted, used, now = self._grant(db, budget, amount, limit, need)
            db.execute(
                "UPDATE ledger_budgets SET held = held + ?, lim = ? WHERE id = ?",
                (granted, limit, budget.id),
            )
            if not granted:
                return Grant("", 0, used)
            grant_id = new_id()
            db.execute(
                "INSERT INTO ledger_reservations (id, budget, amount, holder, expires) "
                "VALUES (?, ?, ?, ?, ?)",
                (grant_id, budget.id, granted, holder, now + lease),
            )
            return Grant(grant_id, granted, used)

    def commit(self, budget: Budget, grant_id: str, actual: int) -> int:
        return self._settle(budget, grant_id, actual)

    def release(self, budget: Budget, grant_id: str) -> None:
        self._settle(budget, grant_id, None)

    def spend(self, budget: Budget, amount: int, op_id: str) -> int:
        return self._settle(budget, op_id, amount)

    def _settle(self, budget: Budget, op_id: str, amount: int | None) -> int:
        """Let go of ``op_id``'s reservation, if it still holds one, and spend ``amount``
        (None: nothing) unless ``op_id`` was settled before; what the budget has used after."""
        self._spender = True
        with self._transaction() as db:
            fresh = db.execute(
                "INSERT INTO ledger_settled (id, at) VALUES (?, ?) ON CONFLICT(id) DO NOTHING",
                (op_id, self._clock()),
            ).rowcount
            spent = amount if fresh and amount else 0
            # A reservation's budget row exists: the hold is let go of here or not at all.
            changed = db.execute(
                "UPDATE ledger_budgets SET spent = spent + ?, held = held - COALESCE("
                "(SELECT amount FROM ledger_reservations WHERE id = ?), 0) WHERE id = ?",
                (spent, op_id, budget.id),
            ).rowcount
            if changed:
                db.execute("DELETE FROM ledger_reservations WHERE id = ?", (op_id,))
                row = db.execute(
                    "SELECT spent + held FROM ledger_budgets WHERE id = ?", (budget.id,)
                ).fetchone()
                return int(row[0])
            if amount is None:
                return 0
            db.execute(
                "INSERT INTO ledger_budgets (id, key, metric, window, resets_at, spent, held) "
                "VALUES (?, ?, ?, ?, ?, ?, 0)",
                (budget.id, budget.key, budget.metric, budget.window, budget.resets_at, spent),
            )
            return spent

    def budgets(self) -> list[BudgetState]:
        # A read, not a write: what is held leaves out the reservations that lapsed (swept
        # by the next spend that needs them gone, and every ten minutes), so that looking at
        # the budgets never waits for the write lock.
        rows = self._query(
            "SELECT key, metric, window, resets_at, spent, held - COALESCE(lapsed, 0), lim "
            "FROM ledger_budgets LEFT JOIN (SELECT budget, SUM(amount) AS lapsed FROM "
            "ledger_reservations WHERE expires <= ? GROUP BY budget) ON budget = id "
            "ORDER BY key, metric, window",
            (self._clock(),),
        )
        return [
            BudgetState(Budget(key, metric, window, resets), int(spent), int(held), lim)
            for key, metric, window, resets, spent, held, lim in rows
        ]

    # --- live runs -------------------------------------------------------------------------

    def register(self, info: RunInfo) -> None:
        now = self._clock()
        started = info.started or now
        record = json.dumps(replace(info, started=started, heartbeat=now, outcome=None).to_dict())
        self._spender = True
        with self._transaction() as db:
            if now >= self._next_tidy:
                self._tidy(db, now)
            db.execute(
                "INSERT INTO ledger_runs (run_id, info, started, heartbeat, live) "
                "VALUES (?, ?, ?, ?, 1) ON CONFLICT(run_id) DO UPDATE SET info = excluded.info, "
                "heartbeat = excluded.heartbeat, live = 1",
                (info.run_id, record, started, now),
            )
            db.execute("DELETE FROM ledger_kills WHERE run_id = ?", (info.run_id,))

    def heartbeat(
        self,
        run_id: str,
        counts: dict[str, Any],
        status: str,
        lease: float = DEFAULT_LEASE,
        *,
        info: RunInfo | None = None,
    ) -> str | None:
        self._spender = True
        self._check_file()
        with self._transaction() as db:
            now = self._clock()
            row = db.execute("SELECT info FROM ledger_runs WHERE run_id = ?", (run_id,)).fetchone()
            if row is not None:
                data = json.loads(row[0])
                data.update(counts=counts, status=status, heartbeat=now)
                db.execute(
                    "UPDATE ledger_runs SET info = ?, heartbeat = ? WHERE run_id = ?",
                    (json.dumps(data), now, run_id),
                )
            elif info is not None:
                started = info.started or now
                record = replace(info, counts=counts, status=status, started=started, heartbeat=now)
                db.execute(
                    "INSERT INTO ledger_runs (run_id, info, started, heartbeat, live) "
                    "VALUES (?, ?, ?, ?, 1)",
                    (run_id, json.dumps(record.to_dict()), started, now),
                )
            db.execute(
                "UPDATE ledger_reservations SET expires = ? WHERE holder = ? AND expires > ?",
                (now + lease, run_id, now),
            )
            kill = db.execute(
                "SELECT reason FROM ledger_kills WHERE run_id = ?", (run_id,)
            ).fetchone()
        return None if kill is None else str(kill[0])

    def _check_file(self) -> None:
        """Whether the file at ``path`` is still the one opened. If it was deleted or
        replaced, a ledger that spent or recorded a run fails from now on: its open connection
        would go on writing into a file no other process reads, and every run on the path
        would spend the shared budgets again, unseen. One that has only read (a dashboard)
        opens the new file, and fails while there is none. One ``stat``, on heartbeats, reads,
        stops and answers, not on every spend."""
        if self._lost is not None:
            raise self._lost
        try:
            now: tuple[int, int] | None = _identity(self.path)
        except OSError:
            now = None
        if now == self._file:
            return
        gone = "deleted" if now is None else "replaced by another file"
        if self._spender:
            self._lost = LedgerError(
                f"the SQLite ledger {str(self.path)!r} was {gone} while in use: what this "
                "process spends would go unseen by the others. Stop the runs on it and start "
                "them again"
            )
            raise self._lost
        if now is None:
            raise LedgerError(
                f"the SQLite ledger {str(self.path)!r} was deleted: no file is there now (one "
                "is made again when a run starts on it)"
            )
        self._reopen()

    def _reopen(self) -> None:
        """Open the file now at ``path`` in place of the one that was there."""
        with self._lock, self._read_lock:
            try:
                found = _identity(self.path)
                if found == self._file:
                    return  # another thread did
                db = self._connect()
            except (OSError, sqlite3.Error) as error:
                raise LedgerError(
                    f"the SQLite ledger {str(self.path)!r} was replaced by a file that cannot "
                    f"be opened: {error}"
                ) from None
            self._db.close()
            if self._reader is not None:
                self._reader.close()
            self._db, self._reader, self._file = db, None, found

    def finish(self, run_id: str, outcome: dict[str, Any]) -> None:
        with self._transaction() as db:
            now = self._clock()
            row = db.execute("SELECT info FROM ledger_runs WHERE run_id = ?", (run_id,)).fetchone()
            data = (
                json.loads(row[0])
                if row is not None
                else RunInfo(run_id, started=now, heartbeat=now).to_dict()
            )
            data.update(outcome=outcome, status=str(outcome.get("status", "ended")), heartbeat=now)
            db.execute(
                "INSERT INTO ledger_runs (run_id, info, started, heartbeat, live) "
                "VALUES (?, ?, ?, ?, 0) ON CONFLICT(run_id) DO UPDATE SET info = excluded.info, "
                "heartbeat = excluded.heartbeat, live = 0",
                (run_id, json.dumps(data), data["started"], now),
            )
            db.execute("DELETE FROM ledger_pending WHERE run_id = ?", (run_id,))
            db.execute("DELETE FROM ledger_kills WHERE run_id = ?", (run_id,))

    def runs(self, *, live: bool = True, limit: int = 100) -> list[RunInfo]:
        where = "WHERE live = 1 " if live else ""
        rows = self._query(
            f"SELECT info FROM ledger_runs {where}ORDER BY started DESC LIMIT ?", (limit,)
        )
        return [RunInfo.from_dict(json.loads(row[0])) for row in rows]

    def ended_runs(self, *, limit: int = 100) -> list[RunInfo]:
        # An ended run's heartbeat is its end: the index on heartbeats reads them in order.
        rows = self._query(
            "SELECT info FROM ledger_runs WHERE live = 0 ORDER BY heartbeat DESC LIMIT ?",
            (max(limit, 0),),
        )
        return [RunInfo.from_dict(json.loads(row[0])) for row in rows]

    def run_info(self, run_id: str) -> RunInfo | None:
        rows = self._query("SELECT info FROM ledger_runs WHERE run_id = ?", (run_id,))
        return RunInfo.from_dict(json.loads(rows[0][0])) if rows else None

    def live_count(self) -> int:
        return int(self._query("SELECT COUNT(*) FROM ledger_runs WHERE live = 1")[0][0])

    # --- kill flags ------------------------------------------------------------------------

    def kill(self, run_id: str | None, reason: str, *, key: str | None = None) -> list[str]:
        self._check_file()
        with self._transaction(patience=_ACTION_SECONDS) as db:
            if run_id is not None:
                rows = db.execute(
                    "SELECT run_id, info FROM ledger_runs WHERE run_id = ? AND live = 1",
                    (run_id,),
                ).fetchall()
            else:
                rows = db.execute("SELECT run_id, info FROM ledger_runs WHERE live = 1").fetchall()
            told = [
                found
                for found, info in rows
                if key is None or key in json.loads(info).get("keys", [])
            ]
            db.executemany(
                "INSERT INTO ledger_kills (run_id, reason) VALUES (?, ?) "
                "ON CONFLICT(run_id) DO UPDATE SET reason = excluded.reason",
                [(told_id, reason) for told_id in told],
            )
        return told

    def killed(self, run_id: str) -> str | None:
        rows = self._query("SELECT reason FROM ledger_kills WHERE run_id = ?", (run_id,))
        return None if not rows else str(rows[0][0])

    # --- decisions -------------------------------------------------------------------------

    def ask(self, run_id: str, question: str, choices: tuple[str, ...]) -> None:
        with self._transaction() as db:
            db.execute(
                "INSERT INTO ledger_pending (run_id, question, choices, asked, answer, amount) "
                "VALUES (?, ?, ?, ?, NULL, NULL) ON CONFLICT(run_id) DO UPDATE SET "
                "question = excluded.question, choices = excluded.choices, "
                "asked = excluded.asked, answer = NULL, amount = NULL",
                (run_id, question, json.dumps(list(choices)), self._clock()),
            )

    def answer(self, run_id: str, choice: str, amount: int | None = None) -> Pending:
        self._check_file()
        with self._transaction(patience=_ACTION_SECONDS) as db:
            run = db.execute("SELECT info FROM ledger_runs WHERE run_id = ?", (run_id,)).fetchone()
            info = None if run is None else RunInfo.from_dict(json.loads(run[0]))
            now = self._clock()
            if info is None or not info.running(now, self.gone_after):
                raise not_running(run_id, info, now, self.gone_after)
            row = db.execute(
                "SELECT question, choices, asked, answer FROM ledger_pending WHERE run_id = ?",
                (run_id,),
            ).fetchone()
            if row is None:
                raise LedgerError(f"run {run_id!r} is not waiting for an answer")
            question, choices, asked, answered = row
            if answered is not None:
                raise LedgerError(
                    f"run {run_id!r} was already answered ({answered}); the first answer wins"
                )
            options = tuple(json.loads(choices))
            if choice not in options:
                raise LedgerError(
                    f"{choice!r} is not a choice for run {run_id!r}: one of {', '.join(options)}"
                )
            db.execute(
                "UPDATE ledger_pending SET answer = ?, amount = ? WHERE run_id = ?",
                (choice, amount, run_id),
            )
        return Pending(run_id, question, options, float(asked), choice, amount)

    def pending(self, run_id: str | None = None) -> list[Pending]:
        sql = (
            "SELECT p.run_id, question, choices, asked, answer, amount, r.info "
            "FROM ledger_pending AS p JOIN ledger_runs AS r ON r.run_id = p.run_id "
            "WHERE r.live = 1"
        )
        rows = (
            self._query(sql + " AND p.run_id = ?", (run_id,))
            if run_id is not None
            else self._query(sql + " ORDER BY asked")
        )
        now = self._clock()
        return [
            Pending(found, question, tuple(json.loads(choices)), float(asked), answer, amount)
            for found, question, choices, asked, answer, amount, info in rows
            if RunInfo.from_dict(json.loads(info)).running(now, self.gone_after)
        ]


def _locked(error: sqlite3.OperationalError) -> bool:
    """Whether ``error`` is another connection holding the lock that was needed."""
    return str(error).startswith("database is locked")


def _identity(path: Path) -> tuple[int, int]:
    """Which file ``path`` names now: its device and inode."""
    found = os.stat(path)
    return found.st_dev, found.st_ino
