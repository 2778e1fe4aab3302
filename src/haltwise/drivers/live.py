"""Runs a fleet can see and reach: registered in the ledger, heartbeating, stoppable and
answerable from any machine that reaches it.

- ``LiveRun`` registers a governed run (its id, host, pid, model, limits, the budget keys it
  spends) and, every ``interval`` seconds on a daemon thread, sends its counts and status; the
  heartbeat also renews the leases of its requests in flight. When the ledger says the run was
  told to stop (``haltwise stop``), the run's governor is killed: its next event, or the call in
  flight where the driver can interrupt it, ends it ``cancelled`` with reason ``killed``.
- Each heartbeat's counts carry, besides the run's ``Usage``, its ``activity``: the turn limit
  now (it moves when a human extends it), each limit's standing, the events since the previous
  heartbeat (numbered; their kind and a short label, never prompts, arguments or tool output)
  and the latest warnings. A last heartbeat goes just before the end is recorded, so the
  ledger's counts are the final ones. The dashboard draws a run's timeline from them.
- Each heartbeat carries the run's registration too: a ledger that lost the run (a Redis
  restarted without persistence) records it again, and the fleet sees it within a heartbeat.
- As the run ends, the spends its shared budgets could not settle while the ledger was
  unreachable (failing open) are tried once more; those still waiting are named in a
  ``RuntimeWarning``.
- ``ledger_prompter`` asks the human through the ledger: it posts the question and waits for
  ``haltwise approve`` (from anywhere) up to ``timeout`` seconds; no answer means abort.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import socket
import threading
import time
import warnings
from collections import deque
from collections.abc import Callable
from typing import Any

from ..engine.decisions import Answer, Ask, Choice, Decision, Warn
from ..engine.errors import LedgerError
from ..engine.events import Event, ModelRequest, ModelResponse, Progress, ToolCall, ToolResult
from ..engine.governor import Governor
from ..engine.ledger import DEFAULT_LEASE, Ledger, RunInfo
from ..engine.limits import Leaf
from ..engine.outcome import Outcome
from ..eventlog import outcome_to_dict, usage_to_dict

__all__ = ["APPROVAL_TIMEOUT", "HEARTBEAT_SECONDS", "LiveRun", "ledger_prompter", "shared_keys"]

#: How long a run waits for an answer posted through the ledger, by default (seconds).
APPROVAL_TIMEOUT = 600.0
#: How often a live run tells the ledger it is still going, by default (seconds).
HEARTBEAT_SECONDS = 2.0
#: At most this many events (the latest) go with one heartbeat; the numbers of any left out
#: show the gap. And how many of the latest warnings every heartbeat repeats.
ACTIVITY_EVENTS = 64
ACTIVITY_WARNINGS = 8


def shared_keys(governor: Governor) -> tuple[str, ...]:
    """The budget keys a governor's limits spend, in the order they are written."""
    keys = [
        leaf.share.key
        for leaf in governor.limits.leaves()
        if isinstance(leaf, Leaf) and leaf.share is not None
    ]
    return tuple(dict.fromkeys(keys))


class LiveRun:
    """One governed run, registered in a ledger and heartbeating until it ends."""

    def __init__(
        self,
        governor: Governor,
        ledger: Ledger,
        *,
        model: str = "",
        interval: float = HEARTBEAT_SECONDS,
        lease: float = DEFAULT_LEASE,
    ) -> None:
        self.governor = governor
        self.ledger = ledger
        self.model = model
        self.interval = interval
        self.lease = lease
        self.run_id = ""
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._killed = False
        self._registered = False
        self._info = RunInfo("")
        #: (number, epoch seconds, kind, label, decision) of the events since the last beat.
        self._events: deque[tuple[int, float, str, str, str]] = deque(maxlen=ACTIVITY_EVENTS)
        self._warnings: deque[tuple[float, str, str]] = deque(maxlen=ACTIVITY_WARNINGS)
        self._numbers = itertools.count(1)

    def start(self) -> None:
        """Register the governor's current run (after its ``RunStarted``) and start beating."""
        self.run_id = self.governor.run_id
        self._info = RunInfo(
            run_id=self.run_id,
            host=socket.gethostname(),
            pid=os.getpid(),
            model=self.model,
            limits=repr(self.governor.limits),
            keys=shared_keys(self.governor),
            interval=self.interval,
        )
        self.beat()
        self._thread = threading.Thread(
            target=self._beating, name=f"haltwise-heartbeat-{self.run_id}", daemon=True
        )
        self._thread.start()

    def _beating(self) -> None:
        while not self._stopping.wait(self.interval):
            self.beat()

    def beat(self) -> None:
        """Send the run's counts and status now; heed a kill flag."""
        reason = self._send()
        if reason is not None and not self._killed:
            self._killed = True
            self.governor.kill(reason)

    def _send(self) -> str | None:
        """One heartbeat; the reason the run was told to stop, if it was."""
        status = "waiting" if self.governor.pending is not None else "running"
        try:
            if not self._registered:
                # Until the ledger has taken it: a ledger that is down now is tried again.
                self.ledger.register(self._info)
                self._registered = True
            return self.ledger.heartbeat(
                self.run_id, self._counts(), status, self.lease, info=self._info
            )
        except LedgerError:
            return None

    def saw(self, event: Event, decision: Decision) -> None:
        """Note an event and the decision on it for the next heartbeat (deques append
        atomically, so any thread may report)."""
        now = time.time()
        kind = type(event).__name__
        self._events.append(
            (next(self._numbers), now, kind, _label(event), type(decision).__name__)
        )
        if isinstance(decision, Warn):
            self._warnings.append((now, decision.limit, decision.message))

    def _counts(self) -> dict[str, Any]:
        """What a heartbeat sends: the run's usage, and its ``activity`` (the events it carries
        are taken: the next heartbeat carries the ones after)."""
        governor = self.governor
        counts = usage_to_dict(governor.usage)
        counts["activity"] = {
            "turn_limit": governor.turns()[1],
            "limits": [
                {
                    "limit": status.limit,
                    "reason": status.reason,
                    "used": _plain(status.used),
                    "cap": _plain(status.cap),
                }
                for status in governor.standing()
            ],
            "events": self._drain(),
            "warnings": [list(entry) for entry in tuple(self._warnings)],
        }
        return counts

    def _drain(self) -> list[list[Any]]:
        """The events noted since the last call, taken out one by one (``saw`` may be adding)."""
        drained: list[list[Any]] = []
        with contextlib.suppress(IndexError):
            while True:
                drained.append(list(self._events.popleft()))
        return drained

    def finish(self, outcome: Outcome | None) -> None:
        """Stop beating, settle what the shared budgets still owe, and record how the run
        ended."""
        self._stopping.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=self.interval + 5)
        self._settle(outcome)
        if outcome is not None:
            self._send()  # the final counts and the last events
            # If the ledger is down, the run shows as stale; its checkpoint has its counts.
            with contextlib.suppress(LedgerError):
                self.ledger.finish(self.run_id, outcome_to_dict(outcome))

    def _settle(self, outcome: Outcome | None) -> None:
        """Hand the ledger the spends the run made while it was unreachable (failing open):
        with no later event to do it, they would be lost to the shared budgets. Those it still
        cannot take are said in a warning, with where they are kept, if anywhere."""
        # The governor's stop tried already; the ledger may have come back since.
        with self.governor.lock:
            error = self.governor.settle_waiting()
            if error is None:
                return
            waiting = len(self.governor.checkpoint()["unsettled"])
        checkpoint = None if outcome is None else outcome.checkpoint
        kept = (
            f"they are kept in its checkpoint {checkpoint}: resuming the run settles them"
            if checkpoint is not None
            else "the shared budgets will not count them"
        )
        warnings.warn(
            f"run {self.run_id}: {waiting} spend(s) made while the ledger was unreachable "
            f"could not be settled as the run ended ({error}); {kept}",
            RuntimeWarning,
            stacklevel=3,
        )


def _label(event: Event) -> str:
    """A few words on an event, for people watching the fleet: names and numbers only, never
    what the run read or wrote (prompts, arguments, tool output)."""
    if isinstance(event, ToolCall | ToolResult):
        failed = isinstance(event, ToolResult) and event.is_error
        return event.name + (" (failed)" if failed else "")
    if isinstance(event, ModelRequest):
        return event.model
    if isinstance(event, ModelResponse):
        return f"{event.input_tokens + event.output_tokens:,} tokens"
    if isinstance(event, Progress):
        return event.metric
    return ""


def _plain(value: Any) -> Any:
    """A limit's count as JSON: numbers stay numbers, money becomes text."""
    return value if value is None or isinstance(value, int | float) else str(value)


_CHOICES = {
    Choice.CONTINUE: "continue",
    Choice.EXTEND: "extend",
    Choice.WRAP_UP: "wrap_up",
    Choice.ABORT: "abort",
}


def ledger_prompter(
    ledger: Ledger,
    *,
    timeout: float = APPROVAL_TIMEOUT,
    poll: float = 0.25,
    clock: Callable[[], float] = time.monotonic,
) -> Callable[[Ask], Answer | None]:
    """A prompter that posts the question to the ledger and waits up to ``timeout`` seconds
    (or the ask's own, if shorter) for an answer given elsewhere (``haltwise approve``)."""

    def prompt(ask: Ask) -> Answer | None:
        owner = ask.owner
        run_id = owner.run_id if isinstance(owner, Governor) else ""
        choices = tuple(_CHOICES[choice] for choice in ask.choices)
        ledger.ask(run_id, ask.question, choices)
        wait = timeout if ask.timeout is None else min(timeout, ask.timeout)
        deadline = clock() + wait
        while clock() < deadline:
            try:
                (pending,) = ledger.pending(run_id) or (None,)
            except LedgerError:
                pending = None
            if pending is not None and pending.answer is not None:
                choice = {name: choice for choice, name in _CHOICES.items()}[pending.answer]
                if choice is Choice.EXTEND:
                    return Answer(Choice.EXTEND, pending.amount or 1)
                return Answer(choice)
            if isinstance(owner, Governor) and owner.cancel_requested:
                return None
            time.sleep(poll)
        return None

    return prompt
