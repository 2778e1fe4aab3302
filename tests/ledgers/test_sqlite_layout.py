"""SQLite files written by an earlier haltwise: opened, they move on to the running total of
what is held with nothing lost, and the older code can no longer spend from them.

The first layout (numbered 0) summed a table of holds on every call; its tables are written
here as that release wrote them, with a budget mid-flight: spent, one live hold, one lapsed
hold and one settled grant.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest

from haltwise.agent.store import Store
from haltwise.engine.errors import ConfigurationError
from haltwise.engine.ledger import Budget
from haltwise.ledgers.sqlite import SqliteLedger

FIRST_LAYOUT = """
CREATE TABLE checkpoints (
    run_id TEXT PRIMARY KEY, saved_at REAL NOT NULL, messages INTEGER, data TEXT NOT NULL
);
CREATE TABLE ledger_budgets (
    id TEXT PRIMARY KEY, key TEXT NOT NULL, metric TEXT NOT NULL, window TEXT NOT NULL,
    resets_at REAL, spent INTEGER NOT NULL DEFAULT 0, lim INTEGER
);
CREATE TABLE ledger_holds (
    id TEXT PRIMARY KEY, budget TEXT NOT NULL, amount INTEGER NOT NULL, holder TEXT NOT NULL,
    expires REAL NOT NULL
);
CREATE INDEX ledger_holds_by_budget ON ledger_holds(budget, expires);
CREATE INDEX ledger_holds_by_holder ON ledger_holds(holder);
CREATE TABLE ledger_done (id TEXT PRIMARY KEY, at REAL NOT NULL);
"""

TEAM = Budget("team", "nano_usd")


def first_layout_file(path: Path) -> None:
    now = time.time()
    with sqlite3.connect(path) as db:
        db.executescript(FIRST_LAYOUT)
        db.execute(
            "INSERT INTO ledger_budgets VALUES (?, ?, ?, ?, NULL, 500, 1000)",
            (TEAM.id, TEAM.key, TEAM.metric, TEAM.window),
        )
        db.executemany(
            "INSERT INTO ledger_holds VALUES (?, ?, ?, ?, ?)",
            [("live", TEAM.id, 300, "run-1", now + 300), ("lapsed", TEAM.id, 100, "x", now - 1)],
        )
        db.execute("INSERT INTO ledger_done VALUES ('settled', ?)", (now,))
    db.close()


def test_a_file_of_the_first_layout_moves_on_with_nothing_lost(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    first_layout_file(path)
    ledger = SqliteLedger(path)
    (state,) = ledger.budgets()
    assert (state.spent, state.reserved, state.limit) == (500, 300, 1000)  # the lapsed hold went
    assert not ledger.reserve(TEAM, 201, 1000, holder="r").granted  # the live hold still counts
    assert ledger.commit(TEAM, "settled", 999) == 800  # settled before: not spent again
    assert ledger.commit(TEAM, "live", 250) == 750
    assert ledger.commit(TEAM, "live", 250) == 750
    assert ledger.reserve(TEAM, 250, 1000, holder="r").granted
    ledger.close()
    again = SqliteLedger(path)  # a second opening finds it moved on already
    assert [(s.spent, s.reserved) for s in again.budgets()] == [(750, 250)]
    again.close()


def test_the_older_code_cannot_open_a_file_that_moved_on(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    first_layout_file(path)
    SqliteLedger(path).close()
    with sqlite3.connect(path) as db, pytest.raises(sqlite3.OperationalError, match="view"):
        # What the first layout's code ran on opening a file.
        db.executescript(FIRST_LAYOUT.replace("CREATE TABLE", "CREATE TABLE IF NOT EXISTS"))
    db.close()


def test_the_agents_store_opens_a_file_of_the_first_layout(tmp_path: Path) -> None:
    path = tmp_path / "haltwise.db"
    first_layout_file(path)
    with Store(path) as store:
        conversation = store.new_conversation(model="m")
        store.start_run(conversation, "run-2", "hello")
        store.save_turn(conversation, "run-2", 0, [{"role": "user", "content": "hello"}], {})
        assert store.load_run("run-2").messages == [{"role": "user", "content": "hello"}]
        assert [(s.spent, s.reserved) for s in store.budgets()] == [(500, 300)]


def test_a_file_from_a_newer_haltwise_is_refused_saying_so(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    SqliteLedger(path).close()
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA user_version = 99")
    db.close()
    with pytest.raises(ConfigurationError, match=r"new\.db.*newer haltwise.*Upgrade haltwise"):
        SqliteLedger(path)
