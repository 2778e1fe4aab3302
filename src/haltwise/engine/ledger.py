"""The ledger: what outlives one governor and what many governors share.

- **Checkpoints** of runs' counts, to resume a run.
- **Budgets**, spent by every governor that names the same key: an amount is granted only if
  it fits the caller's limit, in one atomic step (``charge`` for a count, final at once;
  ``reserve`` for a model request's worst case, then ``commit`` of what it really cost). A
  reservation holds for a lease; one never committed (its process died) is released when the
  lease runs out, and a live run's ``heartbeat`` renews its leases.
- **Live runs**: registration, heartbeats with counts and status, the end with the outcome;
  listed by start (``runs``) or by end (``ended_runs``: what finished recently), found by id
  (``run_info``), the live ones counted (``live_count``). A live run not heard from for
  ``gone_after`` seconds (60 by default, or five of its heartbeat intervals if longer) is
  *gone*: its process died (killed, its machine lost) without recording an end. It is still
  listed, as gone; its question is not, and it cannot be answered. A heartbeat makes it live
  again.
- **Decisions** a run waits on: a question posted, the first answer wins; only a running run
  (live, not gone) can be answered, and only its question is listed.
- **Kill flags**: a live run told to stop from elsewhere. A flag lasts until the run ends (or
  registers again, resumed): it never stops a later run of the same id.

**Retention**: what is over is kept for ``retention`` seconds (``RETENTION``, 7 days, by
default), then dropped (looked for every ten minutes at most): a finished run (with its
question and kill flag) from its end, a gone run from when it went silent, and a budget window
(``per=``) from when it reset. A live run and a current window are never dropped, nor is a
budget with no period; checkpoints are kept (a run may be resumed from one at any time), in
memory the latest ``MEMORY_CHECKPOINTS`` of the process.

The engine talks only to this interface. ``MemoryLedger`` is the in-process backend; SQLite and
Redis live in ``haltwise.ledgers`` and pass the same contract tests. Amounts are ints in each
budget's own unit (turns, tokens, or nano-dollars for money). Times are wall-clock epoch
seconds, from the ledger's own clock, so that leases mean the same on every machine.
"""

from __future__ import annotations

import copy
import secrets
import sys
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from .errors import LedgerError

__all__ = [
    "GONE_BEATS",
    "GONE_SECONDS",
    "MEMORY_CHECKPOINTS",
    "RETENTION",
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

#: A live run not heard from for this long (seconds), or for ``GONE_BEATS`` of its heartbeat
#: intervals if that is longer, is gone: its process died without recording an end.
GONE_SECONDS = 60.0
GONE_BEATS = 5

#: How long what is over is kept (seconds): finished and gone runs, budget windows that reset.
RETENTION = 7 * 86400.0

#: How often a ledger object looks for what to drop, at most (seconds).
PRUNE_SECONDS = 600.0

#: How many checkpoints this process's memory keeps (``MemoryLedger``), the latest saved: a
#: long-lived process whose runs stop by the million would otherwise fill its memory with them.
MEMORY_CHECKPOINTS = 10_000


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

    def ended(self, now: float) -> bool:
        """Whether the window is over at ``now`` (epoch seconds): nothing spends it any more."""
        return self.resets_at is not None and self.resets_at <= now


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
    #: How often it heartbeats (seconds; 0: not said), so that a slow beat is not taken for
    #: a process that is gone.
    interval: float = 0.0

    @property
    def live(self) -> bool:
        return self.outcome is None

    def silence(self, gone_after: float = GONE_SECONDS) -> float:
        """How long a live run may go unheard before it is gone (seconds)."""
        return max(gone_after, GONE_BEATS * self.interval)

    def gone(self, now: float, gone_after: float = GONE_SECONDS) -> bool:
        """Whether the run is live but has not been heard from for ``silence()`` seconds at
        ``now`` (epoch seconds, the ledger's clock): its process is gone."""
        return self.live and now - self.heartbeat > self.silence(gone_after)

    def running(self, now: float, gone_after: float = GONE_SECONDS) -> bool:
        """Live and not gone: it can be answered."""
        return self.live and not self.gone(now, gone_after)

    def kept_until(self, gone_after: float = GONE_SECONDS, retention: float = RETENTION) -> float:
        """When (epoch seconds) a ledger may drop the run: ``retention`` after it ended, or
        after it went gone (a run that beats again is kept on)."""
        return self.heartbeat + (self.silence(gone_after) if self.live else 0.0) + retention

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
            "interval": self.interval,
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
            interval=float(data.get("interval") or 0.0),
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


def not_running(run_id: str, info: RunInfo | None, now: float, gone_after: float) -> LedgerError:
    """The error for answering a run that is not running, saying why (``info``: the run as the
    ledger has it, None if it has none)."""
    if info is None:
        why = "no run has that id (see haltwise runs --all; give the id whole)"
    elif not info.live:
        why = f"it has ended ({info.status})"
    else:
        why = f"{unheard(info, now, gone_after)}: its process is gone, and its question with it"
    return LedgerError(f"run {run_id!r} is not running: {why}")


def unheard(info: RunInfo, now: float, gone_after: float) -> str:
    """How long a gone run has been silent, and how long it was allowed, said in words."""
    silent, allowed = max(0.0, now - info.heartbeat), info.silence(gone_after)
    return f"it has not been heard from for {silent:.0f}s (more than {allowed:g}s)"


class Ledger(ABC):
    """Where state outlives one governor, and what governors share. Every method is atomic
    and safe to call from any thread (and, for the shared backends, any process)."""

    #: How long a live run may go unheard before it is gone (``RunInfo.gone``), in seconds.
    gone_after: float = GONE_SECONDS
    #: How long what is over is kept, in seconds (see the module's docstring).
    retention: float = RETENTION

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
        """Every budget the ledger holds, expired reservations swept: those of past windows
        too, until ``retention`` after they reset (``Budget.ended`` tells them apart)."""

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
        """Live runs (``live=True``; gone ones among them) or every run kept, the latest
        started first."""

    def ended_runs(self, *, limit: int = 100) -> list[RunInfo]:
        """The runs that ended, the latest end first (a run's last heartbeat is its end): what
        finished recently, however long ago each started. This default reads every run kept;
        the backends in haltwise read only those asked for."""
        ended = [info for info in self.runs(live=False, limit=sys.maxsize) if not info.live]
        ended.sort(key=lambda info: info.heartbeat, reverse=True)
        return ended[: max(limit, 0)]

    def run_info(self, run_id: str) -> RunInfo | None:
        """The run ``run_id`` as the ledger keeps it (live, gone or ended), None if it has no
        such run. This default reads every run kept; the backends in haltwise read one."""
        kept = self.runs(live=False, limit=sys.maxsize)
        return next((info for info in kept if info.run_id == run_id), None)

    def live_count(self) -> int:
        """How many runs are live (gone ones among them), however many ``runs()`` would list.
        This default reads them all; the backends in haltwise count."""
        return len(self.runs(live=True, limit=sys.maxsize))

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
        """Answer a run's open question. The first answer wins: ``LedgerError`` if the run is
        not running (no run has that id, it ended, or it is gone: ``not_running``), has no
        open question, or it was already answered."""

    @abstractmethod
    def pending(self, run_id: str | None = None) -> list[Pending]:
        """Open and answered questions of running runs (of one run, or all), oldest first: the
        question of a run that ended or is gone is not listed."""


def new_id() -> str:
    return secrets.token_hex(8)


#: The checkpoints saved by the memory ledgers of this process, by reference, oldest first
#: (``MemoryLedger``), and the lock they are read and written under.
_checkpoints: dict[str, dict[str, Any]] = {}
_checkpoints_lock = threading.Lock()


class MemoryLedger(Ledger):
    """A ledger in this process's memory: for tests and single-process use.

    Its checkpoints are the process's, as a SQLite ledger's are its file's: any memory ledger
    of the process finds one that another saved, so that a run stopped under one governor is
    resumed by a new one with a ledger of its own (``Governor(limits).restore(
    outcome.checkpoint)``). The latest ``MEMORY_CHECKPOINTS`` are kept; they go with the
    process. Budgets, runs, questions and kill flags are the ledger object's own.
    """

    def __init__(
        self,
        clock: Callable[[], float] = time.time,
        *,
        gone_after: float = GONE_SECONDS,
        retention: float = RETENTION,
    ) -> None:
        self._clock = clock
        self.gone_after = gone_after
        self.retention = retention
        self._next_prune = 0.0
        self._lock = threading.Lock()
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
        saved = copy.deepcopy(data)
        with _checkpoints_lock:
            _checkpoints.pop(ref, None)  # saved again: now the latest
            _checkpoints[ref] = saved
            while len(_checkpoints) > MEMORY_CHECKPOINTS:
                del _checkpoints[next(iter(_checkpoints))]
        return ref

    def load_checkpoint(self, ref: str) -> dict[str, Any]:
        with _checkpoints_lock:
            data = _checkpoints.get(ref)
        if data is not None:
            return copy.deepcopy(data)
        if not ref.startswith("memory:"):
            raise LedgerError(
                f"no checkpoint {ref!r} in this process's memory: it was saved by another kind "
                "of ledger; resume it with a governor on that ledger, e.g. Governor(limits, "
                "ledger='sqlite:///PATH') for 'sqlite:...', ledger='redis://HOST:PORT/DB' for "
                "'redis:...'"
            )
        raise LedgerError(
            f"no checkpoint {ref!r} in this process's memory: a memory ledger's checkpoints go "
            f"with its process (the latest {MEMORY_CHECKPOINTS:,} are kept), so one saved by "
            "another process, or before this one restarted, is not here. To resume runs in "
            "another process, keep their checkpoints in a ledger that outlives it: "
            "Guard(..., ledger='sqlite:///PATH') or Governor(limits, ledger='sqlite:///PATH')"
        )

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

    def _prune(self, now: float) -> None:
        """Drop the runs and budget windows over for longer than ``retention`` (at most every
        ``PRUNE_SECONDS``)."""
        if now < self._next_prune:
            return
        self._next_prune = now + PRUNE_SECONDS
        for run_id, info in list(self._runs.items()):
            if info.kept_until(self.gone_after, self.retention) < now:
                del self._runs[run_id]
                self._pending.pop(run_id, None)
                self._kills.pop(run_id, None)
        for budget_id, budget in list(self._budgets.items()):
            if budget.resets_at is not None and budget.resets_at + self.retention < now:
                self._used(budget_id, now)  # its holds lapsed long ago: swept
                if not any(hold[0] == budget_id for hold in self._holds.values()):
                    del self._budgets[budget_id]
                    self._spent.pop(budget_id, None)
                    self._limits.pop(budget_id, None)

    def _know(self, budget: Budget, limit: int) -> str:
        self._budgets.setdefault(budget.id, budget)
        self._limits[budget.id] = limit
        return budget.id

    def charge(self, budget: Budget, amount: int, limit: int) -> Grant:
        with self._lock:
            now = self._clock()
            self._prune(now)
            budget_id = self._know(budget, limit)
            used = self._used(budget_id, now)
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
            self._prune(now)
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
            self._prune(now)
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

    def ended_runs(self, *, limit: int = 100) -> list[RunInfo]:
        with self._lock:
            ended = [info for info in self._runs.values() if not info.live]
        ended.sort(key=lambda info: info.heartbeat, reverse=True)
        return ended[: max(limit, 0)]

    def run_info(self, run_id: str) -> RunInfo | None:
        with self._lock:
            return self._runs.get(run_id)

    def live_count(self) -> int:
        with self._lock:
            return sum(1 for info in self._runs.values() if info.live)

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
            info, now = self._runs.get(run_id), self._clock()
            if info is None or not info.running(now, self.gone_after):
                raise not_running(run_id, info, now, self.gone_after)
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
            now = self._clock()
            chosen = [
                p
                for p in self._pending.values()
                if (run_id is None or p.run_id == run_id)
                and (info := self._runs.get(p.run_id)) is not None
                and info.running(now, self.gone_after)
            ]
        return sorted(chosen, key=lambda p: p.asked)
