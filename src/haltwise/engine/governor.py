"""The governor: takes one event, returns one decision. Pure and synchronous.

It never sleeps, prompts or does I/O, except saving a checkpoint through its ledger when a run
stops. Drivers (``haltwise.drivers``, framework adapters, the agent, replay) carry its decisions
out; none of them repeats its logic.

Hot path: ``handle`` is the method of the governor's ``Dispatch`` (``dispatch.py``, compiled
by Cython when haltwise is installed with a C compiler): a dict lookup by event type, then only
the limits that check that type, each O(1) over running totals. Nothing is allocated unless a
limit warns, asks, blocks or stops (a request's reservation aside). For the common limits, the
four most frequent events get handlers of their own (``hotpath.py``): written for the limit set
with its checks inlined (turns, tool calls, and an LLM call's two events in the pure build), or
the dispatch's for an LLM call's two events in the compiled build; they hand any event they
would not decide as the general handlers do to those.

Threads and tasks: any number may report events for one governor. Each event is decided and
counted under one lock, so a check and the count it allows are one step: no count is lost and
no cap is passed. The lock is never held while anything waits (a human, a model, a tool).

Time: ``deadline()`` and ``time_left()`` say when the earliest time limit (the run's, the
session's, a phase's) trips, so that drivers can bound the calls they make; ``interrupted()``
ends a run whose call in flight was cut off, counting what that call reserved.
"""

from __future__ import annotations

import contextlib
import secrets
import threading
import time
from collections.abc import Callable, Collection
from dataclasses import replace
from typing import Any

from .budgets import Refused, SharedBudgets
from .decisions import (
    CONTINUE,
    Answer,
    Ask,
    Block,
    Choice,
    Continue,
    Decision,
    Stop,
    Warn,
    joined,
)
from .dispatch import Dispatch, new_lock
from .errors import (
    ConfigurationError,
    InvalidValueError,
    LedgerError,
    QuestionOpen,
    UnpricedModelError,
)
from .events import (
    MAX_CALL_DOLLARS,
    Event,
    Injected,
    ModelRequest,
    ModelResponse,
    Progress,
    RunEnded,
    RunStarted,
    ToolCall,
    ToolResult,
    TurnEnded,
    TurnStarting,
)
from .hotpath import compile_handlers
from .ledger import DEFAULT_LEASE, Ledger, MemoryLedger
from .limits import (
    ALL_EVENTS,
    Context,
    EventType,
    Leaf,
    Limit,
    LimitStatus,
    any_of,
    as_limit,
)
from .outcome import Outcome, Status, Usage
from .pricing import Pricer, UnitPricer, dollars, in_units, units
from .state import (
    MAX_CALL_COST,
    MAX_IN_FLIGHT,
    Hold,
    InFlight,
    Slot,
    Tally,
    room_for,
)

__all__ = ["Governor", "Phase", "ShadowTrip"]

#: A check the governor runs for one event type: a top-level limit, its slot (None for groups),
#: the context it reads (the governor, or a phase), and the limit's bound ``pre`` in a table of
#: checks before an event, its ``post`` in one after (``Dispatch`` calls it without looking the
#: method up on every event).
_Check = tuple[Limit, "Slot | None", Context, Callable[..., Any]]
#: A check of the shared budgets (``Budgets.take``): a limit, its slot and its context.
_Shared = tuple[Limit, "Slot | None", Context]
#: The events a child governor passes up to its parent: they spend the parent's budgets too.
_SPENDING = (ModelRequest, ModelResponse, ToolCall, ToolResult)


class ShadowTrip:
    """A trip of a shadow-mode limit: recorded, not enforced."""

    __slots__ = ("event", "limit", "message", "run_id")

    def __init__(self, run_id: str, limit: str, message: str, event: Event) -> None:
        self.run_id = run_id
        self.limit = limit
        self.message = message
        self.event = event

    def __repr__(self) -> str:
        return f"ShadowTrip({self.limit}: {self.message!r})"


class Phase:
    """A named stretch of a run with limits of its own, counted from when it began.

    Made by ``Governor.enter_phase``; its limits are checked with the run's until
    ``Governor.exit_phase``. It is the Context its limits see: their slots are its own.
    """

    __slots__ = ("blueprint", "governor", "limits", "name", "now", "slots")

    def __init__(self, governor: Governor, name: str, limits: Limit, blueprint: _Blueprint) -> None:
        self.governor = governor
        self.name = name
        self.limits = limits
        #: How its limits are installed (``Governor._install``).
        self.blueprint = blueprint
        self.now = governor.now
        #: One slot per leaf, on the run's tally, whose rounds begin where the phase began.
        self.slots: dict[Leaf, Slot] = {}

    def slot(self, leaf: Leaf) -> Slot:
        return self.slots[leaf]

    def request_cost(self, model: str, input_tokens: int, max_tokens: int) -> int:
        return self.governor.request_cost(model, input_tokens, max_tokens)

    def usage_now(self) -> Usage:
        return self.governor.usage_now()

    def __repr__(self) -> str:
        return f"phase({self.name!r}, {self.limits!r})"


class Governor:
    """Decides, event by event, whether an agent run may go on.

    ``limits`` is any limit expression (``max_turns(25) | max_cost("2")``), a callable
    ``f(usage) -> bool``, or None. ``clock`` is a monotonic clock (a ``FakeClock`` in tests);
    ``pricer`` prices model calls (genai-prices with your own table by default); ``ledger``
    (an object, or a URL: ``memory:``, ``sqlite:///PATH``, ``redis://HOST:PORT/DB``) keeps
    checkpoints and the budgets of shared limits (``key=``), in memory by default.
    ``on_ledger_error`` is what an unreachable ledger does to a run with shared limits:
    ``"closed"`` stops it, ``"open"`` lets it go on under its local limits and settles with
    the ledger once it is back. ``wall_clock`` dates budget windows; ``lease`` is how long a
    request's reservation holds without a heartbeat.
    """

    def __init__(
        self,
        limits: Limit | Callable[[Usage], bool] | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        pricer: Pricer | None = None,
        ledger: Ledger | str | None = None,
        new_id: Callable[[], str] = lambda: secrets.token_hex(6),
        parent: Governor | None = None,
        on_ledger_error: str = "closed",
        wall_clock: Callable[[], float] = time.time,
        lease: float = DEFAULT_LEASE,
    ) -> None:
        # Checked here, not where each is first used (an event, a stop, a heartbeat), so that
        # a wrong argument fails at the call that gave it, named.
        if on_ledger_error not in ("closed", "open"):
            raise InvalidValueError(
                "Governor(on_ledger_error)",
                on_ledger_error,
                "'closed' (an unreachable ledger stops the run) or 'open' (go on under the "
                "local limits and settle with the ledger once it is back)",
            )
        checked_callable(clock, "Governor(clock)", "a monotonic clock, such as time.monotonic")
        checked_callable(
            wall_clock, "Governor(wall_clock)", "a clock of epoch seconds, such as time.time"
        )
        checked_callable(new_id, "Governor(new_id)", "a function that returns a new run id (a str)")
        checked_pricer(pricer, "Governor(pricer)")
        checked_ledger(ledger, "Governor(ledger)")
        checked_seconds(lease, "Governor(lease)")
        if parent is not None and not isinstance(parent, Governor):
            raise InvalidValueError(
                "Governor(parent)",
                parent,
                "a Governor, or None (governor.child(limits) makes a sub-agent's governor)",
            )
        self._clock = clock
        #: The clock, as limits see it (the Context protocol).
        self.now = clock
        self._pricer = None if pricer is None else in_units(pricer)
        #: The pricer's ``units``, looked up once: it runs for every response.
        self._unit_price: Callable[[str, int, int, int, int], int | None] | None = None
        if isinstance(ledger, str):
            from ..ledgers import open_ledger

            ledger = open_ledger(ledger, source="Governor(ledger)")
        self._ledger = ledger if ledger is not None else MemoryLedger()
        #: The shared budgets (limits with ``key=``) this governor spends in its ledger.
        self._budgets = SharedBudgets(
            self._ledger,
            clock=clock,
            wall_clock=wall_clock,
            fail_open=on_ledger_error == "open",
            lease=lease,
        )
        self._new_id = new_id
        self._parent = parent
        #: The model requests sent and not yet answered, and what they hold.
        self._in_flight = InFlight()
        #: Running totals of the current run and of the whole session.
        self._run = Tally(self._in_flight)
        self._session = Tally(self._in_flight)
        self._run_id = ""
        self._prompt = ""
        self._last_text: str | None = None
        #: The terminal decision of the current run, once it has stopped.
        self._stopped: Stop | None = None
        #: The open question: the ask, the limit that asked, whether it asked before spending, and
        #: the context of that limit (the governor, or a phase).
        self._pending: tuple[Ask, Limit, bool, Context] | None = None
        #: Set while a child counts an event whose before-checks already passed.
        self._checked = False
        #: A limit the human has just let through, skipped for the event being re-handled.
        self._bypass: Limit | None = None
        self._cancel_reason: str | None = None
        #: The outcome's reason for the cancel: "cancelled", or "killed" from elsewhere.
        self._cancel_code = "cancelled"
        self._cancel_lock = threading.Lock()
        self._cancel_listeners: list[Callable[[], None]] = []
        #: Told when the earliest deadline moves (``on_deadline``): changed only under the lock.
        self._deadline_listeners: tuple[Callable[[], None], ...] = ()
        #: The per-event entry point: ``handle`` is its method (``dispatch.py``).
        self._dispatch = Dispatch(self, new_lock(), clock, plain=parent is None)
        self.handle = self._dispatch.handle
        #: The checks before and after an event (``Dispatch.pre``, ``Dispatch.post``).
        self._pre = self._dispatch.pre
        self._post = self._dispatch.post
        #: The last worst-case price computed (model, prompt, max_tokens, units): a request is
        #: priced by the cost limit's check and again when it is counted.
        self._quote: tuple[str, int, int, int] = ("", -1, -1, 0)
        #: What the shared budgets granted the request being admitted, for ``_count_request``:
        #: its holds, and the max_tokens a token budget left it (None: as asked).
        self._holds: tuple[Hold, ...] = ()
        self._shared_max: int | None = None
        #: Shared limits the last response took past their limit: (check, used, limit, window).
        self._over: list[tuple[Any, int, int, str]] = []
        #: Phases entered and not yet left, outermost first.
        self._phases: list[Phase] = []
        #: Whether the synthesis pass of a run stopped with ``synthesize`` was admitted: one
        #: is, and every request after it is refused.
        self._synthesizing = False
        #: Whether a driver's synthesizer has claimed that pass (``claim_synthesis``).
        self._pass_claimed = False
        self._slots: dict[Leaf, Slot] = {}
        #: The earliest deadline of every time limit (``deadline()``), kept by ``_set_due``.
        self._earliest: float | None = None
        #: The check tables in use (``_install`` builds them; ``_use`` picks one).
        self._tables: dict[type, tuple[tuple[_Check, ...], tuple[_Check, ...]]] = {}
        #: Trips of shadow-mode limits, in order.
        self.shadow_trips: list[ShadowTrip] = []
        self._handlers: dict[type, Callable[[Any], Decision]] = {
            RunStarted: self._on_run_started,
            TurnStarting: self._on_turn_starting,
            ModelRequest: self._on_model_request,
            ModelResponse: self._on_model_response,
            ToolCall: self._dispatch.on_tool_call,
            ToolResult: self._dispatch.on_tool_result,
            TurnEnded: self._on_turn_ended,
            Injected: self._on_other,
            Progress: self._on_other,
            RunEnded: self._on_run_ended,
        }
        #: What ``handle`` dispatches to on its fast path (``_dispatch.hot``): the general
        #: handlers, or with some of them replaced by ones written for the limits (``hotpath``).
        self._dispatch.use(self._handlers)
        #: The tables the handlers were last written for, and those handlers.
        self._written: tuple[object, dict[type, Callable[[Any], Decision]]] | None = None
        limit = as_limit(limits)
        # An expression of the caller's own may be given to other governors: its blueprint is
        # kept for them. One made here (from a callable, or None) is this governor's alone.
        self._install(limit, _blueprint_of(limit) if limit is limits else _Blueprint(limit))

    # ----------------------------------------------------------------------------------------
    # Public surface

    #: How the limits in use are installed (``_install``).
    _blueprint: _Blueprint

    #: ``handle(event)``: the decision for ``event``. Safe to call from any thread or task.
    #: (The compiled dispatch's method itself, set per governor: no Python call in between.)
    handle: Callable[[Event], Decision]

    def __call__(self, event: Event) -> Decision:
        """The decision for ``event`` (``handle``)."""
        return self._dispatch.handle(event)

    @property
    def lock(self) -> Any:
        """Held while an event is decided and counted. Hold it to read several values as one
        (``with governor.lock:``). Reentrant, as ``threading.RLock`` is: the thread that holds
        it may take it again, and a wait for it can time out or be interrupted (Ctrl-C). The
        compiled engine's own (``dispatch.Lock``) is taken without a Python call; any lock may
        be set in its place."""
        return self._dispatch.lock

    @lock.setter
    def lock(self, lock: Any) -> None:
        self._dispatch.lock = lock

    def keep_tool_events(self, kept: Any) -> None:
        """Append each ``ToolCall`` and ``ToolResult`` that ``handle`` answers ``CONTINUE`` to
        ``kept`` (a ``collections.deque`` with a ``maxlen``, say), or stop (None): how a driver
        keeps the latest tool results as evidence for a synthesized answer, at the cost of an
        append in the governor's own call."""
        self._dispatch.evidence = kept

    def _handle_slowly(self, event: Event) -> Decision:
        if self._cancel_reason is not None:
            if type(event) is ModelResponse and self._stopped is None:
                self._count_response(event)  # it was sent: its usage is real
            return self._cancelled()
        if self._stopped is not None and type(event) is not RunStarted:
            return self._after_stop(event)
        if self._pending is not None and type(event) is RunStarted:
            self._pending = None  # a new prompt makes the open question moot
        if self._pending is not None:
            raise QuestionOpen(self._pending[0])
        if self._parent is not None and type(event) in _SPENDING:
            return self._through_parent(event)
        decision: Decision = self._handlers[type(event)](event)  # checked by the dispatch
        return decision

    def _refresh(self) -> None:
        """Recompute the fast-path flag after the run's state changed."""
        with self._cancel_lock:  # a cancel() between the read and the write must not be lost
            self._dispatch.plain = (
                self._cancel_reason is None
                and self._stopped is None
                and self._pending is None
                and self._parent is None
            )

    def resolve(self, ask: Ask, answer: Answer | Choice | bool | None) -> Decision:
        """Carry on after a human's ``answer`` to ``ask`` (None: no answer came, or no UI)."""
        with self.lock:
            return self._resolve(ask, answer)

    def _resolve(self, ask: Ask, answer: Answer | Choice | bool | None) -> Decision:
        if ask.owner is not self:
            return self._resolve_for_parent(ask, answer)
        if self._pending is None or self._pending[0] is not ask:
            raise ConfigurationError(
                "resolve() got an Ask that is not this governor's open question"
            )
        reply = _as_answer(answer)  # a bad answer leaves the question open
        if self._cancel_reason is not None:
            # Stopped (``cancel()``, or a kill from elsewhere) while it waited: the stop wins
            # over whatever answer came, or none, and the limit stays as it was.
            cancelled: Stop = self._cancelled()
            return cancelled
        _, limit, before, ctx = self._pending
        self._pending = None
        self._refresh()
        if reply is None or reply.choice is Choice.ABORT:
            stop: Stop = self._stop_after_ask(ask, limit, reply, ctx)
            return stop
        if reply.choice is Choice.WRAP_UP:
            message = f"{ask.question.removesuffix(' Continue?')} The human chose to wrap up."
            stop = self._stop(
                limit.status_on_stop(), limit.reason, message, limit, synthesize=True, ctx=ctx
            )
            return stop
        if reply.choice is Choice.CONTINUE:
            limit.new_round(ctx)
            self._bypass = limit
        else:
            assert reply.amount is not None
            limit.extend(reply.amount, ctx)
        self._set_due()
        try:
            return self.handle(ask.event) if before and ask.event is not None else CONTINUE
        finally:
            self._bypass = None

    def cancel(self, reason: str = "cancelled") -> None:
        """Stop the run at its next event. Safe to call from any thread or task.

        Drivers that can interrupt a call in flight hear of it through ``on_cancel``.
        """
        self._cancel(reason, "cancelled")

    def kill(self, reason: str = "") -> None:
        """Stop the run at its next event because it was told to from elsewhere (``haltwise
        stop``, the dashboard): status ``cancelled``, reason ``killed``, checkpoint saved.
        Safe to call from any thread; drivers interrupt a call in flight (``on_cancel``)."""
        self._cancel(reason or "killed", "killed")

    def _cancel(self, reason: str, code: str) -> None:
        with self._cancel_lock:
            self._cancel_reason = reason
            self._cancel_code = code
            self._dispatch.plain = False
            listeners = list(self._cancel_listeners)
        for listener in listeners:
            listener()

    def on_cancel(self, listener: Callable[[], None]) -> Callable[[], None]:
        """Call ``listener`` (on the cancelling thread) whenever ``cancel()`` is called, so
        that a driver can interrupt what is in flight. Returns a function that unsubscribes."""
        with self._cancel_lock:
            self._cancel_listeners.append(listener)

        def unsubscribe() -> None:
            with self._cancel_lock, contextlib.suppress(ValueError):
                self._cancel_listeners.remove(listener)

        return unsubscribe

    def on_deadline(self, listener: Callable[[], None]) -> Callable[[], None]:
        """Call ``listener`` whenever the earliest deadline (``deadline()``) moves: a time
        limit set, extended or continued, a phase entered or left, a run started. It is called
        under the governor's lock, on the thread that moved it: it must only hand the news on
        (``loop.call_soon_threadsafe``). Returns a function that unsubscribes."""
        with self.lock:
            self._deadline_listeners = (*self._deadline_listeners, listener)

        def unsubscribe() -> None:
            with self.lock:
                listeners = self._deadline_listeners
                self._deadline_listeners = tuple(kept for kept in listeners if kept is not listener)

        return unsubscribe

    def synthesized(self, answer: str) -> Outcome:
        """The final outcome after a driver wrote ``answer`` for a ``Stop(synthesize=True)``.

        The synthesis pass's own model call, reported as ``ModelRequest`` and ``ModelResponse``
        while the run was stopped, is in the outcome's usage and in its checkpoint.
        """
        with self.lock:
            if self._stopped is None or not self._stopped.synthesize:
                raise ConfigurationError(
                    "synthesized() is for a run that stopped with synthesize=True"
                )
            outcome = self._stopped.outcome
            final = self._restated(
                replace(
                    outcome,
                    status=Status.COMPLETED_WITH_WARNINGS,
                    message=f"{outcome.message} Answered from the evidence gathered so far.",
                    partial_output=answer,
                )
            )
            self._stopped = Stop(final)
            self._synthesizing = self._pass_claimed = False
            return final

    def synthesis_unanswered(self) -> Outcome:
        """The final outcome after the synthesis pass of a ``Stop(synthesize=True)`` ended
        with no answer: the model called a tool it no longer has, wrote only blanks, or the
        call failed or was cut off (or the synthesizer gave none).

        The stop stands, with its status, reason, message and partial output; its usage and
        its checkpoint now count the pass's model call, reported as ``ModelRequest`` and
        ``ModelResponse`` (unanswered, it counts at what it reserved) while the run was
        stopped. No other pass is admitted. A run whose pass was refused (the budget left
        could not pay for it), or that already has its answer, keeps the outcome it has.
        """
        with self.lock:
            stop = self._stopped
            if stop is None:
                raise ConfigurationError("synthesis_unanswered() is for a run that has stopped")
            if stop.synthesize:
                outcome = self._restated(stop.outcome)
                stop = self._stopped = replace(
                    stop, outcome=outcome, synthesize=False, synthesizer=None
                )
                self._synthesizing = self._pass_claimed = False
            return stop.outcome

    def claim_synthesis(self) -> None:
        """A driver's synthesizer writes the answer of the current run's ``synthesize`` stop
        (claimed at the run's start, or at the stop): its model call is the synthesis pass,
        admitted by ``synthesis_request``. ``handle`` then admits no request as the pass, since
        one made after the stop by another thread (a call the agent had under way) would take
        its place."""
        with self.lock:
            self._pass_claimed = True

    def synthesis_request(self, event: ModelRequest) -> Decision:
        """The decision on the claimed synthesis pass's request (``claim_synthesis``):
        admitted once, when the budget left can pay for it. Any other request is decided as
        ``handle`` decides it."""
        with self.lock:
            stop = self._stopped
            if stop is None or not stop.synthesize or self._synthesizing:
                return self.handle(event)
            return self._admit_synthesis(event)

    def stop(self, reason: str, message: str, status: Status = Status.ABANDONED) -> Stop:
        """End the current run now, from outside the limits (a crash, a kill switch).

        The counts are checkpointed like any other stop's.
        """
        with self.lock:
            self._pending = None
            return self._stop(status, reason, message, None)

    def interrupted(
        self, message: str, *, partial_output: str | None = None, cancelled: bool = False
    ) -> Stop:
        """End a run whose driver was cut off in the middle of a call (its deadline passed,
        ``cancel()`` was called, or the loop raised).

        Requests still in flight were sent and never answered: they count at what they
        reserved. The run ends ``timed_out`` if a time limit has passed, ``cancelled`` if
        ``cancel()`` was called (or ``cancelled=True``: the driver's task was cancelled), and
        otherwise abandoned with reason ``error`` and ``message``. A run already stopped keeps
        its stop.
        """
        with self.lock:
            self._pending = None
            self._settle_in_flight()
            if self._stopped is not None:
                return self._stopped
            if self._cancel_reason is not None:
                return self._cancelled(partial_output)
            for limit, slot, ctx in self._deadlines:
                text = limit.passed(slot, ctx, "a call")
                if text is not None:
                    return self._stop(
                        limit.status_on_stop(),
                        limit.reason,
                        f"{text}. {message}",
                        limit,
                        synthesize=limit.policy.name == "synthesize",
                        provider_called=True,
                        partial=partial_output,
                        ctx=ctx,
                    )
            if cancelled:
                return self._stop(
                    Status.CANCELLED, "cancelled", message, None, partial=partial_output
                )
            return self._stop(Status.ABANDONED, "error", message, None, partial=partial_output)

    def deadline(self) -> float | None:
        """When (on the governor's clock) the earliest time limit trips; None without one.
        Cheap enough for drivers to ask after every event: it is kept as deadlines move."""
        return self._earliest

    def time_left(self) -> float | None:
        """Seconds until the earliest time limit trips (0 once it has); None without one.

        Drivers pass it down as the timeout of what they call: the model client's request, a
        tool, a shell command (the smaller of its own timeout and this).
        """
        deadline = self.deadline()
        return None if deadline is None else max(0.0, deadline - self._clock())

    def enter_phase(
        self, name: str, limits: Limit | Callable[[Usage], bool] | None = None
    ) -> Phase:
        """Begin a phase of the run with limits of its own, counted from now (its turns, calls,
        tokens, dollars and seconds), checked together with the run's. Phases nest; a phase's
        stop names it (``Outcome.phase``)."""
        if not isinstance(name, str) or not name.strip():
            raise InvalidValueError("phase name", name, "a non-empty string, e.g. 'plan'")
        with self.lock:
            limit = as_limit(limits)
            phase = Phase(
                self, name, limit, _blueprint_of(limit) if limit is limits else _Blueprint(limit)
            )
            for leaf in phase.blueprint.leaves:
                slot = Slot(self._run, leaf.warn_at is not None)
                slot.state = leaf.new_state()
                phase.slots[leaf] = slot
                slot.new_round(leaf.metric(slot, phase))
            self._phases.append(phase)
            self._install(self._limits, keep_slots=True)
            return phase

    def exit_phase(self, phase: Phase) -> None:
        """End ``phase`` (the innermost one): its limits are no longer checked."""
        with self.lock:
            if not self._phases or self._phases[-1] is not phase:
                raise ConfigurationError(
                    f"exit_phase({phase.name!r}): phases end innermost first, and "
                    f"{phase.name!r} is not the innermost phase open"
                )
            self._phases.pop()
            self._install(self._limits, keep_slots=True)

    def set_limit(self, limit: Limit) -> None:
        """Change a limit while a run is live, replacing the one of the same kind (or adding).

        A turn limit going from unlimited to a number restarts its count; from one number to
        another it keeps the count, so a count already past the new number trips at once.
        """
        with self.lock:
            members = list(self._limits.members())
            for new_leaf in as_limit(limit).leaves():
                for index, old in enumerate(members):
                    if isinstance(old, Leaf) and old.key() == new_leaf.key():
                        slot = self._slots.pop(old)
                        if not old.enforced and new_leaf.enforced:
                            # The spec's LimitReEnabled: a limit switched back on starts at zero.
                            slot.new_round(new_leaf.metric(slot, self))
                        # The new value is the limit: an earlier "extend by" does not carry over.
                        slot.extra = 0
                        slot.warned = False
                        self._slots[new_leaf] = slot
                        members[index] = new_leaf
                        if self._pending is not None and self._pending[1] is old:
                            # The open question is now about the limit that replaced it.
                            self._pending = (*self._pending[:1], new_leaf, *self._pending[2:])
                        break
                else:
                    members.append(new_leaf)
            changed = any_of(*members) if members else as_limit(None)
            self._install(changed, _Blueprint(changed), keep_slots=True)

    @property
    def limits(self) -> Limit:
        return self._limits

    @property
    def ledger(self) -> Ledger:
        """Where checkpoints go and shared budgets are spent."""
        return self._ledger

    @property
    def cancel_requested(self) -> bool:
        """Whether ``cancel()`` or ``kill()`` was called and the run has not stopped for it yet."""
        return self._cancel_reason is not None

    @property
    def run_id(self) -> str:
        return self._run_id

    @property
    def usage(self) -> Usage:
        """What the current run has spent."""
        with self.lock:
            return self._run.snapshot(self._clock())

    @property
    def session_usage(self) -> Usage:
        """What every run of this governor has spent."""
        with self.lock:
            return self._session.snapshot(self._clock())

    @property
    def stopped(self) -> Stop | None:
        """The current run's terminal decision, once it has stopped."""
        return self._stopped

    @property
    def outcome(self) -> Outcome | None:
        stopped = self._stopped
        return None if stopped is None else stopped.outcome

    @property
    def pending(self) -> Ask | None:
        """The question waiting for a human, if any."""
        pending = self._pending
        return None if pending is None else pending[0]

    @property
    def phases(self) -> tuple[Phase, ...]:
        """The phases open now, outermost first."""
        return tuple(self._phases)

    def standing(self) -> list[LimitStatus]:
        """Each limit's count and cap in the current round (the run's, then each phase's),
        for widgets and ``/limits``."""
        with self.lock:
            standing = [leaf.standing(self._slots[leaf], self) for leaf in self._leaves]
            for phase in self._phases:
                for leaf, slot in phase.slots.items():
                    status = leaf.standing(slot, phase)
                    status.limit = f"phase {phase.name!r}: {status.limit}"
                    standing.append(status)
            return standing

    def turns(self) -> tuple[int, int | None]:
        """The turn count of this round and the turn limit (None: unlimited or no turn limit)."""
        with self.lock:
            for leaf in self._leaves:
                if leaf.reason == "turn_limit":
                    status = leaf.standing(self._slots[leaf], self)
                    return int(status.used), status.cap
            return self._run.turns, None

    def child(self, limits: Limit | Callable[[Usage], bool] | None = None) -> Governor:
        """A governor for a sub-agent: its spending counts against this one's budgets too."""
        return Governor(
            limits,
            clock=self._clock,
            pricer=self._pricer,
            ledger=self._ledger,
            new_id=self._new_id,
            parent=self,
        )

    def settle_waiting(self) -> LedgerError | None:
        """Hand the ledger, now, the spends of shared limits it could not take while it was
        unreachable (``on_ledger_error="open"``), though it failed a moment ago: None once
        none is waiting, else the ledger's error (those still waiting stay in ``checkpoint()``
        and are tried again before the next call to the ledger).

        A run's stop does it already (unless the stop is the ledger's being unreachable);
        drivers call it again as the run ends, to say what is still waiting then.
        """
        with self.lock:
            return self._budgets.settle_waiting()

    def checkpoint(self) -> dict[str, Any]:
        """The counts of the current run and session, as JSON-compatible data.

        Requests in flight are in it: a run resumed from it counts them as spent (they were
        sent; whether they were answered cannot be known), so it cannot spend them twice.
        """
        with self.lock:
            now = self._clock()
            return {
                "version": 1,
                "run_id": self._run_id,
                "prompt": self._prompt,
                "limits": repr(self._limits),
                "run": self._run.to_dict(now),
                "session": self._session.to_dict(now),
                "slots": [
                    {
                        "limit": repr(leaf),
                        "baseline": leaf.dump(slot.baseline),
                        "extra": leaf.dump(slot.extra),
                    }
                    for leaf in self._leaves
                    for slot in (self._slots[leaf],)
                ],
                "last_text": self._last_text,
                "in_flight": self._in_flight.to_list(),
                "unsettled": self._budgets.to_list(),
            }

    def restore(self, data: dict[str, Any] | str) -> None:
        """Resume a run from a checkpoint (or a ledger reference to one: ``outcome.checkpoint``,
        from this governor's ledger; a ``memory:`` one from any memory ledger of the process)
        with the counts it had.

        Counts of limits that still exist are kept; requests that were in flight count at what
        they reserved; the run is live again.
        """
        if isinstance(data, str):
            data = self._ledger.load_checkpoint(data)
        with self.lock:
            # Everything is read and checked before anything changes: a checkpoint that is not
            # one leaves the governor as it was.
            try:
                now = self._clock()
                run = Tally.read(data["run"], now)
                session = Tally.read(data["session"], now)
                saved = {entry["limit"]: entry for entry in data["slots"]}
                rounds = [
                    (self._slots[leaf], leaf.load(entry["baseline"]), leaf.load(entry["extra"]))
                    for leaf in self._leaves
                    if (entry := saved.get(repr(leaf))) is not None
                ]
                run_id = str(data["run_id"])
                prompt = str(data.get("prompt", ""))
                last_text = data.get("last_text")
                if last_text is not None and not isinstance(last_text, str):
                    raise TypeError(f"last_text is {type(last_text).__name__}, not str")
                in_flight = InFlight.from_list(data.get("in_flight", []))
                self._budgets.load(data.get("unsettled", []))  # last: it swaps in a new list
            except (KeyError, TypeError, ValueError, ArithmeticError, AttributeError) as error:
                raise ConfigurationError(f"not a haltwise checkpoint: {error!r}") from error
            self._run.load(run)
            self._session.load(session)
            for slot, baseline, extra in rounds:
                slot.baseline = baseline
                slot.extra = extra
            self._run_id = run_id
            self._prompt = prompt
            self._last_text = last_text
            self._in_flight.clear()
            for reservation in in_flight:
                self._in_flight.hold(reservation)
            self._settle_in_flight()
            self._stopped = None
            self._pending = None
            self._synthesizing = self._pass_claimed = False
            self._refresh()
            self._set_due()

    # ----------------------------------------------------------------------------------------
    # The Context that limits see

    def slot(self, leaf: Leaf) -> Slot:
        return self._slots[leaf]

    def request_cost(self, model: str, input_tokens: int, max_tokens: int) -> int:
        """The most a request can cost, in engine units (10^-18 USD)."""
        quote = self._quote
        if quote[1] == input_tokens and quote[2] == max_tokens and quote[0] == model:
            return quote[3]
        cost = self._pricing().worst_units(model, input_tokens, max_tokens) if model else None
        if cost is None:
            raise UnpricedModelError(
                model or "(no model name)", self._pricing().describe_missing(model)
            )
        _check_price(model, cost)
        self._quote = (model, input_tokens, max_tokens, cost)
        return cost

    def usage_now(self) -> Usage:
        return self.usage

    # ----------------------------------------------------------------------------------------
    # Event handlers

    def _on_run_started(self, event: RunStarted) -> Decision:
        now = self._clock()
        self._settle_in_flight()
        self._stopped = None
        self._synthesizing = self._pass_claimed = False
        self._refresh()
        self._run.reset(now)
        if self._session.started_at is None:
            self._session.started_at = now
        for leaf, slot in self._run_slots:
            slot.new_round()
            slot.state = leaf.new_state()
        if self._phases:
            # Phases belong to the run they were entered in.
            self._phases = []
            self._install(self._limits, keep_slots=True)
        else:
            self._set_due()
        self._run_id = event.run_id or self._new_id()
        self._over = []
        self._prompt = event.prompt
        self._last_text = None
        return self._check(self._pre_run, self._post_run, event)

    # The handlers skip the calls to ``_pre`` and ``_post`` when no limit checks the event: on
    # the hot path, a call costs as much as the check itself.

    def _on_turn_starting(self, event: TurnStarting) -> Decision:
        if self._pre_turn:
            decision = self._pre(self._pre_turn, event)
            if decision is not None:
                return decision
        if self._shared_turn and not self._checked:
            decision = self._take_shared(self._shared_turn, event)
            if decision is not None:
                return decision
        self._run.turns += 1
        self._session.turns += 1
        if self._post_turn or self._dispatch.early is not None:
            return self._post(self._post_turn, event)
        return CONTINUE

    def _on_model_request(self, event: ModelRequest) -> Decision:
        if len(self._in_flight.requests) >= MAX_IN_FLIGHT:
            room_for(self._run, self._session)  # the oldest request will be counted
        if self._pre_request:
            decision = self._pre(self._pre_request, event)
            if decision is not None:
                return decision
        if self._shared_request and not self._checked:
            decision = self._take_shared(self._shared_request, event)
            if decision is not None:
                return decision
        max_tokens = self._count_request(event)
        if self._post_request or self._dispatch.early is not None:
            decision = self._post(self._post_request, event)
        else:
            decision = CONTINUE
        if max_tokens == event.max_tokens:
            return decision
        return _lowered(decision, max_tokens)

    def _count_request(self, event: ModelRequest) -> int | None:
        """Count an admitted request as a model call, and hold its worst case until its answer:
        its prompt, its ``max_tokens`` (lowered to what the token limits leave) and, under a
        cost limit, its dollars.

        The ``max_tokens`` to send comes back. A request that set none may still be told one
        (what the token limits leave), but holds no output tokens: its worst case is unknown,
        and its answer is checked when it arrives.
        """
        run = self._run
        run.model_calls += 1
        self._session.model_calls += 1
        wanted = max_tokens = event.max_tokens
        holds, self._holds = self._holds, ()
        if self._shared_max is not None:
            max_tokens, self._shared_max = self._shared_max, None
        for limit, slot, _ in self._allowing:
            allowed = limit.allowance(event, slot)
            if allowed is not None and (max_tokens is None or allowed < max_tokens):
                max_tokens = allowed
        prompt = event.input_tokens
        if prompt is None:
            prompt = run.last_input_tokens
        output = 0 if wanted is None or max_tokens is None else max_tokens
        cost = None
        if self._needs_prices and wanted is not None and event.model:
            quote = self._quote  # the cost limit's check has priced it, most often
            if quote[1] == prompt and quote[2] == output and quote[0] == event.model:
                cost = quote[3]
            else:
                cost = self.request_cost(event.model, prompt, output)
        in_flight = self._in_flight
        if len(in_flight.requests) >= MAX_IN_FLIGHT:
            # A driver that never reports answers: the oldest request is taken as unanswered.
            self._spend(0)
        in_flight.hold((event.request_id, event.model, prompt, output, cost, holds))
        return max_tokens

    def _spend(self, index: int) -> int | None:
        """Count the request in flight at ``index``, sent and never answered, at what it
        reserved; its cost."""
        in_flight = self._in_flight
        _, model, prompt, output, cost, holds = in_flight.requests[index]
        if cost is None:
            cost = self._price(model, prompt, output, 0, 0)  # may raise: nothing is taken yet
        in_flight.take(index)
        self._add_usage(prompt, output, 0, 0, cost)
        if holds:
            self._budgets.commit(holds, None)
        return cost

    def _settle_in_flight(self) -> None:
        """Every request still in flight is counted at its reservation."""
        in_flight = self._in_flight
        if in_flight.requests:
            room_for(self._run, self._session)  # before any is counted
        while in_flight.requests:
            self._spend(0)

    def _on_model_response(self, event: ModelResponse) -> Decision:
        if self._pre_response:
            decision = self._pre(self._pre_response, event)
            if decision is not None:
                return decision
        return self._after_response(event, self._count_response(event))

    def _after_response(self, event: ModelResponse, cost: int | None) -> Decision:
        """The decision on a response once it is counted."""
        if cost is None and self._needs_prices:
            # Counted first, so nothing is lost; but the cost limit cannot be kept.
            raise UnpricedModelError(
                event.model or "(no model name)", self._pricing().describe_missing(event.model)
            )
        if self._over:
            over, self._over = self._over, []
            for (leaf, slot, ctx), used, limit, window in over:
                message = leaf.ledger_exceeded(used, limit, window)
                decision = self._trip(leaf, slot, event, message, before=False, ctx=ctx)
                if decision is not None:
                    return decision
        return self._post(self._post_response, event)

    def _take_shared(self, checks: tuple[_Shared, ...], event: Event) -> Decision | None:
        """The shared budgets' say on ``event``: None when each granted what it needs (a
        request's reservations then wait in ``_holds`` for ``_count_request``)."""
        holds, lowered, problem = self._budgets.take(checks, event, self._run_id)
        if problem is None:
            if type(event) is ModelRequest:
                self._holds = tuple(hold for hold in holds if hold[1])
                self._shared_max = lowered
            return None
        return self._shared_refused(problem, event)

    def _shared_refused(self, problem: Refused | LedgerError, event: Event) -> Decision:
        if isinstance(problem, Refused):
            leaf, slot, ctx = problem.check
            decision = self._trip(leaf, slot, event, problem.message, before=True, ctx=ctx)
            return CONTINUE if decision is None else decision  # None: shadow, never shared
        return self._ledger_down(problem)

    def _ledger_down(self, error: LedgerError) -> Stop:
        return self._stop(
            Status.ABANDONED,
            "ledger_unavailable",
            f"The ledger holding the shared budgets is unreachable ({self._ledger!r}: {error}), "
            "so the run stopped rather than spend them unchecked (on_ledger_error='open' goes "
            "on under the local limits instead).",
            None,
        )

    def _count_response(self, event: ModelResponse) -> int | None:
        """Count a response's usage (or, unanswered, its request's reservation)."""
        room_for(self._run, self._session)  # before anything is taken or counted
        in_flight = self._in_flight
        index = None
        if in_flight.requests:
            request_id = event.request_id
            index = in_flight.index(request_id) if request_id else 0
        if not event.answered:
            # With nothing reserved (no request reported), nothing is known to count.
            return self._spend(index) if index is not None else 0
        # Priced before the request is taken out: pricing may raise.
        if event.cost is not None:
            cost: int | None = units(event.cost)
        else:
            cost = self._price(
                event.model,
                event.input_tokens,
                event.output_tokens,
                event.cache_read_tokens,
                event.cache_write_tokens,
            )
        reservation = None if index is None else in_flight.take(index)
        self._add_usage(
            event.input_tokens,
            event.output_tokens,
            event.cache_read_tokens,
            event.cache_write_tokens,
            cost,
        )
        if reservation is not None and reservation[5]:
            self._over = self._budgets.commit(
                reservation[5], lambda leaf: leaf.ledger_actual(event, cost)
            )
        if event.text:
            self._last_text = event.text
        return cost

    def _add_usage(
        self,
        input_tokens: int,
        output_tokens: int,
        cache_read: int,
        cache_write: int,
        cost: int | None,
    ) -> None:
        # Written out for the run and the session: this runs for every response.
        run, session = self._run, self._session
        run.input_tokens += input_tokens
        session.input_tokens += input_tokens
        run.output_tokens += output_tokens
        session.output_tokens += output_tokens
        run.last_input_tokens = session.last_input_tokens = input_tokens
        if cache_read:
            run.cache_read_tokens += cache_read
            session.cache_read_tokens += cache_read
        if cache_write:
            run.cache_write_tokens += cache_write
            session.cache_write_tokens += cache_write
        if cost is None:
            run.cost_known = session.cost_known = False
        else:
            run.cost += cost
            session.cost += cost

    def _on_turn_ended(self, event: TurnEnded) -> Decision:
        if event.text:
            self._last_text = event.text
        if self._pre_turn_end or self._post_turn_end:
            return self._check(self._pre_turn_end, self._post_turn_end, event)
        return CONTINUE

    def _on_other(self, event: Event) -> Decision:
        pre, post = self._tables[type(event)]
        return self._check(pre, post, event)

    def _on_run_ended(self, event: RunEnded) -> Decision:
        decision = self._pre(self._pre_run_end, event)
        if decision is not None:
            return decision  # a time limit passed: the run did not end in time
        output = event.output if event.output is not None else self._last_text
        run = self._run
        message = (
            f"The run completed in {_count(run.turns, 'turn')}, "
            f"{_count(run.model_calls, 'model call')} and {_count(run.tool_calls, 'tool call')}."
        )
        return self._stop(Status.COMPLETED, "completed", message, None, partial=output)

    # ----------------------------------------------------------------------------------------
    # After a stop

    def _after_stop(self, event: Event) -> Decision:
        """Events after the run stopped: usage still counts; one synthesis pass is budgeted
        (the first request, unless a driver's synthesizer has claimed the pass), and every
        other request is refused, without a pass of its own."""
        stop = self._stopped
        assert stop is not None
        kind = type(event)
        if kind is ModelRequest and stop.synthesize:
            if self._synthesizing or self._pass_claimed:
                return replace(stop, synthesize=False, synthesizer=None)
            return self._admit_synthesis(event)  # type: ignore[arg-type]
        if kind is ModelResponse:
            # It was sent before the stop, or it is the synthesis pass: either way it is spent,
            # by a parent's budgets too.
            if self._parent is not None:
                self._parent.handle(event)
            self._count_response(event)  # type: ignore[arg-type]
            self._over = []
            if self._synthesizing:
                return CONTINUE  # its driver ends the pass (synthesized, synthesis_unanswered)
            stop = self._stopped = replace(stop, outcome=self._restated(stop.outcome))
        return stop

    def _restated(self, outcome: Outcome) -> Outcome:
        """``outcome`` of a stopped run with what the run has spent by now (a call sent before
        the stop and answered after it, the synthesis pass), and its checkpoint saved again
        to match, so that a run resumed from it cannot spend that twice."""
        outcome = replace(outcome, usage=self.usage)
        if outcome.checkpoint is None:
            return outcome
        try:
            self._ledger.save_checkpoint(self._run_id, self.checkpoint())
        except LedgerError as error:
            # The counts stay in this governor (``checkpoint()`` has them); the checkpoint
            # saved at the stop is behind them, and the outcome says so (once).
            behind = " Its checkpoint could not be brought up to date"
            if behind not in outcome.message:
                outcome = replace(outcome, message=f"{outcome.message}{behind}: {error}.")
        return outcome

    def _admit_synthesis(self, event: ModelRequest) -> Decision:
        """The tools-free pass after a ``synthesize`` stop: only the budgets (tokens and
        dollars) are checked, with its worst case, before it is sent; it counts as a model
        call. If even that does not fit, the run ends with its partial output, saying so."""
        stop = self._stopped
        assert stop is not None
        for limit, slot, ctx, judge in self._pre_request:
            if limit.reason not in ("token_limit", "cost_limit") or limit.shadow:
                continue
            verdict = judge(event, slot, ctx)
            if isinstance(verdict, str):
                outcome = stop.outcome
                message = (
                    f"{outcome.message} No final answer was written: the budget left cannot "
                    f"pay for one ({verdict}); the partial output is kept."
                )
                self._stopped = Stop(replace(outcome, message=message, usage=self.usage))
                self._synthesizing = self._pass_claimed = False
                return self._stopped
        self._synthesizing = True
        max_tokens = self._count_request(event)
        return CONTINUE if max_tokens == event.max_tokens else _lowered(CONTINUE, max_tokens)

    # ----------------------------------------------------------------------------------------
    # Checking

    def _check(self, pre: tuple[_Check, ...], post: tuple[_Check, ...], event: Event) -> Decision:
        decision = self._pre(pre, event)
        return decision if decision is not None else self._post(post, event)

    def _soft_warning(self, limit: Limit, slot: Slot, ctx: Context) -> Warn | None:
        """The note of a limit whose soft threshold (``warn_at``) the run has just crossed,
        once (``Dispatch.post``)."""
        text = limit.warning(slot, ctx)
        if text is None:
            return None
        slot.warned = True
        return Warn(_in_phase(text, ctx), repr(limit))

    def _trip(
        self,
        limit: Limit,
        slot: Slot | None,
        event: Event,
        message: str,
        *,
        before: bool,
        ctx: Context,
    ) -> Decision | None:
        if limit.shadow:
            if slot is not None and not slot.tripped:
                slot.tripped = True
                text = _in_phase(message, ctx)
                self.shadow_trips.append(ShadowTrip(self._run_id, repr(limit), text, event))
            return None
        policy = limit.policy.name
        if policy == "block" and type(event) is ToolCall:
            return Block(event, _in_phase(message, ctx), repr(limit))
        if policy == "ask":
            ask = Ask(
                question=_in_phase(limit.question(ctx), ctx),
                reason=limit.reason,
                limit=repr(limit),
                timeout=limit.policy.timeout,
                event=event,
                owner=self,
            )
            self._pending = (ask, limit, before, ctx)
            self._dispatch.plain = False
            return ask
        if policy == "best_effort":
            return self._stop(Status.COMPLETED_WITH_WARNINGS, limit.reason, message, limit, ctx=ctx)
        stop = self._stop(
            limit.status_on_stop(),
            limit.reason,
            message,
            limit,
            synthesize=policy == "synthesize",
            provider_called=not before,
            ctx=ctx,
        )
        if limit.policy.synthesizer is not None:
            stop = self._stopped = replace(stop, synthesizer=limit.policy.synthesizer)
        return stop

    def _stop_after_ask(self, ask: Ask, limit: Limit, answer: Answer | None, ctx: Context) -> Stop:
        where = ask.question.removesuffix(" Continue?")
        if answer is None:
            waited = f" within {ask.timeout:g}s" if ask.timeout is not None else ""
            message = f"{where} No answer came{waited}, so the run stops ({ask.limit})."
            return self._stop(limit.status_on_stop(), limit.reason, message, limit)
        message = f"{where} The human declined to continue ({ask.limit})."
        return self._stop(Status.ABANDONED, "declined", message, limit, phase=_phase_of(ctx))

    def _cancelled(self, partial: str | None = None) -> Stop:
        with self._cancel_lock:
            reason, self._cancel_reason = self._cancel_reason, None
            code, self._cancel_code = self._cancel_code, "cancelled"
        self._pending = None
        if self._stopped is not None:
            return self._stopped  # the run had already stopped: its stop stands
        if code == "killed":
            told = "" if reason in (None, "killed") else f": {reason}"
            message = f"The run was stopped from elsewhere{told}."
        elif reason in (None, "cancelled"):
            message = "The run was cancelled."
        else:
            message = f"The run was cancelled: {reason}."
        return self._stop(Status.CANCELLED, code, message, None, partial=partial)

    def _stop(
        self,
        status: Status,
        reason: str,
        message: str,
        limit: Limit | None,
        *,
        synthesize: bool = False,
        provider_called: bool = False,
        partial: str | None = None,
        ctx: Context | None = None,
        phase: str | None = None,
    ) -> Stop:
        phase = phase if ctx is None else _phase_of(ctx)
        if phase is not None and not message.startswith("In phase"):
            message = f"In phase {phase!r}: {message}"
        if self._budgets.unsettled and reason != "ledger_unavailable":
            # No later event would settle them: the run's end is their last chance (before the
            # checkpoint, which keeps only those still waiting). A ledger that has just failed
            # the run is not asked again.
            self._budgets.settle_waiting()
        checkpoint = None
        if status is not Status.COMPLETED:
            try:
                checkpoint = self._ledger.save_checkpoint(
                    self._run_id or self._new_id(), self.checkpoint()
                )
            except LedgerError as error:
                # The counts stay in this governor: ``checkpoint()`` still has them.
                message += f" Its checkpoint could not be saved: {error}."
        suggestions = limit.suggestions() if limit is not None else ()
        if checkpoint is not None:
            suggestions = (*suggestions, f"Resume from checkpoint {checkpoint}")
        outcome = Outcome(
            status=status,
            reason=reason,
            message=message,
            usage=self._run.snapshot(self._clock()),
            run_id=self._run_id,
            partial_output=partial if partial is not None else self._last_text,
            suggestions=suggestions,
            checkpoint=checkpoint,
            limit=None if limit is None else repr(limit),
            phase=phase,
        )
        stop = Stop(outcome, synthesize=synthesize, provider_called=provider_called)
        self._stopped = stop
        self._dispatch.plain = False
        return stop

    # ----------------------------------------------------------------------------------------
    # Children

    def _through_parent(self, event: Event) -> Decision:
        """A child's own checks first (a refusal there spends nothing of the parent's), then
        the parent's, which the child can never exceed; only then does the child count it."""
        assert self._parent is not None
        own = self._pre(self._tables[type(event)][0], event)
        if own is not None:
            return own
        shared = self._shared_checks.get(type(event), ())
        holds: tuple[Hold, ...] = ()
        if shared:
            holds, lowered, problem = self._budgets.take(shared, event, self._run_id)
            if problem is not None:
                return self._shared_refused(problem, event)
        decision = self._from_parent(self._parent.handle(event))
        if isinstance(decision, Stop | Ask | Block):
            self._budgets.undo(holds)
            if type(event) is ModelResponse and isinstance(decision, Stop):
                self._count_response(event)  # the parent counted it; so does the child
            # The child's own note was for an event that did not happen.
            self._dispatch.early = None
            return decision
        if type(event) is ModelRequest and holds:
            self._holds = tuple(hold for hold in holds if hold[1])
            self._shared_max = lowered
        return _merge(decision, self._admit(event))

    def _admit(self, event: Event) -> Decision:
        """Count ``event`` and run the after-checks; its before-checks have passed."""
        self._checked = True
        try:
            decision: Decision = self._handlers[type(event)](event)
        finally:
            self._checked = False
        return decision

    def _from_parent(self, decision: Decision) -> Decision:
        if isinstance(decision, Stop):
            self._stopped = decision
            self._dispatch.plain = False
        return decision

    def _resolve_for_parent(self, ask: Ask, answer: Answer | Choice | bool | None) -> Decision:
        owner = ask.owner
        if not isinstance(owner, Governor):
            raise ConfigurationError("resolve() got an Ask that no governor made")
        decision = self._from_parent(owner.resolve(ask, answer))
        if isinstance(decision, Stop | Ask | Block) or ask.event is None:
            return decision
        return _merge(decision, self._admit(ask.event))

    # ----------------------------------------------------------------------------------------
    # Set-up

    def _install(
        self, limits: Limit, blueprint: _Blueprint | None = None, *, keep_slots: bool = False
    ) -> None:
        """Make the tables of checks for ``limits`` (its ``blueprint``; None: the one in use,
        for the limits in use), with slots of their own (or, ``keep_slots``, those its leaves
        had), and those of the phases open."""
        if blueprint is None:
            blueprint = self._blueprint
        self._limits = limits
        self._blueprint = blueprint
        self._leaves: tuple[Leaf, ...] = blueprint.leaves
        kept = self._slots
        slots: list[Slot] = []
        for leaf in blueprint.leaves:
            slot = kept.get(leaf) if keep_slots else None
            if slot is None:
                slot = Slot(
                    self._session if leaf.scope == "session" else self._run,
                    leaf.warn_at is not None,
                )
                slot.state = leaf.new_state()
            slots.append(slot)
        self._slots = dict(zip(blueprint.leaves, slots, strict=True))
        #: The run-scoped limits' slots, which every run starts afresh.
        self._run_slots = tuple(
            (blueprint.leaves[index], slots[index]) for index in blueprint.run_scoped
        )
        contexts: list[_Binding] = [(blueprint, slots, self, [None] * blueprint.count)]
        for phase in self._phases:
            owned = phase.blueprint
            phase_slots = [phase.slots[leaf] for leaf in owned.leaves]
            contexts.append((owned, phase_slots, phase, [None] * owned.count))
        self._needs_prices = any(owned.needs_prices for owned, _, _, _ in contexts)
        none = (_NO_CHECKS, _NO_CHECKS)
        full = dict.fromkeys(ALL_EVENTS, none)
        fast = dict.fromkeys(ALL_EVENTS, none)
        shared: dict[type, tuple[tuple[Leaf, Slot, Context], ...]] = {}
        for owned, _, _, _ in contexts:
            for event_type in owned.checks:
                if full[event_type] is none:
                    pre, fast_pre = _bound_checks(contexts, event_type, _PRE)
                    post, fast_post = _bound_checks(contexts, event_type, _POST)
                    full[event_type] = (pre, post)
                    fast[event_type] = (fast_pre, fast_post)
            for event_type in owned.shared:
                if event_type not in shared:
                    shared[event_type] = _bound_limits(
                        contexts, [bound[0].shared.get(event_type, ()) for bound in contexts]
                    )
        self._full_tables = full
        self._fast_tables = fast
        self._allowing = _bound_limits(contexts, [bound[0].allowing for bound in contexts])
        self._deadlines = _bound_limits(contexts, [bound[0].deadlines for bound in contexts])
        self._shared_checks = shared
        self._shared_turn = shared.get(TurnStarting, ())
        self._shared_request = shared.get(ModelRequest, ())
        self._set_due()

    def _set_due(self) -> None:
        """Leave the plain time limits out of the checks until the earliest of their deadlines
        (``handle`` looks at the clock against it). Called whenever a deadline may have moved:
        a run started, a limit was continued or extended, limits or phases changed, a restore.
        """
        due = earliest = None
        for limit, slot, _ in self._deadlines:
            at = limit.deadline(slot)
            if at is None:
                continue
            if earliest is None or at < earliest:
                earliest = at
            if limit.warn_at is None and (due is None or at < due):
                due = at  # a plain time limit: left out of the tables until then
        if earliest != self._earliest:
            self._earliest = earliest
            for listener in self._deadline_listeners:
                listener()
        if due is not None and self._clock() >= due:
            self._time_is_up()
        else:
            self._dispatch.due = due
            self._use(self._fast_tables)

    def _time_is_up(self) -> None:
        """A plain time limit's deadline has passed: every limit is checked from now on, in its
        place in the limit expression, until a deadline moves again."""
        self._dispatch.due = None
        self._use(self._full_tables)

    def _use(self, tables: dict[type, tuple[tuple[_Check, ...], tuple[_Check, ...]]]) -> None:
        hot = self._handlers
        if tables is self._fast_tables and self._run.started_at is not None:
            # Written once a run has started (a governor never run writes nothing), and again
            # whenever the limits or phases change (``_install`` makes new tables).
            if self._written is None or self._written[0] is not tables:
                written = compile_handlers(self)
                self._written = (tables, {**self._handlers, **written} if written else {})
            hot = self._written[1] or self._handlers
        self._dispatch.use(hot)
        if self._tables is tables:
            return
        self._pre_run, self._post_run = tables[RunStarted]
        self._pre_turn, self._post_turn = tables[TurnStarting]
        self._pre_request, self._post_request = tables[ModelRequest]
        self._pre_response, self._post_response = tables[ModelResponse]
        self._dispatch.use_tool_checks(
            tables[ToolCall], tables[ToolResult], self._shared_checks.get(ToolCall, ())
        )
        self._pre_turn_end, self._post_turn_end = tables[TurnEnded]
        self._pre_run_end = tables[RunEnded][0]
        self._tables = tables

    def _pricing(self) -> UnitPricer:
        if self._pricer is None:
            from ..pricing import shared_prices

            self._pricer = shared_prices()
        return self._pricer

    def _price(
        self, model: str, input_tokens: int, output_tokens: int, cache_read: int, cache_write: int
    ) -> int | None:
        """A call's cost in engine units, or None when it has no price."""
        if not model:
            return None
        price = self._unit_price
        if price is None:
            price = self._unit_price = self._pricing().units
        cost = price(model, input_tokens, output_tokens, cache_read, cache_write)
        if cost is not None:
            _check_price(model, cost)
        return cost

    def __repr__(self) -> str:
        return f"Governor({self._limits!r})"


def _check_price(model: str, cost: int) -> None:
    """Raise ``InvalidValueError`` unless ``cost``, what the pricer says a call to ``model``
    costs, is from 0 to ``MAX_CALL_COST``: the totals have room for calls of at most that."""
    if not 0 <= cost <= MAX_CALL_COST:
        raise InvalidValueError(
            f"the price of a call to {model!r}",
            dollars(cost),
            f"a cost from $0 to ${MAX_CALL_DOLLARS:,}: check the model's prices",
        )


# --------------------------------------------------------------------------------------------
# The checks of what a governor (or a driver that makes one) is given


def checked_callable(value: object, argument: str, takes: str) -> None:
    """Raise ``InvalidValueError`` naming ``argument`` and saying what it ``takes`` unless
    ``value`` can be called."""
    if not callable(value):
        raise InvalidValueError(argument, value, takes)


def checked_pricer(value: object, argument: str) -> None:
    """Raise ``InvalidValueError`` naming ``argument`` unless ``value`` is a ``Pricer`` (its
    ``cost`` and ``describe_missing`` can be called) or None."""
    if value is None:
        return
    if not (
        callable(getattr(value, "cost", None))
        and callable(getattr(value, "describe_missing", None))
    ):
        raise InvalidValueError(
            argument,
            value,
            "a Pricer such as haltwise.Prices({'my-model': {'input': '0.50', 'output': '1.50'}}) "
            "(an object with cost() and describe_missing()), or None for genai-prices",
        )


def checked_ledger(value: object, argument: str) -> None:
    """Raise ``InvalidValueError`` naming ``argument`` unless ``value`` is a ``Ledger``, a
    ledger's URL (checked as it is opened) or None."""
    if value is not None and not isinstance(value, Ledger | str):
        raise InvalidValueError(
            argument,
            value,
            "a Ledger (MemoryLedger(), ...), a URL such as 'memory:', 'sqlite:///PATH' or "
            "'redis://HOST:PORT/DB', or None for one in this process's memory",
        )


def checked_seconds(value: object, argument: str, *, zero: bool = False) -> None:
    """Raise ``InvalidValueError`` naming ``argument`` unless ``value`` is a number of seconds
    above 0 (or 0 itself, with ``zero``) that a wait can take (at most
    ``threading.TIMEOUT_MAX``)."""
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not (value >= 0 if zero else value > 0)
        or not value <= threading.TIMEOUT_MAX
    ):
        lowest = "from 0" if zero else "above 0"
        raise InvalidValueError(
            argument,
            value,
            f"a number of seconds {lowest} and at most {threading.TIMEOUT_MAX:.0f} "
            "(threading.TIMEOUT_MAX), such as 2.5",
        )


# --------------------------------------------------------------------------------------------
# How a limit expression is installed


#: A blueprint's tables of checks for an event type (``_Blueprint.checks``): before and after
#: the event with every limit (full), then the same with the plain time limits left out until
#: their deadline (fast); a fast table with no limit left out is its full table itself.
_PRE, _POST = range(2)
_FAST = 2
#: A check as a blueprint holds it, for any governor: the limit, the index of its slot among the
#: blueprint's leaves (-1 for a group, which has none), its bound ``pre`` or ``post``, and its
#: own index among the blueprint's checks.
_Unbound = tuple[Limit, int, Callable[..., Any], int]
#: A blueprint bound in ``_install``: the slots of its leaves, in order, the context, and the
#: checks made so far, by their index (one check of a limit's ``post`` serves each event type
#: it follows).
_Binding = tuple["_Blueprint", list[Slot], Context, list["_Check | None"]]
_NO_CHECKS: tuple[Any, ...] = ()


class _Blueprint:
    """What installing a limit expression makes of it, the same for every governor: its
    distinct leaves, and its checks with an index into those leaves where a governor puts the
    leaf's slot (``_install`` binds them to its slots and context). A limit expression is a
    value, never changed once made, so the blueprint of one a governor is given is made once
    and kept (``_blueprint_of``): a governor made for each run then walks its members only at
    the first. An expression a governor makes itself (of a callable, or ``set_limit``'s) has a
    blueprint of its own."""

    __slots__ = (
        "allowing",
        "checks",
        "count",
        "deadlines",
        "hot_events",
        "hot_source",
        "leaves",
        "needs_prices",
        "run_scoped",
        "shared",
    )

    def __init__(self, limit: Limit) -> None:
        index: dict[Leaf, int] = {}
        for leaf in limit.leaves():
            index.setdefault(leaf, len(index))
        self.leaves = tuple(index)
        #: The indices of the run-scoped leaves, whose slots every run starts afresh.
        self.run_scoped = tuple(at for leaf, at in index.items() if leaf.scope == "run")
        self.needs_prices = any(leaf.reason == "cost_limit" for leaf in self.leaves)
        checks: dict[type, tuple[list[_Unbound], ...]] = {}
        count = 0
        shared: dict[type, list[tuple[Leaf, int]]] = {}
        allowing: list[tuple[Leaf, int]] = []
        deadlines: list[tuple[Leaf, int]] = []
        for member in limit.members():
            at = -1
            if isinstance(member, Leaf):
                if not member.enforced:
                    continue
                at = index[member]
            before = member.pre_events
            if isinstance(member, Leaf) and member.share is not None:
                # Checked by the ledger, in one step with every governor sharing its key.
                for event_type in before:
                    shared.setdefault(event_type, []).append((member, at))
                continue
            # A plain time limit (no soft threshold, not in shadow) has nothing to say before
            # its deadline: it is left out of the fast tables until then.
            timer = (
                isinstance(member, Leaf)
                and member.reason == "time_limit"
                and not member.shadow
                and member.warn_at is None
            )
            # Each event type's table gets the check once, whatever order they are named in.
            after: Collection[EventType] = member.post_events
            if member.warn_at is not None:
                after = {*after, *before}
            pre = (member, at, member.pre, count)
            post = (member, at, member.post, count + 1)
            count += 2
            for events, which, check in ((before, _PRE, pre), (after, _POST, post)):
                for event_type in events:
                    tables = checks.setdefault(event_type, ([], [], [], []))
                    tables[which].append(check)
                    if not timer:
                        tables[_FAST + which].append(check)
            if isinstance(member, Leaf) and not member.shadow:
                if member.allows:
                    allowing.append((member, at))
                if member.reason == "time_limit":
                    deadlines.append((member, at))
        #: By event type, its four tables of checks (``_PRE``, ``_POST``, then each
        #: ``_FAST``).
        self.checks: dict[type, tuple[tuple[_Unbound, ...], ...]] = {}
        for event_type, (full_pre, full_post, fast_pre, fast_post) in checks.items():
            before_all, after_all = tuple(full_pre), tuple(full_post)
            self.checks[event_type] = (
                before_all,
                after_all,
                before_all if len(fast_pre) == len(full_pre) else tuple(fast_pre),
                after_all if len(fast_post) == len(full_post) else tuple(fast_post),
            )
        #: By event type, the shared limits (``key=``) checked before it, by the ledger.
        self.shared = {event_type: tuple(members) for event_type, members in shared.items()}
        #: The limits that can lower a request's ``max_tokens``, and the time limits.
        self.allowing = tuple(allowing)
        self.deadlines = tuple(deadlines)
        #: How many checks there are (``_Unbound``'s last item is below it).
        self.count = count
        #: What ``hotpath.compile_handlers`` found and wrote for a governor of these limits
        #: alone (no phase, no parent, no shared budget), once it has: the events that get
        #: handlers of their own, and the source of those it writes.
        self.hot_events: tuple[type, ...] | None = None
        self.hot_source: str | None = None


#: The blueprints of expressions governors were given, by the id of the expression, kept with
#: it (an id names one object only while it lives); past ``_BLUEPRINTS_KEPT`` the oldest is
#: forgotten. One of ``limits | stuck()`` and the expression take some 12 KB.
_blueprints: dict[int, tuple[Limit, _Blueprint]] = {}
_BLUEPRINTS_KEPT = 64


def _blueprint_of(limit: Limit) -> _Blueprint:
    """``limit``'s blueprint, made at its first install."""
    kept = _blueprints.get(id(limit))
    if kept is not None and kept[0] is limit:
        return kept[1]
    blueprint = _Blueprint(limit)
    if len(_blueprints) >= _BLUEPRINTS_KEPT:
        # Governors made in other threads may change the blueprints between the two steps:
        # the oldest is then left for the next time.
        with contextlib.suppress(RuntimeError, StopIteration, KeyError):
            del _blueprints[next(iter(_blueprints))]
    _blueprints[id(limit)] = (limit, blueprint)
    return blueprint


def _bound_checks(
    contexts: list[_Binding], event_type: type, which: int
) -> tuple[tuple[_Check, ...], tuple[_Check, ...]]:
    """The full and the fast table of checks ``which`` (``_PRE``, ``_POST``) for
    ``event_type``: each context's blueprint's, bound to its slots and to the context, in
    order. The fast one is the full one itself where no blueprint leaves a limit out of it."""
    full = _bind(contexts, event_type, which)
    for blueprint, _, _, _ in contexts:
        tables = blueprint.checks.get(event_type)
        if tables is not None and tables[_FAST + which] is not tables[which]:
            return full, _bind(contexts, event_type, _FAST + which)
    return full, full


def _bind(contexts: list[_Binding], event_type: type, table: int) -> tuple[_Check, ...]:
    bound: list[_Check] = []
    for blueprint, slots, ctx, made in contexts:
        tables = blueprint.checks.get(event_type)
        if tables is not None:
            for member, at, method, index in tables[table]:
                check = made[index]
                if check is None:
                    check = made[index] = (member, None if at < 0 else slots[at], ctx, method)
                bound.append(check)
    return tuple(bound) if bound else _NO_CHECKS


def _bound_limits(
    contexts: list[_Binding], chosen: list[tuple[tuple[Leaf, int], ...]]
) -> tuple[tuple[Leaf, Slot, Context], ...]:
    """The limits ``chosen`` of each context's blueprint (one tuple for each context), bound
    to its slots and context."""
    bound: list[tuple[Leaf, Slot, Context]] = []
    for (_, slots, ctx, _), members in zip(contexts, chosen, strict=True):
        for member, at in members:
            bound.append((member, slots[at], ctx))
    return tuple(bound) if bound else _NO_CHECKS


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"


def _merge(first: Decision, second: Decision) -> Decision:
    """A parent's decision and then a child's own, for the same event."""
    if isinstance(second, Continue) and second.max_tokens is None:
        return first
    if isinstance(first, Continue) and first.max_tokens is None:
        return second
    if isinstance(first, Continue | Warn) and isinstance(second, Continue | Warn):
        # Both admit a request: the note of each, and the lower max_tokens.
        lowest = min(
            (n for n in (first.max_tokens, second.max_tokens) if n is not None), default=None
        )
        if isinstance(first, Warn) and isinstance(second, Warn):
            return replace(joined(first, second), max_tokens=lowest)
        note = first if isinstance(first, Warn) else second
        return _lowered(note, lowest)
    return second


def _lowered(decision: Decision, max_tokens: int | None) -> Decision:
    """``decision`` with the request's (lowered) ``max_tokens``."""
    if isinstance(decision, Continue):
        return Continue(max_tokens)
    if isinstance(decision, Warn):
        return replace(decision, max_tokens=max_tokens)
    return decision


def _phase_of(ctx: Context) -> str | None:
    return ctx.name if isinstance(ctx, Phase) else None


def _in_phase(text: str, ctx: Context) -> str:
    return f"In phase {ctx.name!r}: {text}" if isinstance(ctx, Phase) else text


def _as_answer(answer: Answer | Choice | bool | None) -> Answer | None:
    if answer is None or isinstance(answer, Answer):
        return answer
    if answer is True:
        return Answer(Choice.CONTINUE)
    if answer is False:
        return Answer(Choice.ABORT)
    if isinstance(answer, Choice) and answer is not Choice.EXTEND:
        return Answer(answer)
    raise InvalidValueError(
        "answer",
        answer,
        "an Answer, Choice.CONTINUE, Choice.WRAP_UP, Choice.ABORT, True, False or None",
    )
