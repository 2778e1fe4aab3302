"""The agent's embedded store: one SQLite file holding conversations, runs and checkpoints.

``Store`` is a ``Ledger``, so the governor checkpoints into it when a run stops; the agent also
checkpoints after every turn, together with the messages of that turn, in one transaction: a
crash loses nothing that was checkpointed, and a checkpoint never refers to messages that were
not saved. WAL mode and a busy timeout make it safe for several processes on one machine.

Where the file lives: ``--store PATH``, else ``$HALTWISE_STORE``, else
``$XDG_DATA_HOME/haltwise/haltwise.db``, else ``~/.local/share/haltwise/haltwise.db``.

Tables: ``conversations`` (one chat, or one headless run), ``runs`` (one user prompt each, with
its outcome), ``messages`` (a conversation's chat messages, in order), ``checkpoints`` (the
latest counts of each run, as ``Governor.checkpoint()`` gives them, and how many messages of its
conversation they go with). Resuming a run forks its conversation: the resumed run's messages go
to a new conversation, so the old one reads as it happened.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..engine.errors import ConfigurationError, LedgerError
from ..engine.outcome import Outcome
from ..ledgers.sqlite import SqliteLedger

__all__ = ["RunRecord", "Store", "default_store_path"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS conversations (
    id TEXT PRIMARY KEY,
    created_at REAL NOT NULL,
    model TEXT NOT NULL DEFAULT '',
    base_url TEXT NOT NULL DEFAULT '',
    workspace TEXT NOT NULL DEFAULT ''
);
CREATE TABLE IF NOT EXISTS runs (
    id TEXT PRIMARY KEY,
    conversation_id TEXT NOT NULL REFERENCES conversations(id),
    prompt TEXT NOT NULL,
    started_at REAL NOT NULL,
    ended_at REAL,
    status TEXT,
    reason TEXT,
    outcome TEXT
);
CREATE TABLE IF NOT EXISTS messages (
    conversation_id TEXT NOT NULL REFERENCES conversations(id),
    seq INTEGER NOT NULL,
    run_id TEXT,
    message TEXT NOT NULL,
    PRIMARY KEY (conversation_id, seq)
);
CREATE INDEX IF NOT EXISTS runs_by_start ON runs(started_at);
"""

_PREFIX = "sqlite:"


def default_store_path(environ: Mapping[str, str] | None = None) -> Path:
    """Where the store lives when ``--store`` is not given."""
    environ = os.environ if environ is None else environ
    if environ.get("HALTWISE_STORE"):
        return Path(environ["HALTWISE_STORE"]).expanduser()
    data_home = environ.get("XDG_DATA_HOME") or str(Path("~/.local/share").expanduser())
    return Path(data_home) / "haltwise" / "haltwise.db"


@dataclass(frozen=True)
class RunRecord:
    """A stored run, with what it takes to resume it."""

    run_id: str
    conversation_id: str
    prompt: str
    status: str | None
    reason: str | None
    model: str
    base_url: str
    workspace: str
    #: The conversation's messages, up to the run's latest checkpoint.
    messages: list[dict[str, Any]]
    #: The run's latest checkpoint (``Governor.checkpoint()`` data), if any.
    checkpoint: dict[str, Any] | None
    outcome: dict[str, Any] | None


class Store(SqliteLedger):
    """The SQLite store: the SQLite ledger with the agent's conversations, runs and messages.
    Thread-safe; safe across processes (WAL, busy timeout)."""

    schema = _SCHEMA

    def __init__(self, path: str | Path) -> None:
        try:
            super().__init__(path)
        except ConfigurationError as error:
            raise ConfigurationError(
                f"{error}. Choose another file with --store PATH or HALTWISE_STORE"
            ) from None

    def __enter__(self) -> Store:
        return self

    def __repr__(self) -> str:
        return f"Store({str(self.path)!r})"

    # ----------------------------------------------------------------------------------------
    # Conversations and runs

    def new_conversation(self, *, model: str = "", base_url: str = "", workspace: str = "") -> str:
        conversation_id = uuid.uuid4().hex[:12]
        with self._transaction() as db:
            db.execute(
                "INSERT INTO conversations (id, created_at, model, base_url, workspace) "
                "VALUES (?, ?, ?, ?, ?)",
                (conversation_id, time.time(), model, base_url, workspace),
            )
        return conversation_id

    def start_run(self, conversation_id: str, run_id: str, prompt: str) -> None:
        with self._transaction() as db:
            db.execute(
                "INSERT INTO runs (id, conversation_id, prompt, started_at) VALUES (?, ?, ?, ?) "
                "ON CONFLICT(id) DO UPDATE SET conversation_id=excluded.conversation_id, "
                "ended_at=NULL, status=NULL, reason=NULL, outcome=NULL",
                (run_id, conversation_id, prompt, time.time()),
            )

    def save_turn(
        self,
        conversation_id: str,
        run_id: str,
        first_seq: int,
        messages: Sequence[Mapping[str, Any]],
        checkpoint: dict[str, Any],
    ) -> None:
        """Messages ``first_seq...`` of the conversation and the run's counts, atomically."""
        total = first_seq + len(messages)
        with self._transaction() as db:
            db.executemany(
                "INSERT OR REPLACE INTO messages (conversation_id, seq, run_id, message) "
                "VALUES (?, ?, ?, ?)",
                [
                    (conversation_id, first_seq + i, run_id, json.dumps(message))
                    for i, message in enumerate(messages)
                ],
            )
            db.execute(
                "INSERT INTO checkpoints (run_id, saved_at, messages, data) VALUES (?, ?, ?, ?) "
                "ON CONFLICT(run_id) DO UPDATE SET saved_at=excluded.saved_at, "
                "messages=excluded.messages, data=excluded.data",
                (run_id, time.time(), total, json.dumps(checkpoint)),
            )

    def end_run(self, run_id: str, outcome: Outcome) -> None:
        with self._transaction() as db:
            db.execute(
                "UPDATE runs SET ended_at = ?, status = ?, reason = ?, outcome = ? WHERE id = ?",
                (
                    time.time(),
                    str(outcome.status),
                    outcome.reason,
                    json.dumps(_outcome(outcome)),
                    run_id,
                ),
            )

    def latest_run(self) -> str | None:
        rows = self._query("SELECT id FROM runs ORDER BY started_at DESC, rowid DESC LIMIT 1")
        return str(rows[0][0]) if rows else None

    def recent_runs(self, limit: int = 20) -> list[tuple[str, str, str | None, str | None]]:
        """The latest runs: (run id, prompt, status, reason), newest first."""
        rows = self._query(
            "SELECT id, prompt, status, reason FROM runs ORDER BY started_at DESC LIMIT ?", (limit,)
        )
        return [(str(a), str(b), c, d) for a, b, c, d in rows]

    def load_run(self, run_id: str) -> RunRecord:
        """A run and its conversation, as far as its latest checkpoint; ``LedgerError`` if none."""
        rows = self._query(
            "SELECT r.conversation_id, r.prompt, r.status, r.reason, r.outcome, c.model, "
            "c.base_url, c.workspace FROM runs r JOIN conversations c ON c.id = r.conversation_id "
            "WHERE r.id = ?",
            (run_id.removeprefix(_PREFIX),),
        )
        if not rows:
            raise LedgerError(f"no run {run_id!r} in the store {str(self.path)!r}")
        conversation_id, prompt, status, reason, outcome, model, base_url, workspace = rows[0]
        run_id = run_id.removeprefix(_PREFIX)
        saved = self._query("SELECT data, messages FROM checkpoints WHERE run_id = ?", (run_id,))
        checkpoint = json.loads(saved[0][0]) if saved else None
        upto = saved[0][1] if saved and saved[0][1] is not None else None
        sql = "SELECT message FROM messages WHERE conversation_id = ?"
        args: list[Any] = [conversation_id]
        if upto is not None:
            sql += " AND seq < ?"
            args.append(upto)
        messages = [json.loads(row[0]) for row in self._query(sql + " ORDER BY seq", args)]
        return RunRecord(
            run_id=run_id,
            conversation_id=str(conversation_id),
            prompt=str(prompt),
            status=status,
            reason=reason,
            model=str(model),
            base_url=str(base_url),
            workspace=str(workspace),
            messages=messages,
            checkpoint=checkpoint,
            outcome=json.loads(outcome) if outcome else None,
        )


def _outcome(outcome: Outcome) -> dict[str, Any]:
    usage = outcome.usage
    return {
        "status": str(outcome.status),
        "reason": outcome.reason,
        "message": outcome.message,
        "run_id": outcome.run_id,
        "turns": usage.turns,
        "model_calls": usage.model_calls,
        "tool_calls": usage.tool_calls,
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "cost": None if usage.cost is None else str(usage.cost),
        "elapsed": usage.elapsed,
        "partial_output": outcome.partial_output,
        "suggestions": list(outcome.suggestions),
        "checkpoint": outcome.checkpoint,
        "limit": outcome.limit,
    }
