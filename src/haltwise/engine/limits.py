"""Limits: small strategy objects built by lowercase factories and combined with ``|`` and ``&``.

``max_turns(25) | max_cost("2.00") | timeout(minutes=30)`` trips when any part trips;
``max_turns(10) & max_cost("1")`` only when both have. Nested combinations flatten, a plain
callable ``f(usage) -> bool`` is accepted wherever a limit is (anything else, None included, is
a ``ConfigurationError``), and every ``repr`` echoes what was written: evaluated with haltwise's
names, it builds an equal limit. A limit holds no counts: the governor keeps one ``Slot`` per
limit, so one limit object can govern many runs at once.

Each limit says which events it checks *before* they spend ("would exceed", with ``>=``) and
which *after* usage arrives ("exceeded", with ``>``); its messages carry the numbers and its
name. What happens when it trips is its ``policy`` (see ``policies.py``); ``scope`` says whether
it counts per run (one user prompt) or per session; ``warn_at`` gives the model a note first;
``shadow=True`` records trips without enforcing them.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterator
from decimal import Decimal, InvalidOperation
from typing import Any, Literal, Protocol

from .decisions import Block, Warn
from .errors import ConfigurationError, InvalidValueError, _shown
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
from .outcome import Status, Usage
from .policies import LONGEST_WAIT, Policy, as_policy
from .pricing import dollars, units
from .shared import NANO, Share, nano_ceil, nano_floor
from .state import Slot

__all__ = [
    "UNLIMITED",
    "Limit",
    "LimitStatus",
    "Scope",
    "Unlimited",
    "all_of",
    "any_of",
    "as_limit",
    "max_cost",
    "max_model_calls",
    "max_tokens",
    "max_tool_calls",
    "max_turns",
    "timeout",
]

Scope = Literal["run", "session"]
SCOPES: tuple[Scope, ...] = ("run", "session")
#: The policy of a limit that names none: stop the run.
_ABORT = as_policy("abort")
EventType = type[Event]
#: What a limit says about one event: nothing, a message that trips it, or a note or refusal.
Verdict = str | Warn | Block | None
ALL_EVENTS: tuple[EventType, ...] = (
    RunStarted,
    TurnStarting,
    ModelRequest,
    ModelResponse,
    ToolCall,
    ToolResult,
    TurnEnded,
    Injected,
    Progress,
    RunEnded,
)
#: Where a time limit is checked: before anything more is spent, and before a run may end
#: completed. (A run's clock starts at RunStarted, so only a session's can have run out then.)
_SPENDING = (TurnStarting, ModelRequest, ToolCall, RunEnded)


class Unlimited:
    """The value of a limit that never trips (its count still shows, as ``N/∞``)."""

    _instance: Unlimited | None = None

    def __new__(cls) -> Unlimited:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "unlimited"

    def __reduce__(self) -> str:
        return "UNLIMITED"


UNLIMITED = Unlimited()


class Context(Protocol):
    """What a limit may ask of the governor that runs it."""

    #: The governor's monotonic clock.
    now: Callable[[], float]

    def slot(self, leaf: Leaf) -> Slot: ...

    def request_cost(self, model: str, input_tokens: int, max_tokens: int) -> int: ...

    def usage_now(self) -> Usage: ...


class LimitStatus:
    """One limit's standing, for widgets and reports: ``used`` of ``cap`` (``None``: unlimited)."""

    __slots__ = ("cap", "limit", "reason", "scope", "used")

    def __init__(self, limit: str, reason: str, scope: Scope, used: Any, cap: Any | None) -> None:
        self.limit = limit
        self.reason = reason
        self.scope = scope
        self.used = used
        self.cap = cap

    def __repr__(self) -> str:
        cap = "∞" if self.cap is None else self.cap
        return f"<{self.limit}: {self.used}/{cap}>"


# --------------------------------------------------------------------------------------------
# The algebra


class Limit:
    """The base of every limit. Combine with ``|`` (any trips) and ``&`` (all have tripped)."""

    __slots__ = ()

    #: Events checked before they spend, and events checked after.
    pre_events: tuple[EventType, ...] = ()
    post_events: tuple[EventType, ...] = ()
    policy: Policy
    shadow: bool = False
    warn_at: float | None = None
    #: The outcome's reason code when this limit stops a run.
    reason: str = "limit"

    def __or__(self, other: Limit | Callable[[Usage], bool]) -> Limit:
        if not _combinable(other):
            raise _not_a_limit(other, f"{self!r} | {_shown(other)}")
        return any_of(self, other)

    def __ror__(self, other: Callable[[Usage], bool]) -> Limit:
        if not _combinable(other):
            raise _not_a_limit(other, f"{_shown(other)} | {self!r}")
        return any_of(other, self)

    def __and__(self, other: Limit | Callable[[Usage], bool]) -> Limit:
        if not _combinable(other):
            raise _not_a_limit(other, f"{self!r} & {_shown(other)}")
        return all_of(self, other)

    def __rand__(self, other: Callable[[Usage], bool]) -> Limit:
        if not _combinable(other):
            raise _not_a_limit(other, f"{_shown(other)} & {self!r}")
        return all_of(other, self)

    def leaves(self) -> Iterator[Leaf]:
        raise NotImplementedError

    def members(self) -> tuple[Limit, ...]:
        """The parts a governor checks independently: the flattened ``|`` of this limit."""
        return (self,)

    def pre(self, event: Any, slot: Slot | None, ctx: Context) -> Verdict:
        """Before ``event`` spends: a message if it would exceed this limit, else None.

        A limit that escalates by itself (a stuck detector) may instead return a ``Warn`` (the
        event goes ahead with a note for the model) or, for a ``ToolCall``, a ``Block``.
        A message (``str``) trips the limit, and its policy decides what happens.
        """
        return None

    def post(self, event: Any, slot: Slot | None, ctx: Context) -> Verdict:
        """After ``event``'s usage is counted: a message if this limit is exceeded, else None
        (or a ``Warn``, as for ``pre``)."""
        return None

    def over(self, ctx: Context) -> bool:
        """Whether this limit has been reached, whatever the event (for ``&``)."""
        raise NotImplementedError

    def warning(self, slot: Slot, ctx: Context) -> str | None:
        """The note for the model once the soft threshold is crossed, else None."""
        return None

    def question(self, ctx: Context) -> str:
        """What a human is asked when this limit trips under the ``ask`` policy."""
        return f"{self!r} was reached. Continue?"

    def status_on_stop(self) -> Status:
        return Status.ABANDONED

    def suggestions(self) -> tuple[str, ...]:
        return ()

    def new_round(self, ctx: Context) -> None:
        """Start a new round of every leaf (the human chose "continue")."""
        for leaf in self.leaves():
            leaf.restart(ctx.slot(leaf), ctx)

    def extend(self, amount: int | float, ctx: Context) -> None:
        for leaf in self.leaves():
            slot = ctx.slot(leaf)
            slot.extra += leaf.amount(amount)
            slot.warned = False


class _Group(Limit):
    __slots__ = ("_members", "policy")
    _operator = ""

    def __init__(self, members: tuple[Limit, ...], policy: Policy) -> None:
        self._members = members
        self.policy = policy

    @property
    def pre_events(self) -> tuple[EventType, ...]:  # type: ignore[override]
        return _union(m.pre_events for m in self._members)

    @property
    def post_events(self) -> tuple[EventType, ...]:  # type: ignore[override]
        return _union(m.post_events for m in self._members)

    @property
    def reason(self) -> str:  # type: ignore[override]
        return self._members[0].reason if self._members else "limit"

    def leaves(self) -> Iterator[Leaf]:
        for member in self._members:
            yield from member.leaves()

    def __eq__(self, other: object) -> bool:
        # A group one call made (``stuck()``) equals the ``|`` of the same members.
        return (
            isinstance(other, _Group)
            and other._operator == self._operator
            and other._members == self._members
            and other.policy == self.policy
        )

    def __hash__(self) -> int:
        return hash((self._operator, self._members))

    def _member_result(self, member: Limit, event: Any, ctx: Context, before: bool) -> str | None:
        """A member's message for this event, or its standing when it does not check it."""
        slot = ctx.slot(member) if isinstance(member, Leaf) else None
        events = member.pre_events if before else member.post_events
        if type(event) in events:
            verdict = member.pre(event, slot, ctx) if before else member.post(event, slot, ctx)
            # Inside a group only a trip counts; a member's own notes are not the group's.
            return verdict if isinstance(verdict, str) else None
        return repr(member) + " reached" if member.over(ctx) else None


class _AnyOf(_Group):
    """Trips when any member trips."""

    __slots__ = ()
    _operator = "|"

    def __repr__(self) -> str:
        parts = self._parts()
        return " | ".join(parts) if parts else "any_of()"

    def _parts(self) -> list[str]:
        """How each member is written. Leaves one call made (``stuck()``, ``max_tokens(input=5,
        output=6)``) show as that call, once, when every one of them is here."""
        parts = []
        shown: list[Limit] = []
        for member in self._members:
            composite = getattr(member, "composite", None)
            if composite is None or not _holds_all(self._members, composite):
                parts.append(repr(member))
            elif not any(composite is other for other in shown):
                shown.append(composite)
                parts.append(repr(composite))
        return parts

    def members(self) -> tuple[Limit, ...]:
        return self._members

    def pre(self, event: Any, slot: Slot | None, ctx: Context) -> str | None:
        for member in self._members:
            message = self._member_result(member, event, ctx, before=True)
            if message is not None:
                return message
        return None

    def post(self, event: Any, slot: Slot | None, ctx: Context) -> str | None:
        for member in self._members:
            message = self._member_result(member, event, ctx, before=False)
            if message is not None:
                return message
        return None

    def over(self, ctx: Context) -> bool:
        return any(member.over(ctx) for member in self._members)


class _AllOf(_Group):
    """Trips only when every member has tripped."""

    __slots__ = ()
    _operator = "&"

    def __repr__(self) -> str:
        if self._members and self.policy == _ABORT:
            # ``&`` binds tighter than ``|``: an ``a | b`` inside needs its parentheses.
            return " & ".join(
                f"({member!r})"
                if isinstance(member, _AnyOf) and len(member._parts()) > 1
                else repr(member)
                for member in self._members
            )
        args = [repr(member) for member in self._members]
        if self.policy != _ABORT:
            args.append(f"on_limit={_written_policy(self.policy)}")
        return f"all_of({', '.join(args)})"

    def pre(self, event: Any, slot: Slot | None, ctx: Context) -> str | None:
        return self._all(event, ctx, before=True)

    def post(self, event: Any, slot: Slot | None, ctx: Context) -> str | None:
        return self._all(event, ctx, before=False)

    def _all(self, event: Any, ctx: Context, before: bool) -> str | None:
        messages = []
        for member in self._members:
            message = self._member_result(member, event, ctx, before)
            if message is None:
                return None
            messages.append(message)
        return "; and ".join(messages)

    def over(self, ctx: Context) -> bool:
        return all(member.over(ctx) for member in self._members)


def _union(groups: Iterator[tuple[EventType, ...]]) -> tuple[EventType, ...]:
    seen: dict[EventType, None] = {}
    for group in groups:
        seen.update(dict.fromkeys(group))
    return tuple(seen)


def _holds_all(members: tuple[Limit, ...], composite: Limit) -> bool:
    """Whether every leaf of ``composite`` is one of ``members``."""
    return all(any(leaf is member for member in members) for leaf in composite.leaves())


def _combinable(value: object) -> bool:
    """Whether ``value`` can be part of a combination: a limit, or a callable ``f(usage)``."""
    return isinstance(value, Limit) or callable(value)


def _not_a_limit(value: object, written: str) -> ConfigurationError:
    """The error for ``value``, which is not a limit, found in the combination ``written``."""
    return ConfigurationError(
        f"{written}: {_shown(value)} is not a limit, so it cannot be combined with one. Combine "
        "limits such as max_cost('2.00') or callables f(usage) -> bool; to go without a limit, "
        "leave it out of the expression (max_turns(unlimited) counts but never trips)"
    )


def _refuse_non_limits(factory: str, limits: tuple[object, ...]) -> None:
    """Raise unless every one of ``limits``, given to ``factory``, can be combined."""
    for value in limits:
        if not _combinable(value):
            written = ", ".join(_shown(limit) for limit in limits)
            raise _not_a_limit(value, f"{factory}({written})")


def as_limit(value: Limit | Callable[[Usage], bool] | None) -> Limit:
    """A limit from a limit, a callable ``f(usage) -> bool``, or None (no limit at all: a
    governor's ``limits``, never a part of a combination, where None is an error)."""
    if value is None:
        return _AnyOf((), _ABORT)
    if isinstance(value, Limit):
        return value
    if callable(value):
        return _Check(value)
    raise InvalidValueError(
        "limits", value, "a limit such as max_turns(25), a callable f(usage) -> bool, or None"
    )


def any_of(*limits: Limit | Callable[[Usage], bool]) -> Limit:
    """Trips when any of ``limits`` trips (the same as ``a | b | ...``)."""
    _refuse_non_limits("any_of", limits)
    members: list[Limit] = []
    for limit in map(as_limit, limits):
        for member in limit.members() if isinstance(limit, _AnyOf) else (limit,):
            if member not in members:
                members.append(member)
    if len(members) == 1:
        return members[0]
    return _AnyOf(tuple(members), _ABORT)


def all_of(*limits: Limit | Callable[[Usage], bool], on_limit: str | Policy = "abort") -> Limit:
    """Trips when all of ``limits`` have tripped (``a & b & ...`` with the default policy)."""
    _refuse_non_limits("all_of", limits)
    policy = as_policy(on_limit, "all_of(on_limit)")
    members: list[Limit] = []
    for limit in map(as_limit, limits):
        nested = isinstance(limit, _AllOf) and limit.policy == policy
        members.extend(limit._members if nested else (limit,))  # type: ignore[attr-defined]
    if len(members) == 1 and policy == _ABORT:
        return members[0]
    return _AllOf(tuple(members), policy)


# --------------------------------------------------------------------------------------------
# Leaves


class Leaf(Limit):
    """One limit with its own slot of state in each governor."""

    __slots__ = ("_args", "policy", "scope", "shadow", "share", "warn_at")

    #: What the numbers count, for messages: "turns", "tool calls", ...
    unit = ""

    def __init__(
        self,
        args: str,
        *,
        scope: Scope,
        warn_at: float | None,
        on_limit: str | Policy,
        shadow: bool,
        name: str,
        share: Share | None = None,
    ) -> None:
        self._args = args
        self.scope = _check_scope(scope, name)
        self.warn_at = _check_warn_at(warn_at, name)
        self.policy = as_policy(on_limit, f"{name}(on_limit)")
        self.shadow = bool(shadow)
        if share is not None and self.shadow:
            raise InvalidValueError(
                f"{name}(shadow)",
                shadow,
                "False with key=: a shared budget is spent for real (drop key= to try the limit "
                "in shadow mode on this governor alone)",
            )
        #: For a shared limit (``key=``): the ledger budget it spends, with every governor
        #: that names the same key. None for a limit counted in this governor alone.
        self.share = share

    #: The factory that builds this limit, for its ``repr``.
    factory = ""

    def __repr__(self) -> str:
        return f"{self.factory}({self._args})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Leaf) and type(other) is type(self) and repr(other) == repr(self)

    def __hash__(self) -> int:
        return hash((type(self), self._args))

    def leaves(self) -> Iterator[Leaf]:
        yield self

    def key(self) -> tuple[Any, ...]:
        """Limits with the same key replace each other in ``Governor.set_limit``."""
        return (type(self), self.scope, None if self.share is None else self.share.key)

    # A shared limit (``key=``) is checked by the ledger, not against this governor's counts:
    # the governor asks the leaf what to charge or reserve, in the ledger's units.

    #: Whether a shared limit of this kind holds a model request's worst case until its answer
    #: arrives (tokens, dollars), rather than charging a count at once (turns, calls).
    reserves = False

    def ledger_metric(self, event: Any) -> str | None:
        """What this limit counts in the ledger for ``event``; None: not this event."""
        return None

    def ledger_amount(self, event: Any, slot: Slot, ctx: Context) -> tuple[int, int | None]:
        """What ``event`` needs of the budget, and the least that will do (None: all of it)."""
        return 1, None

    def ledger_units(self, value: Any) -> int:
        """An amount of this limit's (its cap with what was added), in the ledger's units,
        rounded down."""
        return int(value)

    def from_ledger(self, amount: int) -> Any:
        """An amount in the ledger's units in this limit's own."""
        return amount

    def ledger_actual(self, event: ModelResponse, cost: int | None) -> int:
        """What an answered request really spent of the budget (``cost`` in engine units)."""
        return 0

    def ledger_show(self, amount: int) -> str:
        return f"{amount} {self.unit}"

    def _shared_where(self, window: str) -> str:
        assert self.share is not None
        where = f"Shared budget {self.share.key!r}"
        return where if window == "forever" else f"{where} ({window})"

    def ledger_exceeded(self, used: int, limit: int, window: str) -> str:
        """The message of a shared limit that an answered request took past its limit."""
        return (
            f"{self._shared_where(window)} exceeded: {self.ledger_show(used)} of "
            f"{self.ledger_show(limit)} used ({self!r})"
        )

    def ledger_refusal(self, grant_used: int, amount: int, limit: int, window: str) -> str:
        """The message of a shared limit that the ledger refused."""
        where = self._shared_where(window)
        if grant_used >= limit:
            return (
                f"{where} spent: {self.ledger_show(grant_used)} of {self.ledger_show(limit)} "
                f"used ({self!r})"
            )
        return (
            f"{where} would be exceeded: {self.ledger_show(grant_used)} of "
            f"{self.ledger_show(limit)} used, and this needs {self.ledger_show(amount)} "
            f"({self!r})"
        )

    @property
    def enforced(self) -> bool:
        """False for an unlimited limit, which only counts."""
        return True

    def new_state(self) -> Any:
        return None

    def restart(self, slot: Slot, ctx: Context) -> None:
        """Begin a new round: the count restarts from the current value (for a shared limit,
        what the ledger last said its budget has used)."""
        if self.share is not None:
            slot.new_round(self.from_ledger(slot.state or 0))
        else:
            slot.new_round(self.metric(slot, ctx))

    def metric(self, slot: Slot, ctx: Context) -> Any:
        """The raw value this limit counts (before the round's baseline is taken off)."""
        raise NotImplementedError

    def amount(self, value: int | float) -> Any:
        """An "extend by" amount in this limit's units."""
        return value

    def dump(self, value: Any) -> Any:
        """A baseline or extra amount of this limit's as JSON-compatible data (checkpoints)."""
        return value

    def load(self, value: Any) -> Any:
        """The inverse of ``dump``: a number (ValueError for anything else)."""
        if isinstance(value, int) and type(value) is not bool:
            return value
        if isinstance(value, float) and math.isfinite(value):
            return value
        raise ValueError(f"{value!r} is not an amount of {self!r}")

    #: Whether ``allowance`` can lower a request's ``max_tokens`` (token limits).
    allows = False

    def allowance(self, event: ModelRequest, slot: Slot) -> int | None:
        """The most output tokens ``event`` may ask for without passing this limit (None: any)."""
        return None

    def deadline(self, slot: Slot) -> float | None:
        """When (on the governor's clock) this limit trips by itself; None for all but time."""
        return None

    def passed(self, slot: Slot, ctx: Context, what: str) -> str | None:
        """For a time limit: a message if it passed while ``what`` was running, else None."""
        return None

    def cap(self) -> Any | None:
        """The limit's value, or None when unlimited."""
        raise NotImplementedError

    def standing(self, slot: Slot, ctx: Context) -> LimitStatus:
        cap = self.cap()
        used = self.metric(slot, ctx) - slot.baseline
        return LimitStatus(
            repr(self), self.reason, self.scope, used, None if cap is None else cap + slot.extra
        )

    def over(self, ctx: Context) -> bool:
        slot = ctx.slot(self)
        cap = self.cap()
        return cap is not None and self.metric(slot, ctx) - slot.baseline >= cap + slot.extra


class _CountLimit(Leaf):
    """A limit on a whole-number count, checked before the counted thing happens."""

    __slots__ = ("maximum",)

    def __init__(self, maximum: int | Unlimited | str | None, args: str, name: str, **kw: Any):
        self.maximum = _check_count(maximum, name)
        super().__init__(args, name=name, **kw)

    @property
    def enforced(self) -> bool:
        return self.maximum is not None

    def cap(self) -> int | None:
        return self.maximum

    def pre(self, event: Any, slot: Slot | None, ctx: Context) -> str | None:
        assert slot is not None
        maximum = self.maximum
        if maximum is None:
            return None
        used = self.metric(slot, ctx) - slot.baseline
        if used >= maximum + slot.extra:
            return self._would_exceed(used, maximum + slot.extra)
        return None

    def _would_exceed(self, used: int, cap: int) -> str:
        return (
            f"{self.unit.capitalize()} limit reached: {used} of {cap} {self.unit} used ({self!r})"
        )

    def warning(self, slot: Slot, ctx: Context) -> str | None:
        if self.maximum is None or self.warn_at is None:
            return None
        cap = self.maximum + slot.extra
        used = self.metric(slot, ctx) - slot.baseline
        if used < math.ceil(self.warn_at * cap):
            return None
        return self._note(used, cap)

    def _note(self, used: int, cap: int) -> str:
        """The soft threshold's note for the model."""
        return f"{used} of {cap} {self.unit} used: {cap - used} left; start wrapping up."


class _MaxTurns(_CountLimit):
    __slots__ = ()
    factory = "max_turns"
    pre_events = (TurnStarting,)
    reason = "turn_limit"
    unit = "turns"

    def metric(self, slot: Slot, ctx: Context) -> int:
        return slot.tally.turns

    def ledger_metric(self, event: Any) -> str | None:
        return "turns"

    def pre(self, event: Any, slot: Slot | None, ctx: Context) -> str | None:
        # The hot path of every turn: kept flat.
        assert slot is not None
        maximum = self.maximum
        if maximum is not None and slot.tally.turns - slot.baseline >= maximum + slot.extra:
            return self._would_exceed(slot.tally.turns - slot.baseline, maximum + slot.extra)
        return None

    def _would_exceed(self, used: int, cap: int) -> str:
        return f"Turn limit reached: {used} of {cap} turns used this round ({self!r})"

    def question(self, ctx: Context) -> str:
        slot = ctx.slot(self)
        used = slot.tally.turns - slot.baseline
        return f"You've used {used} {'turn' if used == 1 else 'turns'}. Continue?"

    def _note(self, used: int, cap: int) -> str:
        left = cap - used
        turns = "turn" if left == 1 else "turns"
        return f"Turn {used} of {cap}: {left} {turns} left; wrap up soon."

    def suggestions(self) -> tuple[str, ...]:
        return (
            "Raise the turn limit (HALTWISE_MAX_TURNS, or /turn-limit N in a chat) "
            "if the task needs more turns",
            "Split the task into smaller prompts",
        )


class _MaxModelCalls(_CountLimit):
    __slots__ = ()
    factory = "max_model_calls"
    pre_events = (ModelRequest,)
    reason = "model_call_limit"
    unit = "model calls"

    def metric(self, slot: Slot, ctx: Context) -> int:
        return slot.tally.model_calls

    def ledger_metric(self, event: Any) -> str | None:
        return "model_calls"

    def suggestions(self) -> tuple[str, ...]:
        return ("Raise the model-call limit (HALTWISE_MAX_MODEL_CALLS)", "Simplify the task")


class _MaxToolCalls(_CountLimit):
    __slots__ = ("tool",)
    factory = "max_tool_calls"
    pre_events = (ToolCall,)
    reason = "tool_call_limit"

    def __init__(self, maximum: Any, args: str, tool: str | None, **kw: Any) -> None:
        if tool is not None and (not isinstance(tool, str) or not tool):
            raise InvalidValueError("max_tool_calls(tool)", tool, "a tool's name, or None")
        self.tool = tool
        super().__init__(maximum, args, **kw)

    @property
    def unit(self) -> str:  # type: ignore[override]
        return "tool calls" if self.tool is None else f"{self.tool} calls"

    def key(self) -> tuple[Any, ...]:
        return (type(self), self.scope, self.tool)

    def metric(self, slot: Slot, ctx: Context) -> int:
        if self.tool is None:
            return slot.tally.tool_calls
        return slot.tally.tool_calls_by_name.get(self.tool, 0)

    def ledger_metric(self, event: Any) -> str | None:
        if self.tool is None:
            return "tool_calls"
        return f"tool_calls:{self.tool}" if event.name == self.tool else None

    def pre(self, event: Any, slot: Slot | None, ctx: Context) -> str | None:
        assert slot is not None
        maximum = self.maximum
        if maximum is None:
            return None
        tool = self.tool
        if tool is None:
            used = slot.tally.tool_calls - slot.baseline
        elif event.name != tool:
            return None
        else:
            used = slot.tally.tool_calls_by_name.get(tool, 0) - slot.baseline
        if used >= maximum + slot.extra:
            return self._would_exceed(used, maximum + slot.extra)
        return None

    def _would_exceed(self, used: int, cap: int) -> str:
        what = "Tool-call budget" if self.tool is None else f"Budget for {self.tool}"
        return f"{what} spent: {used} of {cap} {self.unit} used ({self!r})"

    def suggestions(self) -> tuple[str, ...]:
        return ("Raise the tool-call budget (HALTWISE_MAX_TOOL_CALLS)", "Narrow the task")


_TOKEN_KINDS = ("input", "output", "total")


class _MaxTokens(_CountLimit):
    """Tokens, counted when usage arrives; before a request, its worst case.

    Before a request, what is left is the cap less the tokens used and those the requests in
    flight reserved (and, for ``total``, less the request's prompt: the size the driver gave,
    else the last response's). Nothing left trips the limit ("would exceed"). Otherwise the
    request may write at most what is left: the decision's ``max_tokens`` says so when the
    request asked for more (or set none), and the driver sends it lowered. A driver that cannot
    lower it (``ModelRequest(adjustable=False)``) has a request whose ``max_tokens`` is larger
    refused before it is sent; one with no ``max_tokens`` at all is then only checked after.
    """

    __slots__ = ("composite", "kind")
    factory = "max_tokens"
    pre_events = (ModelRequest,)
    post_events = (ModelResponse,)
    reason = "token_limit"

    def __init__(self, maximum: Any, args: str, kind: str, **kw: Any) -> None:
        self.kind = kind
        #: The ``max_tokens`` call that made this limit with others, shown in their place.
        self.composite: _MaxTokensCall | None = None
        super().__init__(maximum, args, **kw)

    @property
    def allows(self) -> bool:  # type: ignore[override]
        return self.kind != "input"

    @property
    def unit(self) -> str:  # type: ignore[override]
        return f"{self.kind} tokens"

    def key(self) -> tuple[Any, ...]:
        return (type(self), self.scope, self.kind)

    def metric(self, slot: Slot, ctx: Context) -> int:
        tally = slot.tally
        if self.kind == "input":
            return tally.input_tokens
        if self.kind == "output":
            return tally.output_tokens
        return tally.input_tokens + tally.output_tokens

    reserves = True

    def ledger_metric(self, event: Any) -> str | None:
        return f"{self.kind}_tokens"

    def ledger_amount(self, event: Any, slot: Slot, ctx: Context) -> tuple[int, int | None]:
        # A request with no max_tokens holds one token: its answer is checked when it comes.
        prompt = event.input_tokens
        if prompt is None:
            prompt = slot.tally.last_input_tokens
        if self.kind == "input":
            return prompt, None
        wanted = event.max_tokens
        lowerable = wanted is not None and event.adjustable
        if self.kind == "output":
            return (wanted or 1), (1 if lowerable else None)
        return prompt + (wanted or 1), (prompt + 1 if lowerable else None)

    def ledger_actual(self, event: ModelResponse, cost: int | None) -> int:
        if self.kind == "input":
            return event.input_tokens
        if self.kind == "output":
            return event.output_tokens
        return event.input_tokens + event.output_tokens

    def _held(self, slot: Slot) -> int:
        """Tokens used this round, with what the requests in flight reserved."""
        tally = slot.tally
        in_flight = tally.in_flight
        if self.kind == "input":
            held = tally.input_tokens + in_flight.input_tokens
        elif self.kind == "output":
            held = tally.output_tokens + in_flight.output_tokens
        else:
            held = (
                tally.input_tokens
                + tally.output_tokens
                + in_flight.input_tokens
                + in_flight.output_tokens
            )
        baseline: int = slot.baseline
        return held - baseline

    def _room(self, event: ModelRequest, slot: Slot, held: int, cap: int) -> int:
        """How many tokens the request may write (``output``, ``total``)."""
        if self.kind == "output":
            return cap - held
        prompt = event.input_tokens
        return cap - held - (slot.tally.last_input_tokens if prompt is None else prompt)

    def pre(self, event: Any, slot: Slot | None, ctx: Context) -> str | None:
        assert slot is not None
        if self.maximum is None:
            return None
        held = self._held(slot)
        cap = self.maximum + slot.extra
        if held >= cap:
            return self._would_exceed(held, cap)
        if self.kind == "input":
            prompt = event.input_tokens
            if prompt is not None and held + prompt > cap:
                return (
                    f"Token limit would be exceeded: input_tokens={held} of {cap}, and this "
                    f"request's prompt has {prompt} ({self!r})"
                )
            return None
        room = self._room(event, slot, held, cap)
        wanted = event.max_tokens
        # Kept for ``allowance``, which the governor asks next about the same request: the
        # request itself when it fits as asked, else the room it may have.
        slot.state = event if wanted is not None and wanted <= room else (event, room)
        if room <= 0:
            return (
                f"Token limit would be exceeded: total_tokens={held} of {cap}, and this "
                f"request's prompt leaves no room for an answer ({self!r})"
            )
        if not event.adjustable and wanted is not None and wanted > room:
            return (
                f"Token limit would be exceeded: {self.kind}_tokens={held} of {cap}, and this "
                f"request may write {wanted} more (max_tokens={wanted}, which its driver "
                f"cannot lower to {room}) ({self!r})"
            )
        return None

    def allowance(self, event: ModelRequest, slot: Slot) -> int | None:
        if self.maximum is None or self.kind == "input":
            return None
        checked = slot.state
        if checked is event:
            slot.state = None
            return None  # it fits as asked
        if checked is not None and checked[0] is event:
            room: int = checked[1]
        else:  # not checked before (a child's count, a human's "continue")
            room = self._room(event, slot, self._held(slot), self.maximum + slot.extra)
        slot.state = None
        return max(room, 1)

    def _would_exceed(self, used: int, cap: int) -> str:
        return (
            f"Token limit would be exceeded: {self.kind}_tokens={used} has reached the "
            f"limit of {cap} ({self!r})"
        )

    def post(self, event: Any, slot: Slot | None, ctx: Context) -> str | None:
        assert slot is not None
        if self.maximum is None:
            return None
        used = self.metric(slot, ctx) - slot.baseline
        cap = self.maximum + slot.extra
        if used > cap:
            name = f"{self.kind}_tokens"
            return f"Exceeded the {self.kind} token limit of {cap}: {name}={used} ({self!r})"
        return None

    def suggestions(self) -> tuple[str, ...]:
        return ("Raise the token limit (HALTWISE_MAX_TOKENS)", "Shorten the context or the task")


class _MaxTokensCall(_AnyOf):
    """The limits of one ``max_tokens`` call given more than one of total, ``input=`` and
    ``output=``: a limit for each, shown as the call."""

    __slots__ = ("_args",)

    def __init__(self, limits: tuple[_MaxTokens, ...], args: str) -> None:
        super().__init__(limits, _ABORT)
        self._args = args
        for limit in limits:
            limit.composite = self

    def __repr__(self) -> str:
        return f"max_tokens({self._args})"


class _MaxCost(Leaf):
    """Dollars, counted in engine units (10^-18 USD, ints) so that each check is int arithmetic;
    shown in dollars."""

    __slots__ = ("maximum", "units")
    factory = "max_cost"
    pre_events = (ModelRequest,)
    post_events = (ModelResponse,)
    reason = "cost_limit"
    unit = "dollars"

    def __init__(self, maximum: Decimal, args: str, **kw: Any) -> None:
        self.maximum = maximum
        self.units = units(maximum)
        super().__init__(args, name="max_cost", **kw)

    def cap(self) -> int:
        return self.units

    def metric(self, slot: Slot, ctx: Context) -> int:
        return slot.tally.cost

    def amount(self, value: int | float) -> int:
        return units(Decimal(str(value)))

    reserves = True

    def ledger_metric(self, event: Any) -> str | None:
        return "nano_usd"

    def ledger_amount(self, event: Any, slot: Slot, ctx: Context) -> tuple[int, int | None]:
        # A request with no max_tokens holds a nano-dollar: its answer is checked when it comes.
        if event.max_tokens is None or not event.model:
            return 1, None
        prompt = event.input_tokens
        if prompt is None:
            prompt = slot.tally.last_input_tokens
        return max(1, nano_ceil(ctx.request_cost(event.model, prompt, event.max_tokens))), None

    def ledger_units(self, value: Any) -> int:
        return nano_floor(int(value))

    def from_ledger(self, amount: int) -> int:
        return amount * NANO

    def ledger_actual(self, event: ModelResponse, cost: int | None) -> int:
        return 0 if cost is None else nano_ceil(cost)

    def ledger_show(self, amount: int) -> str:
        return f"${_money(amount * NANO)}"

    def dump(self, value: int) -> str:
        return str(dollars(value))

    def load(self, value: Any) -> int:
        return units(Decimal(value))

    def _shown(self, slot: Slot) -> Decimal:
        """This round's cap in dollars, as the user wrote it (plus what was added)."""
        return self.maximum + dollars(slot.extra) if slot.extra else self.maximum

    def standing(self, slot: Slot, ctx: Context) -> LimitStatus:
        used = dollars(slot.tally.cost - slot.baseline)
        return LimitStatus(repr(self), self.reason, self.scope, used, self._shown(slot))

    def pre(self, event: Any, slot: Slot | None, ctx: Context) -> str | None:
        assert slot is not None
        tally = slot.tally
        reserved = tally.in_flight.cost
        # Requests in flight hold their worst case until their answers arrive.
        spent = tally.cost - slot.baseline + reserved
        cap = self.units + slot.extra
        if spent >= cap:
            held = " (with requests in flight)" if reserved else ""
            shown = self._shown(slot)
            return f"Cost limit of ${shown} reached: ${_money(spent)} spent{held} ({self!r})"
        if event.max_tokens is None:
            return None
        prompt = event.input_tokens
        if prompt is None:
            prompt = tally.last_input_tokens
        worst = ctx.request_cost(event.model, prompt, event.max_tokens)
        if spent + worst > cap:
            return (
                f"Cost limit of ${self._shown(slot)} would be exceeded: ${_money(spent)} spent, "
                f"and this request could cost up to ${_money(worst)} ({event.model}, {prompt} "
                f"input tokens, max_tokens={event.max_tokens}) ({self!r})"
            )
        return None

    def post(self, event: Any, slot: Slot | None, ctx: Context) -> str | None:
        assert slot is not None
        spent = slot.tally.cost - slot.baseline
        cap = self.units + slot.extra
        if spent > cap:
            shown = self._shown(slot)
            return f"Exceeded the cost limit of ${shown}: ${_money(spent)} spent ({self!r})"
        return None

    def warning(self, slot: Slot, ctx: Context) -> str | None:
        if self.warn_at is None:
            return None
        spent = slot.tally.cost - slot.baseline
        cap = self.units + slot.extra
        if spent < cap * Decimal(str(self.warn_at)):
            return None
        left = _money(cap - spent)
        return f"${_money(spent)} of ${self._shown(slot)} spent: ${left} left; wrap up soon."

    def question(self, ctx: Context) -> str:
        slot = ctx.slot(self)
        return f"You've spent ${_money(slot.tally.cost - slot.baseline)}. Continue?"

    def suggestions(self) -> tuple[str, ...]:
        return ("Raise the cost limit (HALTWISE_MAX_COST)", "Use a cheaper model")


class _Timeout(Leaf):
    __slots__ = ("seconds",)
    factory = "timeout"
    reason = "time_limit"
    unit = "seconds"

    def __init__(self, seconds: float, args: str, **kw: Any) -> None:
        self.seconds = seconds
        super().__init__(args, name="timeout", **kw)

    #: A call that returns after the deadline is counted, and then the limit trips: the run
    #: ends timed out, never completed.
    post_events = (ModelResponse, ToolResult)

    @property
    def pre_events(self) -> tuple[EventType, ...]:  # type: ignore[override]
        return (RunStarted, *_SPENDING) if self.scope == "session" else _SPENDING

    def deadline(self, slot: Slot) -> float | None:
        """The clock time at which this limit trips, once its clock has started."""
        started = slot.tally.started_at
        if started is None:
            return None
        return float(started + slot.baseline + self.seconds + slot.extra)

    def cap(self) -> float:
        return self.seconds

    def metric(self, slot: Slot, ctx: Context) -> float:
        return slot.tally.elapsed(ctx.now())

    def pre(self, event: Any, slot: Slot | None, ctx: Context) -> str | None:
        assert slot is not None
        started = slot.tally.started_at
        if started is None:
            return None
        elapsed = ctx.now() - started - slot.baseline
        cap = self.seconds + slot.extra
        if elapsed >= cap:  # the slow path: only when the limit trips
            return (
                f"Time limit of {_duration(cap)} reached: {_duration(elapsed)} elapsed ({self!r})"
            )
        return None

    def post(self, event: Any, slot: Slot | None, ctx: Context) -> str | None:
        assert slot is not None
        started = slot.tally.started_at
        # The hot path of every call's return: one clock reading, unless the limit has passed.
        if started is None or ctx.now() - started - slot.baseline < self.seconds + slot.extra:
            return None
        if type(event) is ModelResponse:
            return self.passed(slot, ctx, "a model call")
        if type(event) is ToolResult:
            return self.passed(slot, ctx, f"the tool {event.name}")
        return None  # a soft threshold's check after an event that spends

    def passed(self, slot: Slot, ctx: Context, what: str) -> str | None:
        started = slot.tally.started_at
        if started is None:
            return None
        elapsed = ctx.now() - started - slot.baseline
        cap = self.seconds + slot.extra
        if elapsed >= cap:
            return (
                f"Time limit of {_duration(cap)} passed while {what} was running: "
                f"{_duration(elapsed)} elapsed ({self!r})"
            )
        return None

    def warning(self, slot: Slot, ctx: Context) -> str | None:
        if self.warn_at is None:
            return None
        elapsed = self.metric(slot, ctx) - slot.baseline
        cap = self.seconds + slot.extra
        if elapsed < self.warn_at * cap:
            return None
        left = _duration(cap - elapsed)
        return f"{_duration(elapsed)} of {_duration(cap)} used: {left} left; wrap up soon."

    def status_on_stop(self) -> Status:
        return Status.TIMED_OUT

    def question(self, ctx: Context) -> str:
        return f"This run has taken {_duration(self.metric(ctx.slot(self), ctx))}. Continue?"

    def suggestions(self) -> tuple[str, ...]:
        return ("Raise the time limit (HALTWISE_TIMEOUT)", "Split the task into smaller prompts")


class _Check(Leaf):
    """A plain callable ``f(usage) -> bool`` used as a limit, checked after every event."""

    __slots__ = ("function",)
    post_events = ALL_EVENTS
    reason = "custom"

    def __init__(self, function: Callable[[Usage], bool]) -> None:
        self.function = function
        name = getattr(function, "__qualname__", repr(function))
        super().__init__(
            name, scope="run", warn_at=None, on_limit="abort", shadow=False, name="check"
        )

    def __repr__(self) -> str:
        return self._args

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Check) and other.function is self.function

    def __hash__(self) -> int:
        return hash(self.function)

    def key(self) -> tuple[Any, ...]:
        return (type(self), self.function)

    def cap(self) -> None:
        return None

    def metric(self, slot: Slot, ctx: Context) -> int:
        return 0

    def post(self, event: Any, slot: Slot | None, ctx: Context) -> str | None:
        if self.function(ctx.usage_now()):
            return f"{self._args} tripped"
        return None

    def over(self, ctx: Context) -> bool:
        return bool(self.function(ctx.usage_now()))


# --------------------------------------------------------------------------------------------
# Factories


def _share(key: str | None, per: str | None, tz: str | None, name: str) -> Share | None:
    if key is None:
        if per is not None or tz is not None:
            raise InvalidValueError(
                f"{name}(per)" if per is not None else f"{name}(tz)",
                per if per is not None else tz,
                "per= and tz= only with key=, the shared budget they window "
                f"(e.g. {name}(..., key='team-a', per='day'))",
            )
        return None
    return Share(key, per, tz, name)


def _options(
    name: str,
    scope: Scope,
    warn_at: float | None,
    on_limit: str | Policy,
    shadow: bool,
    default: str = "abort",
    share: Share | None = None,
) -> str:
    """The non-default keyword arguments, as the user would have written them."""
    policy = as_policy(on_limit, f"{name}(on_limit)")
    parts = [] if share is None else [share.args().removeprefix(", ")]
    if scope != "run":
        parts.append(f"scope={scope!r}")
    if warn_at is not None:
        parts.append(f"warn_at={warn_at!r}")
    if policy != as_policy(default):
        parts.append(f"on_limit={_written_policy(policy)}")
    if shadow:
        parts.append("shadow=True")
    return "".join(", " + part for part in parts)


def max_turns(
    n: int | Unlimited | str,
    *,
    scope: Scope = "run",
    warn_at: float | None = None,
    on_limit: str | Policy = "abort",
    shadow: bool = False,
    key: str | None = None,
    per: str | None = None,
    tz: str | None = None,
) -> Limit:
    """At most ``n`` turns per round: the ``n+1``th turn trips before it runs.

    ``0`` trips before every turn (approval mode); ``unlimited`` never trips but still counts.
    With ``key=``, the turns of every governor naming that key on the same ledger count
    together (``per=`` a calendar window: "hour", "day", "week", "month"; ``tz=`` its zone).
    """
    share = _share(key, per, tz, "max_turns")
    args = f"{n!r}" + _options("max_turns", scope, warn_at, on_limit, shadow, share=share)
    return _MaxTurns(
        n,
        args,
        name="max_turns",
        scope=scope,
        warn_at=warn_at,
        on_limit=on_limit,
        shadow=shadow,
        share=share,
    )


def max_model_calls(
    n: int | Unlimited | str,
    *,
    scope: Scope = "run",
    warn_at: float | None = None,
    on_limit: str | Policy = "abort",
    shadow: bool = False,
    key: str | None = None,
    per: str | None = None,
    tz: str | None = None,
) -> Limit:
    """At most ``n`` model calls: the ``n+1``th trips before it is sent. ``key=``, ``per=``
    and ``tz=`` share the budget, as for ``max_turns``."""
    share = _share(key, per, tz, "max_model_calls")
    args = f"{n!r}" + _options("max_model_calls", scope, warn_at, on_limit, shadow, share=share)
    return _MaxModelCalls(
        n,
        args,
        name="max_model_calls",
        scope=scope,
        warn_at=warn_at,
        on_limit=on_limit,
        shadow=shadow,
        share=share,
    )


def max_tool_calls(
    n: int | Unlimited | str,
    *,
    tool: str | None = None,
    scope: Scope = "run",
    warn_at: float | None = None,
    on_limit: str | Policy | None = None,
    shadow: bool = False,
    key: str | None = None,
    per: str | None = None,
    tz: str | None = None,
) -> Limit:
    """At most ``n`` tool calls (of ``tool``, when given): the ``n+1``th is refused before it runs.

    The overall budget aborts by default (``on_limit="synthesize"`` salvages an answer); a
    per-tool cap blocks the one call by default, so the model can go on with other tools.
    ``key=``, ``per=`` and ``tz=`` share the budget, as for ``max_turns``.
    """
    default = "abort" if tool is None else "block"
    policy = default if on_limit is None else on_limit
    shown = "" if tool is None else f", tool={tool!r}"
    share = _share(key, per, tz, "max_tool_calls")
    args = f"{n!r}{shown}" + _options(
        "max_tool_calls", scope, warn_at, policy, shadow, default, share
    )
    return _MaxToolCalls(
        n,
        args,
        tool,
        name="max_tool_calls",
        scope=scope,
        warn_at=warn_at,
        on_limit=policy,
        shadow=shadow,
        share=share,
    )


def max_tokens(
    total: int | Unlimited | str | None = None,
    *,
    input: int | Unlimited | str | None = None,
    output: int | Unlimited | str | None = None,
    scope: Scope = "run",
    warn_at: float | None = None,
    on_limit: str | Policy = "abort",
    shadow: bool = False,
    key: str | None = None,
    per: str | None = None,
    tz: str | None = None,
) -> Limit:
    """At most this many tokens: ``max_tokens(100_000)`` counts input and output together;
    ``input=`` and ``output=`` limit each. Checked before a request ("would exceed": none left)
    and after its usage arrives ("exceeded"). ``key=``, ``per=`` and ``tz=`` share the budget,
    as for ``max_turns``: a request holds its worst case in the ledger until it is answered."""
    given = {"total": total, "input": input, "output": output}
    chosen = {kind: value for kind, value in given.items() if value is not None}
    if not chosen:
        raise InvalidValueError(
            "max_tokens", None, "at least one of total, input= or output=, e.g. max_tokens(100_000)"
        )
    share = _share(key, per, tz, "max_tokens")
    options = _options("max_tokens", scope, warn_at, on_limit, shadow, share=share)
    leaves = tuple(
        _MaxTokens(
            value,
            f"{kind}={value!r}{options}",
            kind,
            name=f"max_tokens({kind})",
            scope=scope,
            warn_at=warn_at,
            on_limit=on_limit,
            shadow=shadow,
            share=share,
        )
        for kind, value in chosen.items()
    )
    if len(leaves) == 1:
        return leaves[0]
    shown = ", ".join(f"{kind}={value!r}" for kind, value in chosen.items())
    return _MaxTokensCall(leaves, shown + options)


def max_cost(
    usd: str | Decimal | int | float,
    *,
    scope: Scope = "run",
    warn_at: float | None = None,
    on_limit: str | Policy = "abort",
    shadow: bool = False,
    key: str | None = None,
    per: str | None = None,
    tz: str | None = None,
) -> Limit:
    """At most ``usd`` dollars. A request whose worst-case cost (its ``max_tokens`` all used)
    would pass the limit trips before it is sent; the total is checked again when usage arrives.
    A model with no known price is a configuration error, never $0. With ``key=`` (and
    ``per=``, ``tz=``), every governor naming the key on the same ledger spends one budget:
    ``max_cost("20", key="team-a", per="day")``."""
    amount = _check_money(usd, "max_cost")
    share = _share(key, per, tz, "max_cost")
    args = f"{str(amount)!r}" + _options("max_cost", scope, warn_at, on_limit, shadow, share=share)
    return _MaxCost(
        amount,
        args,
        scope=scope,
        warn_at=warn_at,
        on_limit=on_limit,
        shadow=shadow,
        share=share,
    )


def timeout(
    seconds: float | None = None,
    *,
    minutes: float | None = None,
    hours: float | None = None,
    scope: Scope = "run",
    warn_at: float | None = None,
    on_limit: str | Policy = "abort",
    shadow: bool = False,
) -> Limit:
    """At most this long, on the governor's monotonic clock, from the start of the run (or of
    the session, with ``scope="session"``) — never from when the limit was built."""
    # Largest unit first, as one writes a duration (and as the repr shows it).
    given = {"hours": hours, "minutes": minutes, "seconds": seconds}
    chosen = {unit: value for unit, value in given.items() if value is not None}
    total = 0.0
    for unit, value in chosen.items():
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
            or value <= 0
        ):
            raise InvalidValueError(f"timeout({unit})", value, "a positive, finite number")
        total += value * {"seconds": 1, "minutes": 60, "hours": 3600}[unit]
    if not chosen:
        raise InvalidValueError(
            "timeout", None, "seconds, minutes= or hours=, e.g. timeout(minutes=30)"
        )
    if total > threading.TIMEOUT_MAX:
        # Its time left is passed down as a call's timeout: no wait takes a longer one.
        raise InvalidValueError("timeout", total, LONGEST_WAIT)
    if list(chosen) == ["seconds"]:
        shown = f"{seconds!r}"
    else:
        shown = ", ".join(f"{unit}={value!r}" for unit, value in chosen.items())
    args = shown + _options("timeout", scope, warn_at, on_limit, shadow)
    return _Timeout(total, args, scope=scope, warn_at=warn_at, on_limit=on_limit, shadow=shadow)


# --------------------------------------------------------------------------------------------
# Validation and formatting


def _check_count(value: object, name: str) -> int | None:
    if value is UNLIMITED or (isinstance(value, str) and value.strip().lower() == "unlimited"):
        return None
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    raise InvalidValueError(name, value, "a non-negative integer or 'unlimited'")


def _check_money(value: object, name: str) -> Decimal:
    try:
        if isinstance(value, bool):
            raise TypeError
        if isinstance(value, float):
            value = repr(value)
        amount = Decimal(value)  # type: ignore[arg-type]
    except (TypeError, ValueError, InvalidOperation):
        amount = Decimal("NaN")
    if not amount.is_finite() or amount < 0:
        raise InvalidValueError(name, value, "a non-negative amount of US dollars, e.g. '2.00'")
    return amount


def _check_scope(scope: object, name: str) -> Scope:
    if scope not in SCOPES:
        raise InvalidValueError(f"{name}(scope)", scope, "'run' or 'session'")
    return "session" if scope == "session" else "run"


def _check_warn_at(value: object, name: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, int | float) and not isinstance(value, bool) and 0 < value < 1:
        return float(value)
    raise InvalidValueError(f"{name}(warn_at)", value, "a fraction between 0 and 1, e.g. 0.8")


def _written_policy(policy: Policy) -> str:
    """``policy`` as an ``on_limit=`` argument that builds it again: its name, or the call of
    ``haltwise.policies`` that gave it its settings."""
    if policy.name == "ask" and policy.timeout is not None:
        return f"policies.ask(timeout={policy.timeout!r})"
    if policy.name == "synthesize" and policy.synthesizer is not None:
        callback = getattr(policy.synthesizer, "__qualname__", repr(policy.synthesizer))
        return f"policies.synthesize({callback})"
    return repr(policy.name)


def _money(amount: int) -> str:
    """An amount in engine units as dollars for a message: cents, or four decimals below one."""
    usd = dollars(amount)
    return f"{usd:.4f}" if usd < Decimal("0.01") and usd != 0 else f"{usd:.2f}"


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.1f}s"
    if seconds < 7200:
        return f"{seconds / 60:.1f}m"
    return f"{seconds / 3600:.1f}h"
