"""The governor: takes one event, returns one decision. Pure and synchronous.

It never sleeps, prompts or does I/O, except saving a checkpoint through its ledger when a run
stops. Drivers (``haltwise.drivers``, framework adapters, the agent, replay) carry its decisions
out; none of them repeats its logic.

Hot path: a dict lookup by event type, then only the limits that check that type, each O(1)
over running totals. Nothing is allocated unless a limit warns, asks, blocks or stops.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from decimal import Decimal
from typing import Any

from .decisions import CONTINUE, Answer, Ask, Block, Choice, Continue, Decision, Stop, Warn
from .errors import ConfigurationError, InvalidValueError, UnpricedModelError
from .events import (
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
from .ledger import Ledger, MemoryLedger
from .limits import ALL_EVENTS, Leaf, Limit, LimitStatus, any_of, as_limit
from .outcome import Outcome, Status, Usage
from .pricing import Pricer
from .state import Slot, Tally

__all__ = ["Governor", "ShadowTrip"]

#: A check the governor runs for one event type: a top-level limit and its slot (None for groups).
_Check = tuple[Limit, "Slot | None"]
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


class Governor:
    """Decides, event by event, whether an agent run may go on.

    ``limits`` is any limit expression (``max_turns(25) | max_cost("2")``), a callable
    ``f(usage) -> bool``, or None. ``clock`` is a monotonic clock (a ``FakeClock`` in tests);
    ``pricer`` prices model calls (genai-prices with your own table by default); ``ledger``
    keeps checkpoints (in memory by default).
    """

    def __init__(
        self,
        limits: Limit | Callable[[Usage], bool] | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        pricer: Pricer | None = None,
        ledger: Ledger | None = None,
        new_id: Callable[[], str] = lambda: secrets.token_hex(6),
        parent: Governor | None = None,
    ) -> None:
        self._clock = clock
        #: The clock, as limits see it (the Context protocol).
        self.now = clock
        self._pricer = pricer
        self._ledger = ledger if ledger is not None else MemoryLedger()
        self._new_id = new_id
        self._parent = parent
        #: Running totals of the current run and of the whole session.
        self._run = Tally()
        self._session = Tally()
        self._run_id = ""
        self._prompt = ""
        self._last_text: str | None = None
        #: The terminal decision of the current run, once it has stopped.
        self._stopped: Stop | None = None
        #: The open question: the ask, the limit that asked, and whether it asked before spending.
        self._pending: tuple[Ask, Limit, bool] | None = None
        #: A note a limit gave before the event spent, returned once the event is admitted.
        self._early: Warn | None = None
        #: Set while a child counts an event whose before-checks already passed.
        self._checked = False
        #: A limit the human has just let through, skipped for the event being re-handled.
        self._bypass: Limit | None = None
        self._cancel_reason: str | None = None
        self._cancel_lock = threading.Lock()
        self._slots: dict[Leaf, Slot] = {}
        #: Trips of shadow-mode limits, in order.
        self.shadow_trips: list[ShadowTrip] = []
        #: True while nothing but the limits can change the next decision (the fast path).
        self._plain = parent is None
        self._handlers: dict[type, Callable[[Any], Decision]] = {
            RunStarted: self._on_run_started,
            TurnStarting: self._on_turn_starting,
            ModelRequest: self._on_model_request,
            ModelResponse: self._on_model_response,
            ToolCall: self._on_tool_call,
            ToolResult: self._on_tool_result,
            TurnEnded: self._on_turn_ended,
            Injected: self._on_other,
            Progress: self._on_other,
            RunEnded: self._on_run_ended,
        }
        self._install(as_limit(limits))

    # ----------------------------------------------------------------------------------------
    # Public surface

    def handle(self, event: Event) -> Decision:
        """The decision for ``event``."""
        if self._plain:
            # The common case, in one test: live, unasked, uncancelled, no parent.
            handler = self._handlers.get(type(event))
            if handler is not None:
                decision: Decision = handler(event)
                return decision
        if self._cancel_reason is not None:
            return self._cancelled()
        if self._stopped is not None and type(event) is not RunStarted:
            return self._stopped
        if self._pending is not None and type(event) is RunStarted:
            self._pending = None  # a new prompt makes the open question moot
        if self._pending is not None:
            raise ConfigurationError(
                f"{self._pending[0].question!r} is still unanswered: pass the answer to "
                "Governor.resolve() before sending more events"
            )
        if self._parent is not None and type(event) in _SPENDING:
            return self._through_parent(event)
        handler = self._handlers.get(type(event))
        if handler is None:
            raise InvalidValueError(
                "Governor.handle(event)", event, "one of the events in haltwise.events"
            )
        decision = handler(event)
        return decision

    __call__ = handle

    def _refresh(self) -> None:
        """Recompute the fast-path flag after the run's state changed."""
        self._plain = (
            self._cancel_reason is None
            and self._stopped is None
            and self._pending is None
            and self._parent is None
        )

    def resolve(self, ask: Ask, answer: Answer | Choice | bool | None) -> Decision:
        """Carry on after a human's ``answer`` to ``ask`` (None: no answer came, or no UI)."""
        if ask.owner is not self:
            return self._resolve_for_parent(ask, answer)
        if self._pending is None or self._pending[0] is not ask:
            raise ConfigurationError(
                "resolve() got an Ask that is not this governor's open question"
            )
        limit: Limit = self._pending[1]
        before: bool = self._pending[2]
        self._pending = None
        self._refresh()
        reply = _as_answer(answer)
        if reply is None or reply.choice is Choice.ABORT:
            stop: Stop = self._stop_after_ask(ask, limit, reply)
            return stop
        if reply.choice is Choice.WRAP_UP:
            message = f"{ask.question.removesuffix(' Continue?')} The human chose to wrap up."
            stop = self._stop(limit.status_on_stop(), limit.reason, message, limit, synthesize=True)
            return stop
        if reply.choice is Choice.CONTINUE:
            limit.new_round(self)
            self._bypass = limit
        else:
            assert reply.amount is not None
            limit.extend(reply.amount, self)
        try:
            return self.handle(ask.event) if before and ask.event is not None else CONTINUE
        finally:
            self._bypass = None

    def cancel(self, reason: str = "cancelled") -> None:
        """Stop the run at its next event. Safe to call from any thread or task."""
        with self._cancel_lock:
            self._cancel_reason = reason
            self._plain = False

    def synthesized(self, answer: str) -> Outcome:
        """The final outcome after a driver wrote ``answer`` for a ``Stop(synthesize=True)``."""
        if self._stopped is None or not self._stopped.synthesize:
            raise ConfigurationError("synthesized() is for a run that stopped with synthesize=True")
        outcome = self._stopped.outcome
        final = replace(
            outcome,
            status=Status.COMPLETED_WITH_WARNINGS,
            message=f"{outcome.message} Answered from the evidence gathered so far.",
            partial_output=answer,
        )
        self._stopped = Stop(final)
        return final

    def stop(self, reason: str, message: str, status: Status = Status.ABANDONED) -> Stop:
        """End the current run now, from outside the limits (a crash, a kill switch).

        The counts are checkpointed like any other stop's.
        """
        self._pending = None
        return self._stop(status, reason, message, None)

    def set_limit(self, limit: Limit) -> None:
        """Change a limit while a run is live, replacing the one of the same kind (or adding).

        A turn limit going from unlimited to a number restarts its count; from one number to
        another it keeps the count, so a count already past the new number trips at once.
        """
        members = list(self._limits.members())
        for new_leaf in as_limit(limit).leaves():
            for index, old in enumerate(members):
                if isinstance(old, Leaf) and old.key() == new_leaf.key():
                    slot = self._slots.pop(old)
                    if not old.enforced and new_leaf.enforced:
                        # The spec's LimitReEnabled: a limit switched back on starts from zero.
                        slot.new_round(new_leaf.metric(slot, self))
                    slot.warned = False
                    self._slots[new_leaf] = slot
                    members[index] = new_leaf
                    break
            else:
                members.append(new_leaf)
        self._install(any_of(*members) if members else as_limit(None), keep_slots=True)

    @property
    def limits(self) -> Limit:
        return self._limits

    @property
    def run_id(self) -> str:
        return self._run_id

    @property
    def usage(self) -> Usage:
        """What the current run has spent."""
        return self._run.snapshot(self._clock())

    @property
    def session_usage(self) -> Usage:
        """What every run of this governor has spent."""
        return self._session.snapshot(self._clock())

    @property
    def stopped(self) -> Stop | None:
        """The current run's terminal decision, once it has stopped."""
        return self._stopped

    @property
    def outcome(self) -> Outcome | None:
        return None if self._stopped is None else self._stopped.outcome

    @property
    def pending(self) -> Ask | None:
        """The question waiting for a human, if any."""
        return None if self._pending is None else self._pending[0]

    def standing(self) -> list[LimitStatus]:
        """Each limit's count and cap in the current round, for widgets and ``/limits``."""
        return [leaf.standing(self._slots[leaf], self) for leaf in self._leaves]

    def turns(self) -> tuple[int, int | None]:
        """The turn count of this round and the turn limit (None: unlimited or no turn limit)."""
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

    def checkpoint(self) -> dict[str, Any]:
        """The counts of the current run and session, as JSON-compatible data."""
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
                    "baseline": _jsonable(slot.baseline),
                    "extra": _jsonable(slot.extra),
                }
                for leaf in self._leaves
                for slot in (self._slots[leaf],)
            ],
            "last_text": self._last_text,
        }

    def restore(self, data: dict[str, Any] | str) -> None:
        """Resume a run from a checkpoint (or a ledger reference to one) with the counts it had.

        Counts of limits that still exist are kept; the run is live again.
        """
        if isinstance(data, str):
            data = self._ledger.load_checkpoint(data)
        try:
            now = self._clock()
            self._run.load(data["run"], now)
            self._session.load(data["session"], now)
            saved = {entry["limit"]: entry for entry in data["slots"]}
            for leaf in self._leaves:
                entry = saved.get(repr(leaf))
                if entry is not None:
                    slot = self._slots[leaf]
                    slot.baseline = _from_json(entry["baseline"])
                    slot.extra = _from_json(entry["extra"])
            self._run_id = str(data["run_id"])
            self._prompt = str(data.get("prompt", ""))
            self._last_text = data.get("last_text")
        except (KeyError, TypeError, ValueError, ArithmeticError) as error:
            raise ConfigurationError(f"not a haltwise checkpoint: {error!r}") from error
        self._stopped = None
        self._pending = None
        self._refresh()

    # ----------------------------------------------------------------------------------------
    # The Context that limits see

    def slot(self, leaf: Leaf) -> Slot:
        return self._slots[leaf]

    def request_cost(self, model: str, input_tokens: int, max_tokens: int) -> Decimal:
        cost = self._price(model, input_tokens, max_tokens, 0, 0)
        if cost is None:
            raise UnpricedModelError(
                model or "(no model name)", self._pricing().describe_missing(model)
            )
        return cost

    def usage_now(self) -> Usage:
        return self.usage

    # ----------------------------------------------------------------------------------------
    # Event handlers

    def _on_run_started(self, event: RunStarted) -> Decision:
        now = self._clock()
        self._stopped = None
        self._refresh()
        self._run.reset(now)
        if self._session.started_at is None:
            self._session.started_at = now
        for leaf in self._leaves:
            slot = self._slots[leaf]
            if leaf.scope == "run":
                slot.new_round()
                slot.state = leaf.new_state()
        self._run_id = event.run_id or self._new_id()
        self._prompt = event.prompt
        self._last_text = None
        return self._check(self._pre_run, self._post_run, event)

    def _on_turn_starting(self, event: TurnStarting) -> Decision:
        decision = self._pre(self._pre_turn, event)
        if decision is not None:
            return decision
        self._run.turns += 1
        self._session.turns += 1
        return self._post(self._post_turn, event)

    def _on_model_request(self, event: ModelRequest) -> Decision:
        decision = self._pre(self._pre_request, event)
        if decision is not None:
            return decision
        self._run.model_calls += 1
        self._session.model_calls += 1
        return self._post(self._post_request, event)

    def _on_model_response(self, event: ModelResponse) -> Decision:
        decision = self._pre(self._pre_response, event)
        if decision is not None:
            return decision
        cost = event.cost
        if cost is None:
            cost = self._price(
                event.model,
                event.input_tokens,
                event.output_tokens,
                event.cache_read_tokens,
                event.cache_write_tokens,
            )
        for tally in (self._run, self._session):
            tally.input_tokens += event.input_tokens
            tally.output_tokens += event.output_tokens
            tally.cache_read_tokens += event.cache_read_tokens
            tally.cache_write_tokens += event.cache_write_tokens
            tally.last_input_tokens = event.input_tokens
            if cost is None:
                tally.cost_known = False
            else:
                tally.cost += cost
        if event.text:
            self._last_text = event.text
        if cost is None and self._needs_prices:
            # Counted first, so nothing is lost; but the cost limit cannot be kept.
            raise UnpricedModelError(
                event.model or "(no model name)", self._pricing().describe_missing(event.model)
            )
        return self._post(self._post_response, event)

    def _on_tool_call(self, event: ToolCall) -> Decision:
        decision = self._pre(self._pre_tool, event)
        if decision is not None:
            return decision
        name = event.name
        run, session = self._run, self._session
        run.tool_calls += 1
        session.tool_calls += 1
        run.tool_calls_by_name[name] = run.tool_calls_by_name.get(name, 0) + 1
        session.tool_calls_by_name[name] = session.tool_calls_by_name.get(name, 0) + 1
        return self._post(self._post_tool, event)

    def _on_tool_result(self, event: ToolResult) -> Decision:
        return self._check(self._pre_result, self._post_result, event)

    def _on_turn_ended(self, event: TurnEnded) -> Decision:
        if event.text:
            self._last_text = event.text
        return self._check(self._pre_turn_end, self._post_turn_end, event)

    def _on_other(self, event: Event) -> Decision:
        pre, post = self._tables[type(event)]
        return self._check(pre, post, event)

    def _on_run_ended(self, event: RunEnded) -> Decision:
        output = event.output if event.output is not None else self._last_text
        run = self._run
        message = (
            f"The run completed in {_count(run.turns, 'turn')}, "
            f"{_count(run.model_calls, 'model call')} and {_count(run.tool_calls, 'tool call')}."
        )
        return self._stop(Status.COMPLETED, "completed", message, None, partial=output)

    # ----------------------------------------------------------------------------------------
    # Checking

    def _check(self, pre: tuple[_Check, ...], post: tuple[_Check, ...], event: Event) -> Decision:
        decision = self._pre(pre, event)
        return decision if decision is not None else self._post(post, event)

    def _pre(self, checks: tuple[_Check, ...], event: Event) -> Decision | None:
        if self._checked:
            return None
        bypass = self._bypass
        for limit, slot in checks:
            if limit is bypass:
                continue
            verdict = limit.pre(event, slot, self)
            if verdict is None:
                continue
            if type(verdict) is Warn:
                # A note before the event spends: the event is still admitted.
                self._early = verdict if self._early is None else _join(self._early, verdict)
                continue
            if type(verdict) is Block:
                self._early = None
                return verdict
            decision = self._trip(limit, slot, event, str(verdict), before=True)
            if decision is not None:
                self._early = None
                return decision
        return None

    def _post(self, checks: tuple[_Check, ...], event: Event) -> Decision:
        warn, self._early = self._early, None
        for limit, slot in checks:
            verdict = limit.post(event, slot, self)
            if verdict is None:
                pass
            elif type(verdict) is str:
                decision = self._trip(limit, slot, event, verdict, before=False)
                if decision is not None:
                    return decision
            elif type(verdict) is Warn:
                warn = verdict if warn is None else _join(warn, verdict)
            elif type(verdict) is Block:
                note = Warn(verdict.reason, verdict.limit)
                warn = note if warn is None else _join(warn, note)
            if slot is not None and limit.warn_at is not None and not slot.warned:
                text = limit.warning(slot, self)
                if text is not None:
                    slot.warned = True
                    note = Warn(text, repr(limit))
                    warn = note if warn is None else _join(warn, note)
        return CONTINUE if warn is None else warn

    def _trip(
        self, limit: Limit, slot: Slot | None, event: Event, message: str, *, before: bool
    ) -> Decision | None:
        if limit.shadow:
            if slot is not None and not slot.tripped:
                slot.tripped = True
                self.shadow_trips.append(ShadowTrip(self._run_id, repr(limit), message, event))
            return None
        policy = limit.policy.name
        if policy == "block" and type(event) is ToolCall:
            return Block(event, message, repr(limit))
        if policy == "ask":
            ask = Ask(
                question=limit.question(self),
                reason=limit.reason,
                limit=repr(limit),
                timeout=limit.policy.timeout,
                event=event,
                owner=self,
            )
            self._pending = (ask, limit, before)
            self._plain = False
            return ask
        if policy == "best_effort":
            return self._stop(Status.COMPLETED_WITH_WARNINGS, limit.reason, message, limit)
        stop = self._stop(
            limit.status_on_stop(),
            limit.reason,
            message,
            limit,
            synthesize=policy == "synthesize",
            provider_called=not before,
        )
        if limit.policy.synthesizer is not None:
            stop = self._stopped = replace(stop, synthesizer=limit.policy.synthesizer)
        return stop

    def _stop_after_ask(self, ask: Ask, limit: Limit, answer: Answer | None) -> Stop:
        where = ask.question.removesuffix(" Continue?")
        if answer is None:
            waited = f" within {ask.timeout:g}s" if ask.timeout is not None else ""
            message = f"{where} No answer came{waited}, so the run stops ({ask.limit})."
            return self._stop(limit.status_on_stop(), limit.reason, message, limit)
        message = f"{where} The human declined to continue ({ask.limit})."
        return self._stop(Status.ABANDONED, "declined", message, limit)

    def _cancelled(self) -> Stop:
        with self._cancel_lock:
            reason, self._cancel_reason = self._cancel_reason, None
        self._pending = None
        message = (
            "The run was cancelled."
            if reason in (None, "cancelled")
            else f"The run was cancelled: {reason}."
        )
        return self._stop(Status.CANCELLED, "cancelled", message, None)

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
    ) -> Stop:
        checkpoint = None
        if status is not Status.COMPLETED:
            checkpoint = self._ledger.save_checkpoint(
                self._run_id or self._new_id(), self.checkpoint()
            )
        suggestions = limit.suggestions() if limit is not None else ()
        if checkpoint is not None:
            suggestions = (*suggestions, f"Resume from checkpoint {checkpoint}")
        outcome = Outcome(
            status=status,
            reason=reason,
            message=message,
            usage=self.usage,
            run_id=self._run_id,
            partial_output=partial if partial is not None else self._last_text,
            suggestions=suggestions,
            checkpoint=checkpoint,
            limit=None if limit is None else repr(limit),
        )
        stop = Stop(outcome, synthesize=synthesize, provider_called=provider_called)
        self._stopped = stop
        self._plain = False
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
        decision = self._from_parent(self._parent.handle(event))
        if isinstance(decision, Stop | Ask | Block):
            return decision
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
            self._plain = False
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

    def _install(self, limits: Limit, *, keep_slots: bool = False) -> None:
        self._limits = limits
        self._leaves: tuple[Leaf, ...] = tuple(dict.fromkeys(limits.leaves()))
        slots = {}
        for leaf in self._leaves:
            tally = self._session if leaf.scope == "session" else self._run
            slot = self._slots.get(leaf) if keep_slots else None
            if slot is None:
                slot = Slot(tally)
                slot.state = leaf.new_state()
            slots[leaf] = slot
        self._slots = slots
        self._needs_prices = any(leaf.reason == "cost_limit" for leaf in self._leaves)
        table: dict[type, tuple[list[_Check], list[_Check]]] = {t: ([], []) for t in ALL_EVENTS}
        for member in limits.members():
            if isinstance(member, Leaf) and not member.enforced:
                continue
            slot = self._slots.get(member) if isinstance(member, Leaf) else None
            for event_type in member.pre_events:
                table[event_type][0].append((member, slot))
            after = set(member.post_events)
            if member.warn_at is not None:
                after.update(member.pre_events)
            for event_type in ALL_EVENTS:
                if event_type in after:
                    table[event_type][1].append((member, slot))
        frozen = {t: (tuple(pre), tuple(post)) for t, (pre, post) in table.items()}
        self._pre_run, self._post_run = frozen[RunStarted]
        self._pre_turn, self._post_turn = frozen[TurnStarting]
        self._pre_request, self._post_request = frozen[ModelRequest]
        self._pre_response, self._post_response = frozen[ModelResponse]
        self._pre_tool, self._post_tool = frozen[ToolCall]
        self._pre_result, self._post_result = frozen[ToolResult]
        self._pre_turn_end, self._post_turn_end = frozen[TurnEnded]
        self._tables = frozen

    def _pricing(self) -> Pricer:
        if self._pricer is None:
            from ..pricing import Prices

            self._pricer = Prices()
        return self._pricer

    def _price(
        self, model: str, input_tokens: int, output_tokens: int, cache_read: int, cache_write: int
    ) -> Decimal | None:
        if not model:
            return None
        return self._pricing().cost(
            model,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            cache_read_tokens=cache_read,
            cache_write_tokens=cache_write,
        )

    def __repr__(self) -> str:
        return f"Governor({self._limits!r})"


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"


def _join(first: Warn, second: Warn) -> Warn:
    return Warn(f"{first.message} {second.message}", f"{first.limit} | {second.limit}")


def _merge(first: Decision, second: Decision) -> Decision:
    """A parent's decision and then a child's own, for the same event."""
    if isinstance(second, Continue):
        return first
    if isinstance(first, Warn) and isinstance(second, Warn):
        return _join(first, second)
    return second


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


def _jsonable(value: int | float | Decimal) -> int | float | str:
    """Counts stay numbers; money becomes a string, so that it comes back as a Decimal."""
    return str(value) if isinstance(value, Decimal) else value


def _from_json(value: int | float | str) -> int | float | Decimal:
    return Decimal(value) if isinstance(value, str) else value
