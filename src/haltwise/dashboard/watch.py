"""What the dashboard knows of the fleet: the ledger read again and again, as one snapshot.

``Watcher.poll`` reads the ledger (live runs, the runs that ended most recently, open
questions, budgets) and builds the snapshot every page is sent; it says whether anything the
page shows changed, so that a snapshot goes out only when it did. A ledger that cannot be read
leaves the last snapshot in place, marked unreachable with the error. A live run not heard from
for the ledger's ``gone_after`` is shown as gone (its process died without ending it), whatever
it said last. At most ``MAX_LIVE`` live runs are read; the snapshot says how many there are.

The ledger keeps no history of a run, only its latest heartbeat; so the watcher keeps, for
each run it sees, what came in heartbeat by heartbeat: the run's events (each heartbeat
carries those since the one before: ``haltwise.drivers.live``), its status changes, answers,
warnings and its end, and its spend over time. A run's timeline starts when this dashboard
first saw the run; both are bounded. This module needs nothing beyond haltwise itself.
"""

from __future__ import annotations

import json
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

from ..cli._fleet import STALE_SECONDS, money
from ..engine.errors import LedgerError
from ..engine.ledger import BudgetState, Ledger, Pending, RunInfo

__all__ = ["MAX_LIVE", "Watcher"]

#: At most this many live runs are read per poll (the snapshot's ``live_total`` counts them all).
MAX_LIVE = 10_000
#: Finished runs shown, the latest end first.
RECENT = 50
#: Finished runs are read again as soon as a run leaves the live ones (it ended), and else
#: every this many seconds (for runs that ended between two reads): most reads skip them.
RECENT_EVERY = 2.0
#: Timeline entries and spend points kept per run.
HISTORY = 500
#: Runs whose history is kept; those no longer live or recent go first.
TRACKED = 2_000

#: How a limit's leftover is said, by its reason code.
_UNITS = {
    "turn_limit": "turns",
    "model_call_limit": "model calls",
    "tool_call_limit": "tool calls",
    "token_limit": "tokens",
}


@dataclass
class History:
    """What the watcher saw of one run."""

    #: (epoch seconds, kind, label, decision) entries, oldest first.
    timeline: deque[tuple[float, str, str, str]] = field(
        default_factory=lambda: deque(maxlen=HISTORY)
    )
    #: (epoch seconds, dollars or None, tokens) at each heartbeat that changed them.
    spend: deque[tuple[float, float | None, int]] = field(
        default_factory=lambda: deque(maxlen=HISTORY)
    )
    #: When the watcher first saw the run.
    since: float = 0.0
    last_number: int = 0
    last_status: str = ""
    #: The heartbeat time and liveness last read: a run is looked at again when either moves.
    last_seen: tuple[float, bool] = (0.0, True)
    warnings_seen: set[tuple[float, str]] = field(default_factory=set)
    answer_seen: tuple[float, str | None] = (0.0, None)


class Watcher:
    """Reads one ledger into snapshots for the dashboard; not thread-safe (one poller)."""

    def __init__(self, ledger: Ledger, *, clock: Callable[[], float] = time.time) -> None:
        self.ledger = ledger
        self.clock = clock
        #: The snapshot pages are sent (JSON-compatible), and the same as JSON text.
        self.state: dict[str, Any] = {
            "ledger": repr(ledger),
            "ok": False,
            "error": "not read yet",
            "live": [],
            "live_total": 0,
            "recent": [],
            "pending": [],
            "budgets": [],
        }
        self.shown = json.dumps(self.state)
        #: When the ledger last answered (epoch seconds); not part of the snapshot, which
        #: changes only when what the page shows does.
        self.read_at: float | None = None
        self._histories: dict[str, History] = {}
        #: Each run's view, and what it was made from: most runs' are the same from one read
        #: to the next.
        self._views: dict[str, tuple[tuple[Any, ...], dict[str, Any]]] = {}
        self._live_ids: set[str] = set()
        self._finished: list[RunInfo] = []
        self._finished_read = float("-inf")

    # --- reading ---------------------------------------------------------------------------

    def poll(self) -> bool:
        """Read the ledger once; True if the snapshot changed."""
        now = self.clock()
        try:
            live = self.ledger.runs(live=True, limit=MAX_LIVE)
            # Counted only when the list is cut (a count may take another read of them all).
            live_total = len(live) if len(live) < MAX_LIVE else self.ledger.live_count()
            live_ids = {info.run_id for info in live}
            finished = self._finished
            if self._live_ids - live_ids or now - self._finished_read >= RECENT_EVERY:
                finished = self.ledger.ended_runs(limit=RECENT)
            pending = self.ledger.pending()
            budgets = self.ledger.budgets()
        except LedgerError as error:
            state = {**self.state, "ok": False, "error": str(error)}
        else:
            if finished is not self._finished:
                self._finished, self._finished_read = finished, now
            self._live_ids = live_ids
            for info in (*live, *finished):
                self._observe(info, now)
            self._observe_answers(pending)
            self._forget(live, finished)
            views = self._views
            self._views = {}
            state = {
                "ledger": repr(self.ledger),
                "ok": True,
                "error": None,
                "live": sorted((self._view(info, now, views) for info in live), key=_live_order),
                "live_total": max(live_total, len(live)),
                "recent": [self._view(info, now, views) for info in finished],
                "pending": [_pending_view(p) for p in pending if p.answer is None],
                "budgets": [_budget_view(state) for state in budgets],
            }
            self.read_at = now
        shown = json.dumps(state, default=str)
        self.state = state
        if shown == self.shown:
            return False
        self.shown = shown
        return True

    def note(self, run_id: str, kind: str, label: str) -> None:
        """Add what the dashboard itself did to a run's timeline (an answer, a stop)."""
        now = self.clock()
        self._history(run_id, now).timeline.append((now, kind, label, ""))

    def run_detail(self, run_id: str) -> dict[str, Any] | None:
        """A run's page from the snapshot: its row, its timeline and its spend over time; None
        if the snapshot does not show it (``detail_of`` makes it from the ledger's record)."""
        for view in (*self.state["live"], *self.state["recent"]):
            if view["run_id"] == run_id:
                break
        else:
            return None
        pending = [p for p in self.state["pending"] if p["run_id"] == run_id]
        return self._detail(view, pending[0] if pending else None)

    def detail_of(self, info: RunInfo, pending: Pending | None) -> dict[str, Any]:
        """The page of a run the snapshot does not show (it ended before the latest
        ``RECENT``, or it is live past ``MAX_LIVE``), from its record in the ledger and its
        open question, if any."""
        now = self.clock()
        history = self._histories.get(info.run_id)
        last = history.timeline[-1] if history and history.timeline else None
        view = self._run_view(info, *self._flags(info, now), last)
        question = None if pending is None or pending.answer is not None else pending
        return self._detail(view, None if question is None else _pending_view(question))

    def _detail(self, view: dict[str, Any], pending: dict[str, Any] | None) -> dict[str, Any]:
        history = self._histories.get(view["run_id"], History())
        return {
            "run": view,
            "pending": pending,
            "watched_since": history.since,
            "timeline": [
                {"at": at, "kind": kind, "label": label, "decision": decision}
                for at, kind, label, decision in sorted(history.timeline, key=lambda e: e[0])
            ],
            "spend": [
                {"at": at, "cost": cost, "tokens": tokens} for at, cost, tokens in history.spend
            ],
        }

    # --- history ---------------------------------------------------------------------------

    def _history(self, run_id: str, now: float) -> History:
        history = self._histories.get(run_id)
        if history is None:
            history = self._histories[run_id] = History(since=now)
        return history

    def _observe(self, info: RunInfo, now: float) -> None:
        fresh = info.run_id not in self._histories
        history = self._history(info.run_id, now)
        if fresh:
            history.timeline.append((info.started, "started", info.model, ""))
            if not info.counts.get("turns"):
                history.spend.append((info.started, 0.0, 0))
        seen = (info.heartbeat, info.live)
        if seen == history.last_seen:
            return
        history.last_seen = seen
        counts = info.counts
        activity = counts.get("activity") or {}
        for number, at, kind, label, decision in activity.get("events", ()):
            if history.last_number and number > history.last_number + 1:
                missed = number - history.last_number - 1
                history.timeline.append((at, "missed", f"{missed} events not seen", ""))
            if number > history.last_number:
                history.timeline.append(
                    (at, kind, label, "" if decision == "Continue" else decision)
                )
                history.last_number = number
        for at, limit, message in activity.get("warnings", ()):
            if (at, message) not in history.warnings_seen:
                history.warnings_seen.add((at, message))
                history.timeline.append((at, "warning", message, limit))
        if info.status != history.last_status:
            if info.status == "waiting":
                history.timeline.append((info.heartbeat, "waiting", "for a human's answer", ""))
            elif history.last_status == "waiting" and info.live:
                history.timeline.append((info.heartbeat, "running", "again", ""))
            history.last_status = info.status
        cost = _dollars(counts.get("cost", 0))  # no counts yet: nothing spent
        tokens = _tokens(counts)
        if not history.spend or history.spend[-1][1:] != (cost, tokens):
            history.spend.append((info.heartbeat, cost, tokens))
        if info.outcome is not None:
            reason = str(info.outcome.get("reason", ""))
            history.timeline.append((info.heartbeat, "ended", reason, info.status))

    def _observe_answers(self, pending: list[Pending]) -> None:
        for question in pending:
            history = self._histories.get(question.run_id)
            if history is None:
                continue
            if history.answer_seen[0] != question.asked:
                history.answer_seen = (question.asked, None)
                history.timeline.append((question.asked, "asked", question.question, ""))
            if question.answer is not None and history.answer_seen[1] is None:
                history.answer_seen = (question.asked, question.answer)
                answer = question.answer.replace("_", " ")
                if question.amount is not None:
                    answer += f" {question.amount}"
                history.timeline.append((self.clock(), "answered", answer, ""))

    def _forget(self, live: list[RunInfo], finished: list[RunInfo]) -> None:
        if len(self._histories) <= TRACKED:
            return
        shown = {info.run_id for info in (*live, *finished)}
        for run_id in [run_id for run_id in self._histories if run_id not in shown]:
            del self._histories[run_id]

    # --- views -----------------------------------------------------------------------------

    def _view(
        self,
        info: RunInfo,
        now: float,
        before: dict[str, tuple[tuple[Any, ...], dict[str, Any]]],
    ) -> dict[str, Any]:
        """The run's view, made again only if what it shows may have changed."""
        history = self._histories.get(info.run_id)
        last = history.timeline[-1] if history and history.timeline else None
        stale, gone = self._flags(info, now)
        made_from = (info.heartbeat, info.live, info.status, stale, gone, last)
        cached = before.get(info.run_id)
        view = cached[1] if cached and cached[0] == made_from else None
        if view is None:
            view = self._run_view(info, stale, gone, last)
        self._views[info.run_id] = (made_from, view)
        return view

    def _flags(self, info: RunInfo, now: float) -> tuple[bool, bool]:
        """Whether a live run is stale (no heartbeat for ``STALE_SECONDS``), and whether it is
        gone (none for the ledger's ``gone_after``: its process died without ending it)."""
        stale = info.live and now - info.heartbeat > STALE_SECONDS
        return stale, info.gone(now, self.ledger.gone_after)

    @staticmethod
    def _run_view(
        info: RunInfo, stale: bool, gone: bool, last: tuple[float, str, str, str] | None
    ) -> dict[str, Any]:
        outcome = info.outcome
        counts = info.counts
        activity = counts.get("activity") or {}
        usage = (outcome or {}).get("usage") or counts
        return {
            "run_id": info.run_id,
            "host": info.host,
            "pid": info.pid,
            "model": info.model,
            "limits": info.limits,
            "keys": list(info.keys),
            # A gone run is no longer waiting (its question is closed), whatever it said last.
            "status": "gone" if gone else info.status,
            "started": info.started,
            "heartbeat": info.heartbeat,
            "stale": stale,
            "gone": gone,
            "turns": int(usage.get("turns", 0)),
            "turn_limit": activity.get("turn_limit"),
            "tokens": _tokens(usage),
            "cost": usage.get("cost"),
            "elapsed": None if outcome is None else float(usage.get("elapsed", 0.0)),
            "last_event": None
            if last is None
            else {"at": last[0], "kind": last[1], "label": last[2]},
            "warnings": [message for _, _, message in activity.get("warnings", ())][-3:],
            "outcome": None
            if outcome is None
            else {
                "status": str(outcome.get("status", "")),
                "reason": str(outcome.get("reason", "")),
                "message": str(outcome.get("message", "")),
            },
            "saved": [] if outcome is None else _saved(outcome, activity),
        }


def _live_order(view: dict[str, Any]) -> tuple[int, float]:
    """Waiting runs first (someone must answer), then stale ones, then the others, the newest
    first; gone runs last (nothing can be done for them: their process is not running)."""
    rank = 3 if view["gone"] else 0 if view["status"] == "waiting" else 1 if view["stale"] else 2
    return rank, -float(view["started"])


def _tokens(counts: dict[str, Any]) -> int:
    return int(counts.get("input_tokens", 0)) + int(counts.get("output_tokens", 0))


def _dollars(value: Any) -> float | None:
    try:
        return None if value is None else float(Decimal(str(value)))
    except InvalidOperation:
        return None


def _saved(outcome: dict[str, Any], activity: dict[str, Any]) -> list[str]:
    """What stopping a run kept from being spent: what each of its own limits still allowed
    when it ended (a shared budget's rest belongs to every run of its key, and shows in the
    budgets). Nothing for a run that completed on its own."""
    if outcome.get("status") in ("completed", "completed_with_warnings"):
        return []
    saved = []
    for standing in activity.get("limits", ()):
        reason, used, cap = standing.get("reason"), standing.get("used"), standing.get("cap")
        if cap is None or used is None or "key=" in str(standing.get("limit", "")):
            continue
        try:
            left = Decimal(str(cap)) - Decimal(str(used))
        except InvalidOperation:
            continue
        if left <= 0:
            continue
        if reason == "cost_limit":
            saved.append(f"${left:.2f}" if left >= 1 else f"${left:.4f}")
        elif reason in _UNITS:
            saved.append(f"{int(left):,} {_UNITS[reason]}")
    return saved


def _pending_view(pending: Pending) -> dict[str, Any]:
    return {
        "run_id": pending.run_id,
        "question": pending.question,
        "choices": list(pending.choices),
        "asked": pending.asked,
    }


def _budget_view(state: BudgetState) -> dict[str, Any]:
    budget = state.budget
    is_money = budget.metric == "nano_usd"

    def shown(amount: int | None) -> str | None:
        if amount is None:
            return None
        return money(amount) if is_money else f"{amount:,}"

    return {
        "key": budget.key,
        "metric": "dollars" if is_money else budget.metric.replace("_", " "),
        "window": budget.window,
        "resets_at": budget.resets_at,
        "spent": state.spent,
        "reserved": state.reserved,
        "limit": state.limit,
        "spent_text": shown(state.spent),
        "reserved_text": shown(state.reserved),
        "limit_text": shown(state.limit),
    }
