"""The ledger: what outlives one governor and what many governors share.

- **Checkpoints** of runs' counts, to resume a run.
- **Budgets**, spent by every governor that names the same key: an amount is granted only if
  it fits the caller's limit, in one atomic step (``charge`` for a count, final at once;
  ``reserve`` for a model request's worst case, then ``commit`` of what it really cost). A
  reservation holds for a lease; one never committed (its process died) is released when the
  lease runs out, and a live run's ``heartbeat`` renews its leases.
- **Live runs**: registration, heartbeats with counts and status, the end with the outcome.
- **Decisions** a run waits on: a question posted, the first answer wins.
- **Kill flags**: a live run told to stop from elsewhere. A flag lasts until the run ends (or
  registers again, resumed): it never stops a later run of the same id.

The engine talks only to this interface. ``MemoryLedger`` is the in-process backend; SQLite and
Redis live in ``haltwise.ledgers`` and pass the same contract tests. Amounts are ints in each
budget's own unit (turns, tokens, or nano-dollars for money). Times are wall-clock epoch
seconds, from the ledger's own clock, so that leases mean the same on every machine.
"""

from __future__ import annotations

import copy
import secrets
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from .errors import LedgerError

__all__ = [
    "Budget",
    "BudgetState",
    "Grant",
    "Ledger",
    "MemoryLedger",
    "Pending",
    "RunInfo",
]

#: How long a reservation holds without a heartbeat, by default.
DEFAULT_LEASE = 300.0


@dataclass(frozen=True)
class Budget:
    """One shared budget: a key, what it counts, and the window it counts in."""

    key: str
    #: What the amounts count: "turns", "model_calls", "tool_calls", "tool_calls:NAME",
    #: "input_tokens", "output_tokens", "total_tokens" or "nano_usd".
    metric: str
    #: The window's label ("forever", "2026-11-23", "2026-W48", ...).
    window: str = "forever"
    #: When the window ends (epoch seconds), None for a budget with no period.
    resets_at: float | None = None

    @property
    def id(self) -> str:
        return f"{self.key}\x1f{self.metric}\x1f{self.window}"


@dataclass(frozen=True)
class Grant:
    """A budget's answer: ``amount`` granted (0: refused), and ``used`` (spent and held) before
    it. ``id`` names a reservation, to commit or release; "" for a charge, which is final."""

    id: str
    amount: int
    used: int

    @property
    def granted(self) -> bool:
        return self.amount > 0


@dataclass(frozen=True)
class BudgetState:
    """A budget's standing, for ``haltwise budgets`` and the dashboard."""

    budget: Budget
    spent: int
    reserved: int
    #: The limit its latest spender gave (each governor checks against its own).
    limit: int | None


@dataclass(frozen=True)
class RunInfo:
    """A run registered in the ledger."""

    run_id: str
    host: str = ""
    pid: int = 0
    model: str = ""
    limits: str = ""
    #: The budget keys its limits spend.
    keys: tuple[str, ...] = ()
    #: Its counts as of its last heartbeat (``Usage`` as JSON-compatible data; from a
    #: ``LiveRun``, its ``activity`` too: see ``haltwise.drivers.live``).
    counts: dict[str, Any] = field(default_factory=dict)
    #: "running", "waiting" (for a human), or the outcome's status once it ended.
    status: str = "running"
    started: float = 0.0
    heartbeat: float = 0.0
    #: The outcome (JSON-compatible), once it ended.
    outcome: dict[str, Any] | None = None

    @property
    def live(self) -> bool:
        return self.outcome is None

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "host": self.host,
            "pid": self.pid,
            "model": self.model,
            "limits": self.limits,
            "keys": list(self.keys),
            "counts": self.counts,
            "status": self.status,
            "started": self.started,
            "heartbeat": self.heartbeat,
            "outcome": self.outcome,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunInfo:
        return cls(
            run_id=str(data["run_id"]),
            host=str(data.get("host", "")),
            pid=int(data.get("pid", 0)),
            model=str(data.get("model", "")),
            limits=str(data.get("limits", "")),
            keys=tuple(data.get("keys", ())),
            counts=dict(data.get("counts") or {}),
            status=str(data.get("status", "")),
            started=float(data.get("started", 0.0)),
            heartbeat=float(data.get("heartbeat", 0.0)),
            outcome=data.get("outcome"),
        )


@dataclass(frozen=True)
class Pending:
    """A question a run waits on, and its answer once one came."""

    run_id: str
    question: str
    choices: tuple[str, ...]
    asked: float
    #: "continue", "extend", "wrap_up" or "abort"; None while unanswered.
    answer: str | None = None
    #: N, for "extend".
    amount: int | None = None


class Ledger(ABC):
    """Where state outlives one governor, and what governors share. Every method is atomic
    and safe to call from any thread (and, for the shared backends, any process)."""

    def close(self) -> None:  # noqa: B027 - most backends have something to close, not all
        """Let go of connections and files."""

    # --- checkpoints -----------------------------------------------------------------------

    @abstractmethod
    def save_checkpoint(self, run_id: str, data: dict[str, Any]) -> str:
        """Store a run's checkpoint (JSON-compatible data) and return a reference to it."""

    @abstractmethod
    def load_checkpoint(self, ref: str) -> dict[str, Any]:
        """The checkpoint behind ``ref``; ``LedgerError`` when there is none."""

    # --- budgets ---------------------------------------------------------------------------

    @abstractmethod
    def charge(self, budget: Budget, amount: int, limit: int) -> Grant:
        """Add ``amount`` to the budget if what is used (spent and held) plus ``amount`` stays
        within ``limit``; final at once (turns, calls)."""

    @abstractmethod
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
        """Hold ``amount`` if it fits ``limit``; or, with ``minimum``, as much as fits if that
        is at least ``minimum``. The hold lasts ``lease`` seconds unless ``holder`` renews it."""

    @abstractmethod
    def commit(self, budget: Budget, grant_id: str, actual: int) -> int:
        """Spend ``actual`` in place of a reservation (more or less than it held); what the
        budget has used after. A grant is spent once: committing it again spends nothing
        more. A grant whose lease ran out is still spent (what it paid for happened)."""

    @abstractmethod
    def release(self, budget: Budget, grant_id: str) -> None:
        """Let a reservation go, spending nothing (its request was never sent)."""

    @abstractmethod
    def spend(self, budget: Budget, amount: int, op_id: str) -> int:
        """Add ``amount`` unconditionally (what a run spent while the ledger was unreachable);
        the same ``op_id`` twice spends once. What the budget has used after."""

    @abstractmethod
    def budgets(self) -> list[BudgetState]:
        """Every budget the ledger holds, expired reservations swept."""

    # --- live runs -------------------------------------------------------------------------

    @abstractmethod
    def register(self, info: RunInfo) -> None:
        """A run started (or resumed): record it as live, with no kill flag (one set on an
        earlier run of the same id was for that run)."""

    @abstractmethod
    def heartbeat(
        self,
        run_id: str,
        counts: dict[str, Any],
        status: str,
        lease: float = DEFAULT_LEASE,
        *,
        info: RunInfo | None = None,
    ) -> str | None:
        """A live run is still going: its counts and status; its reservations' leases renewed.
        The reason it was told to stop, if it was (``kill``), else None. With ``info`` (what
        the run registered), a ledger that no longer has the run (a Redis restarted without
        persistence) records it as live again, so that the fleet sees it."""

    @abstractmethod
    def finish(self, run_id: str, outcome: dict[str, Any]) -> None:
        """A run ended with ``outcome`` (JSON-compatible). Its open question, if any, goes:
        an answer that comes later is refused; so does its kill flag."""

    @abstractmethod
    def runs(self, *, live: bool = True, limit: int = 100) -> list[RunInfo]:
        """Live runs (``live=True``) or every run, most recent first."""

    # --- kill flags ------------------------------------------------------------------------

    @abstractmethod
    def kill(self, run_id: str | None, reason: str, *, key: str | None = None) -> list[str]:
        """Tell a live run to stop (``run_id``), or every live run (None), or every live run
        spending budget ``key``; the run ids told. A run that is not live (it ended, or no run
        has that id) is not told: ``[]``."""

    @abstractmethod
    def killed(self, run_id: str) -> str | None:
        """The reason ``run_id`` was told to stop, or None."""

    # --- decisions -------------------------------------------------------------------------

    @abstractmethod
    def ask(self, run_id: str, question: str, choices: tuple[str, ...]) -> None:
        """Post the question a run now waits on (replacing an older one of that run's)."""

    @abstractmethod
    def answer(self, run_id: str, choice: str, amount: int | None = None) -> Pending:
        """Answer a run's open question. The first answer wins: ``LedgerError`` if there is
        no open question for ``run_id`` or it was already answered."""

    @abstractmethod
    def pending(self, run_id: str | None = None) -> list[Pending]:
        """Open and answered questions (of one run, or all), oldest first."""


def new_id() -> str:
    return secrets.token_hex(8)


class MemoryLedger(Ledger):
    """A ledger in this process's memory: for tests and single-process use."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._checkpoints: dict[str, dict[str, Any]] = {}
        self._budgets: dict[str, Budget] = {}
        self._spent: dict[str, int] = {}
        self._limits: dict[str, int] = {}
        #: grant id -> (budget id, amount held, holder, expires)
        self._holds: dict[str, tuple[str, int, str, float]] = {}
        #: Grants and spends already counted, so that none is counted twice.
        self._done: set[str] = set()
        self._runs: dict[str, RunInfo] = {}
        self._kills: dict[str, str] = {}
        self._pending: dict[str, Pending] = {}

    def save_checkpoint(self, run_id: str, data: dict[str, Any]) -> str:
        ref = f"memory:{run_id}"
        with self._lock:
            self._checkpoints[ref] = copy.deepcopy(data)
        return ref

    def load_checkpoint(self, ref: str) -> dict[str, Any]:
        with self._lock:
            data = self._checkpoints.get(ref)
        if data is None:
            raise LedgerError(f"no checkpoint {ref!r} in this process's memory ledger")
        return copy.deepcopy(data)

    # --- budgets ---------------------------------------------------------------------------

    def _used(self, budget_id: str, now: float) -> int:
        """Spent plus held, expired holds swept (their amounts were never committed)."""
        held = 0
        for grant_id, (owner, amount, _, expires) in list(self._holds.items()):
            if expires <= now:
                del self._holds[grant_id]
            elif owner == budget_id:
                held += amount
        return self._spent.get(budget_id, 0) + held

    def _know(self, budget: Budget, limit: int) -> str:
        self._budgets.setdefault(budget.id, budget)
        self._limits[budget.id] = limit
        return budget.id

    def charge(self, budget: Budget, amount: int, limit: int) -> Grant:
        with self._lock:
            budget_id = self._know(budget, limit)
            used = self._used(budget_id, self._clock())
            if used + amount > limit:
                return Grant("", 0, used)
            self._spent[budget_id] = self._spent.get(budget_id, 0) + amount
            return Grant("", amount, used)

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
        with self._lock:
            now = self._clock()
            budget_id = self._know(budget, limit)
            used = self._used(budget_id, now)
            granted = min(amount, limit - used)
            if granted < (amount if minimum is None else max(minimum, 1)):
                return Grant("", 0, used)
            grant_id = new_id()
            self._holds[grant_id] = (budget_id, granted, holder, now + lease)
            return Grant(grant_id, granted, used)

    def commit(self, budget: Budget, grant_id: str, actual: int) -> int:
        return self.spend(budget, actual, grant_id)

    def release(self, budget: Budget, grant_id: str) -> None:
        with self._lock:
            self._holds.pop(grant_id, None)
            self._done.add(grant_id)

    def spend(self, budget: Budget, amount: int, op_id: str) -> int:
        with self._lock:
            budget_id = budget.id
            self._budgets.setdefault(budget_id, budget)
            self._holds.pop(op_id, None)
            if op_id not in self._done:
                self._done.add(op_id)
                self._spent[budget_id] = self._spent.get(budget_id, 0) + amount
            return self._used(budget_id, self._clock())

    def budgets(self) -> list[BudgetState]:
        with self._lock:
            now = self._clock()
            states = []
            for budget_id, budget in self._budgets.items():
                used = self._used(budget_id, now)
                spent = self._spent.get(budget_id, 0)
                states.append(BudgetState(budget, spent, used - spent, self._limits.get(budget_id)))
            return states

    # --- live runs -------------------------------------------------------------------------

    def register(self, info: RunInfo) -> None:
        with self._lock:
            now = self._clock()
            self._runs[info.run_id] = replace(
                info, started=info.started or now, heartbeat=now, outcome=None
            )
            self._kills.pop(info.run_id, None)

    def heartbeat(
        self,
        run_id: str,
        counts: dict[str, Any],
        status: str,
        lease: float = DEFAULT_LEASE,
        *,
        info: RunInfo | None = None,
    ) -> str | None:
        with self._lock:
            now = self._clock()
            known = self._runs.get(run_id)
            if known is None and info is not None:
                known = replace(info, started=info.started or now, outcome=None)
            if known is not None:
                self._runs[run_id] = replace(
                    known, counts=dict(counts), status=status, heartbeat=now
                )
            for grant_id, (budget_id, amount, holder, expires) in list(self._holds.items()):
                if holder == run_id and expires > now:
                    self._holds[grant_id] = (budget_id, amount, holder, now + lease)
            return self._kills.get(run_id)

    def finish(self, run_id: str, outcome: dict[str, Any]) -> None:
        with self._lock:
            info = self._runs.get(run_id) or RunInfo(run_id, started=self._clock())
            status = str(outcome.get("status", "ended"))
            self._runs[run_id] = replace(
                info, outcome=dict(outcome), status=status, heartbeat=self._clock()
            )
            self._pending.pop(run_id, None)
            self._kills.pop(run_id, None)

    def runs(self, *, live: bool = True, limit: int = 100) -> list[RunInfo]:
        with self._lock:
            chosen = [info for info in self._runs.values() if info.live or not live]
        chosen.sort(key=lambda info: info.started, reverse=True)
        return chosen[:limit]

    # --- kill flags ------------------------------------------------------------------------

    def kill(self, run_id: str | None, reason: str, *, key: str | None = None) -> list[str]:
        with self._lock:
            told = [
                info.run_id
                for info in self._runs.values()
                if info.live
                and (run_id is None or info.run_id == run_id)
                and (key is None or key in info.keys)
            ]
            for told_id in told:
                self._kills[told_id] = reason
            return told

    def killed(self, run_id: str) -> str | None:
        with self._lock:
            return self._kills.get(run_id)

    # --- decisions -------------------------------------------------------------------------

    def ask(self, run_id: str, question: str, choices: tuple[str, ...]) -> None:
        with self._lock:
            self._pending[run_id] = Pending(run_id, question, tuple(choices), self._clock())

    def answer(self, run_id: str, choice: str, amount: int | None = None) -> Pending:
        with self._lock:
            pending = self._pending.get(run_id)
            if pending is None:
                raise LedgerError(f"run {run_id!r} is not waiting for an answer")
            if pending.answer is not None:
                raise LedgerError(
                    f"run {run_id!r} was already answered ({pending.answer}); the first answer wins"
                )
            if choice not in pending.choices:
                raise LedgerError(
                    f"{choice!r} is not a choice for run {run_id!r}: one of "
                    f"{', '.join(pending.choices)}"
                )
            answered = replace(pending, answer=choice, amount=amount)
            self._pending[run_id] = answered
            return answered

    def pending(self, run_id: str | None = None) -> list[Pending]:
        with self._lock:
            chosen = [p for p in self._pending.values() if run_id is None or p.run_id == run_id]
        return sorted(chosen, key=lambda p: p.asked)
