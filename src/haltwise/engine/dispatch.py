"""What ``Governor.handle`` does for every event, and its handlers for an LLM call's two events
and a tool call's.

``Dispatch.handle`` takes the governor's lock, looks at the clock against the earliest plain
deadline, and hands the event to the fast path's handler for its type while nothing but the
limits can change the decision (``plain``), else to the governor's general path. Compiled, the
governor's lock is a ``Lock``, taken in C (``dispatch.pxd``): a reentrant lock whose waits, like
``threading.RLock``'s, time out and give way to Ctrl-C.

``on_model_request`` and ``on_model_response`` decide a ``ModelRequest`` and a
``ModelResponse`` under the common limits (model calls, tokens, dollars, counted on the
governor's own tallies), as the general handlers would when every check passes; the moment a
check would have anything to say they hand the event, unchanged and from the same state, to
the general handler. ``hotpath.py`` chooses when they are used and gives them their checks
(``Check``), in the compiled build only: interpreted, their loop over the checks costs more
than the handlers ``hotpath.py`` writes with each limit's number in their source, and the pure
build uses those. ``tests/core/test_fast_path.py`` requires the same decisions and counts from
them as from the general path, and from the compiled build as from the pure one.

``on_tool_call`` and ``on_tool_result`` are the general handlers of a ``ToolCall`` and a
``ToolResult`` (their checks before and after, the shared budgets, the count), in both builds;
compiled, ``handle`` calls them without a lookup.

This module is compiled by Cython from this source when haltwise is installed with a C
compiler (``haltwise/_compiled.py``); ``dispatch.pxd`` types its attributes, and those of the
events and tallies it reads (``events.pxd``, ``state.pxd``), so that each is a C struct member.
``handle`` checks each event's fields first (``events.check``): the handlers below see only
counts that are ints >= 0 and costs that are Decimals >= 0. Compiled, the handlers' sums and
comparisons are on C integers, not on Python ints: counts and prices as C long longs below
2^62 (``_natural``), dollars in engine units as 128-bit integers within 2^120 of zero
(``_whole``), so that no product or sum of a few can overflow; a value that is no int (a
price, a tally), or is past those bounds, makes the handler hand the event on unchanged (a
request to the general handler, a response's price to the pricer, its checks to the general
ones). Python ints of many digits cost an allocation for every sum. Interpreted, it is the
same code on Python ints.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any

from .decisions import CONTINUE, Block, Decision, Warn, joined
from .events import ModelRequest, ModelResponse, ToolCall, ToolResult, check
from .pricing import units
from .state import (
    COST_ROOM,
    MAX_CALL_COST,
    MAX_IN_FLIGHT,
    TALLY_ROOM,
    InFlight,
    Slot,
    Tally,
)

if TYPE_CHECKING:
    from . import _pure as cython
    from .governor import Governor
else:
    try:
        import cython

        if not cython.compiled:
            raise ImportError  # Cython's own stand-ins: haltwise's are the same everywhere
    except ImportError:
        from . import _pure as cython

__all__ = ["COMPILED", "Check", "Dispatch", "Lock", "new_lock"]

#: Whether this module runs compiled.
COMPILED: bool = cython.compiled

#: What a ``Check`` compares (C ints, compiled): model calls, input, output or total tokens, or
#: dollars.
_CALLS = cython.declare(cython.int, 0)
_INPUT = cython.declare(cython.int, 1)
_OUTPUT = cython.declare(cython.int, 2)
_TOTAL = cython.declare(cython.int, 3)
_COST = cython.declare(cython.int, 4)
#: ``state.TALLY_ROOM`` as a C integer; ``state.COST_ROOM`` and ``state.MAX_CALL_COST`` too
#: (declared in dispatch.pxd, 128 bits).
_ROOM = cython.declare(cython.longlong, TALLY_ROOM)
_COST_ROOM = COST_ROOM
_MAX_CALL = MAX_CALL_COST


class Check:
    """A limit on model calls, tokens or dollars, as the LLM-call handlers check it: what it
    counts, its number (calls, tokens, or dollars in engine units), its slot, and whether it
    counts on the run's tally (else the session's)."""

    __slots__ = ("cap", "fits", "kind", "maximum", "on_run", "slot", "tally")

    def __init__(self, limit: Any, slot: Slot, on_run: bool) -> None:
        reason = limit.reason
        if reason == "cost_limit":
            self.kind = _COST
            self.maximum = limit.units
        else:
            kinds = {"input": _INPUT, "output": _OUTPUT, "total": _TOTAL}
            self.kind = kinds[limit.kind] if reason == "token_limit" else _CALLS
            self.maximum = limit.maximum
        # The number as a C integer (compiled), converted once; one too large for it leaves
        # every event the check sees to the general handlers.
        try:
            self.cap = _whole(self.maximum)
            self.fits = True
        except OverflowError:
            self.cap = 0
            self.fits = False
        self.slot = slot
        self.tally = slot.tally
        self.on_run = on_run


class Dispatch:
    """The governor's per-event entry point and the state it reads on every event."""

    __slots__ = (
        "after_checks",
        "before_checks",
        "call_post",
        "call_pre",
        "clock",
        "due",
        "early",
        "evidence",
        "fast_call",
        "fast_request",
        "fast_response",
        "fast_result",
        "flat",
        "flight",
        "governor",
        "hot",
        "locking",
        "monotonic",
        "own_lock",
        "plain",
        "priced",
        "result_post",
        "result_pre",
        "run",
        "run_prices",
        "session",
        "shared_call",
        "unit_price",
        "worst_units",
    )

    def __init__(self, governor: Governor, lock: Any, clock: Any, plain: bool) -> None:
        self.governor = governor
        #: Held while an event is decided and counted (``Governor.lock``), with its bound
        #: ``acquire`` and ``release``: one tuple, so that a new lock replaces all three at once.
        self.locking: tuple[Any, Any, Any] = (lock, lock.acquire, lock.release)
        #: The lock when it is taken in C (a ``Lock``, compiled), else None.
        self.own_lock: Lock | None = _own(lock)
        self.clock = clock
        #: Whether the dispatch reads the clock in C: compiled, when it is ``time.monotonic``.
        self.monotonic = cython.compiled and clock is time.monotonic
        #: The earliest deadline of the plain time limits left out of the checks (None: none).
        self.due: float | None = None
        #: True while nothing but the limits can change the next decision (the fast path).
        self.plain = plain
        #: A note a limit gave before the event spent, returned once the event is admitted
        #: (``pre``).
        self.early: Any = None
        #: The fast path's handlers by event type (``use``), and whether those of an LLM
        #: call's two events are this dispatch's own (called without a lookup).
        self.hot: dict[type, Any] = {}
        #: Where the tool calls and results admitted without a word are kept, for a driver
        #: that keeps the latest (``Governor.keep_tool_events``); None: nowhere.
        self.evidence: Any = None
        self.fast_request = False
        self.fast_response = False
        #: The same for a tool call's two events: whether their handlers are this dispatch's.
        self.fast_call = False
        self.fast_result = False
        #: The checks before and after a tool call and a tool result, and the shared budgets'
        #: checks of a call (``use_tool_checks``).
        self.call_pre: tuple[Any, ...] = ()
        self.call_post: tuple[Any, ...] = ()
        self.result_pre: tuple[Any, ...] = ()
        self.result_post: tuple[Any, ...] = ()
        self.shared_call: tuple[Any, ...] = ()
        self.run: Tally = governor._run
        self.session: Tally = governor._session
        self.flight: InFlight = governor._in_flight
        #: The checks before a request and after a response (``use_checks``); None while the
        #: LLM-call handlers are not in use.
        self.before_checks: tuple[Check, ...] | None = None
        self.after_checks: tuple[Check, ...] | None = None
        #: Whether a cost limit prices every call, and whether the run's cost limit prices
        #: each request; then the pricer's methods and its flat per-token prices.
        self.priced = False
        self.run_prices = False
        self.worst_units: Any = None
        self.unit_price: Any = None
        self.flat: dict[str, tuple[int, int, int, int, int]] = {}

    @property
    def lock(self) -> Any:
        """Held while an event is decided and counted (``Governor.lock``)."""
        return self.locking[0]

    @lock.setter
    def lock(self, lock: Any) -> None:
        self.locking = (lock, lock.acquire, lock.release)
        self.own_lock = _own(lock)

    def handle(self, event: Any) -> Decision:
        """The decision for ``event`` (``Governor.handle``)."""
        check(event)  # before anything is counted from it
        # Compiled, the governor's own lock is taken in C; any other by its bound methods
        # rather than ``with lock``: the pair costs half as much, and a method looked up once
        # for each event a little more.
        own = self.own_lock
        if own is None:
            _, acquire, release = self.locking
            acquire()
        else:
            _take(own, True, -1)
        try:
            due = self.due
            if due is not None and (
                # Compiled, ``time.monotonic`` is read in C, as Python reads it.
                _monotonic() >= cython.cast(cython.double, due)
                if self.monotonic
                else self.clock() >= due
            ):
                self.governor._time_is_up()
            if self.plain:
                # The common case, in one test: live, unasked, uncancelled, no parent.
                kind = type(event)
                # Only compiled are this dispatch's own handlers called without a lookup
                # (Cython drops the test): interpreted, hotpath.py writes its own for an LLM
                # call, and every event's handler is looked up in ``hot``, in one branch that
                # tests nothing more. A tool event's decision is kept as evidence below.
                decision: Decision
                if cython.compiled:
                    if kind is ModelRequest and self.fast_request:
                        return self.on_model_request(event)
                    if kind is ModelResponse and self.fast_response:
                        return self.on_model_response(event)
                    if kind is ToolCall and self.fast_call:
                        decision = self.on_tool_call(event)
                    elif kind is ToolResult and self.fast_result:
                        decision = self.on_tool_result(event)
                    else:
                        handler = self.hot.get(kind)
                        decision = (
                            self.governor._handle_slowly(event)
                            if handler is None
                            else handler(event)
                        )
                else:
                    handler = self.hot.get(kind)
                    decision = (
                        self.governor._handle_slowly(event) if handler is None else handler(event)
                    )
            else:
                decision = self.governor._handle_slowly(event)
            evidence = self.evidence
            if (
                evidence is not None
                and decision is CONTINUE
                and (type(event) is ToolCall or type(event) is ToolResult)
            ):
                evidence.append(event)
            return decision
        finally:
            if own is None:
                release()
            else:
                _give(own)

    def pre(self, checks: tuple[Any, ...], event: Any) -> Decision | None:
        """What the governor's ``checks`` (``(limit, slot, ctx, limit.pre)`` each) say before
        ``event`` spends: None when each admits it, a note some gave kept for the event's decision
        (``early``); else the decision of the first to refuse it, or to trip
        (``Governor._trip``). A check whose slot is asleep (``Slot.asleep``) is not asked."""
        governor = self.governor
        if governor._checked:
            return None
        bypass = governor._bypass
        for limit, slot, ctx, judge in checks:
            if limit is bypass or (slot is not None and slot.asleep):
                continue
            verdict = judge(event, slot, ctx)
            if verdict is None:
                continue
            if type(verdict) is Warn:
                # A note before the event spends: the event is still admitted.
                early = self.early
                self.early = verdict if early is None else joined(early, verdict)
                continue
            if type(verdict) is Block:
                self.early = None
                return verdict
            decision = governor._trip(limit, slot, event, str(verdict), before=True, ctx=ctx)
            if decision is not None:
                self.early = None
                return decision
        return None

    def post(self, checks: tuple[Any, ...], event: Any) -> Decision:
        """The decision for ``event`` once counted, from what the governor's ``checks`` say
        after it: the first to trip decides; the notes of the others, and the one kept before
        it spent, are joined."""
        warn = self.early
        self.early = None
        for limit, slot, ctx, judge in checks:
            verdict = judge(event, slot, ctx)
            if verdict is None:
                pass
            elif type(verdict) is str:
                decision = self.governor._trip(limit, slot, event, verdict, before=False, ctx=ctx)
                if decision is not None:
                    return decision
            elif type(verdict) is Warn:
                warn = verdict if warn is None else joined(warn, verdict)
            elif type(verdict) is Block:
                note = Warn(verdict.reason, verdict.limit)
                warn = note if warn is None else joined(warn, note)
            if slot is not None and slot.soft and not slot.warned:
                soft = self.governor._soft_warning(limit, slot, ctx)
                if soft is not None:
                    warn = soft if warn is None else joined(warn, soft)
        return CONTINUE if warn is None else warn

    def use(self, hot: dict[type, Any]) -> None:
        """Hand each event type to ``hot[type]`` on the fast path (none: the general path)."""
        self.hot = hot
        self.fast_request = hot.get(ModelRequest) == self.on_model_request
        self.fast_response = hot.get(ModelResponse) == self.on_model_response
        self.fast_call = hot.get(ToolCall) == self.on_tool_call
        self.fast_result = hot.get(ToolResult) == self.on_tool_result

    def use_tool_checks(
        self,
        call: tuple[tuple[Any, ...], tuple[Any, ...]],
        result: tuple[tuple[Any, ...], tuple[Any, ...]],
        shared: tuple[Any, ...],
    ) -> None:
        """Decide tool calls and results with these checks: before and after a call, before
        and after a result (the governor's tables), and those of the shared budgets a call
        takes from."""
        self.call_pre, self.call_post = call
        self.result_pre, self.result_post = result
        self.shared_call = shared

    def on_tool_call(self, event: ToolCall) -> Decision:
        """The governor's handler of a ``ToolCall``: the checks before it, the shared budgets,
        the count, the checks after it. The calls to ``pre`` and ``post`` are left out when no
        limit checks the event."""
        if self.call_pre:
            decision = self.pre(self.call_pre, event)
            if decision is not None:
                return decision
        governor = self.governor
        if self.shared_call and not governor._checked:
            decision = governor._take_shared(self.shared_call, event)
            if decision is not None:
                return decision
        name = event.name
        run = self.run
        session = self.session
        run.tool_calls += 1
        session.tool_calls += 1
        by_name = run.tool_calls_by_name
        by_name[name] = by_name.get(name, 0) + 1
        by_name = session.tool_calls_by_name
        by_name[name] = by_name.get(name, 0) + 1
        if self.call_post or self.early is not None:
            return self.post(self.call_post, event)
        return CONTINUE

    def on_tool_result(self, event: ToolResult) -> Decision:
        """The governor's handler of a ``ToolResult``: the checks before it and after it."""
        if self.result_pre:
            decision = self.pre(self.result_pre, event)
            if decision is not None:
                return decision
        return self.post(self.result_post, event) if self.result_post else CONTINUE

    def use_checks(self, before: tuple[Check, ...], after: tuple[Check, ...], pricer: Any) -> None:
        """Decide requests and responses with these checks (and ``pricer``, when a cost limit
        prices every call)."""
        self.before_checks = before
        self.after_checks = after
        self.priced = pricer is not None
        self.run_prices = any(check.kind == _COST and check.on_run for check in before)
        if pricer is not None:
            self.worst_units = pricer.worst_units
            self.unit_price = pricer.units
            # A model's flat per-token prices, once the pricer has resolved it (the pricer
            # empties this when its data changes); a model not in it is priced by the pricer.
            self.flat = getattr(pricer, "flat_units", {})

    def on_model_request(self, event: ModelRequest) -> Decision:
        # Mirrors Governor._on_model_request and _count_request when every check passes and
        # no token limit lowers max_tokens (then each allowance is None). The arithmetic is on
        # C integers (compiled): a count or a price that is no int, or too large for them, hands
        # the event to the general handler before anything is counted.
        governor = self.governor
        flight = self.flight
        requests: list[Any] = flight.requests
        if self.early is not None or len(requests) >= MAX_IN_FLIGHT:
            return governor._on_model_request(event)
        run = self.run
        session = self.session
        model = event.model
        wanted_given = event.max_tokens
        asked_given = event.input_tokens
        # The prompt's size, as each tally estimates it when the driver does not say.
        prompt_run_given = run.last_input_tokens if asked_given is None else asked_given
        worst_run_given: Any = None
        refused = False
        try:
            wanted = 0 if wanted_given is None else _natural(wanted_given)
            asked = 0 if asked_given is None else _natural(asked_given)
            prompt_run = _natural(prompt_run_given)
            prompt_session = session.last_input_tokens if asked_given is None else asked
            checks: tuple[Check, ...] | None = self.before_checks
            assert checks is not None
            for check in checks:
                slot = check.slot
                tally = check.tally
                kind = check.kind
                # ``free`` is the cap less what is spent or held: the general checks'
                # ``used >= cap`` is ``free <= 0``, and ``used + more > cap`` is ``more > free``.
                if not check.fits:
                    refused = True
                    break
                cap = check.cap + _whole(slot.extra) + _whole(slot.baseline)
                if kind == _CALLS:
                    if tally.model_calls >= cap:
                        refused = True
                        break
                    continue
                prompt = prompt_run if check.on_run else prompt_session
                if kind == _COST:
                    if tally.cost > _COST_ROOM:
                        refused = True  # the general handler says so
                        break
                    free = cap - tally.cost - flight.cost
                    if free <= 0:
                        refused = True
                        break
                    if wanted_given is not None:
                        worst = self._worst(model, prompt, wanted)
                        if worst < 0 or worst > free or worst > _MAX_CALL:
                            refused = True
                            break
                        if check.on_run:
                            worst_run_given = _money(worst)
                    continue
                # Summed as 128-bit integers (compiled): a total and what is held can pass 2^63.
                if kind == _INPUT:
                    used = tally.input_tokens
                    used += flight.input_tokens
                elif kind == _OUTPUT:
                    used = tally.output_tokens
                    used += flight.output_tokens
                else:
                    used = tally.input_tokens
                    used += tally.output_tokens
                    used += flight.input_tokens
                    used += flight.output_tokens
                free = cap - used
                if kind == _INPUT:
                    if free <= 0 or (asked_given is not None and asked > free):
                        refused = True
                        break
                    continue
                room = free if kind == _OUTPUT else free - prompt
                if wanted_given is None or free <= 0 or not 0 < wanted <= room:
                    refused = True
                    break
                slot.state = None
        except (TypeError, OverflowError):
            refused = True  # a count or a price the C integers cannot hold
        if refused:
            return governor._on_model_request(event)
        run.model_calls += 1
        session.model_calls += 1
        output = 0 if wanted_given is None else wanted_given
        if not self.priced or wanted_given is None:
            cost = None
        elif self.run_prices:
            cost = worst_run_given  # the run's cost limit priced this very request
        else:
            cost = governor.request_cost(model, prompt_run_given, wanted_given) if model else None
        requests.append((event.request_id, model, prompt_run_given, output, cost, ()))
        flight.input_tokens += prompt_run
        flight.output_tokens += wanted
        if cost is not None:
            flight.cost += _whole(cost)  # at most MAX_CALL_COST
        return CONTINUE

    def _worst(self, model: Any, prompt: int, wanted: int) -> int:
        """The most a request can cost, in engine units (-1: no price)."""
        if not model:
            return -1
        found = self.flat.get(model)
        if found is None:
            worst: int | None = self.worst_units(model, prompt, wanted)
            return -1 if worst is None else _whole(worst)
        return prompt * _natural(found[4]) + wanted * _natural(found[1])

    def on_model_response(self, event: ModelResponse) -> Decision:
        # Mirrors Governor._count_response and _add_usage for an answered response whose
        # request (if any) holds nothing of a shared budget; then the checks after it.
        governor = self.governor
        run = self.run
        session = self.session
        if (
            self.early is not None
            or not event.answered
            # A total past TALLY_ROOM or COST_ROOM takes no more: the general handler says so.
            or run.input_tokens > _ROOM
            or run.output_tokens > _ROOM
            or session.input_tokens > _ROOM
            or session.output_tokens > _ROOM
            or run.cost > _COST_ROOM
            or session.cost > _COST_ROOM
        ):
            return governor._on_model_response(event)
        flight = self.flight
        requests: list[Any] = flight.requests
        index = 0
        if requests:
            request_id = event.request_id
            index = flight.index(request_id) if request_id else 0
            if requests[index][5]:
                return governor._on_model_response(event)
        input_tokens = event.input_tokens
        output_tokens = event.output_tokens
        cache_read = event.cache_read_tokens
        cache_write = event.cache_write_tokens
        given = event.cost
        model = event.model
        # Priced before the request is taken out: a price the general handler would refuse
        # sends the event on as it came. ``priced`` is the cost in engine units (a C integer,
        # compiled) when ``known``.
        cost: Any = None
        priced = 0
        known = False
        if given is not None:
            cost = units(given)
        elif not self.priced:
            # The pricer is made when the first response is priced.
            cost = governor._price(model, input_tokens, output_tokens, cache_read, cache_write)
        elif model:
            found = self.flat.get(model)
            if found is not None:
                try:
                    priced = _flat_cost(found, input_tokens, output_tokens, cache_read, cache_write)
                except (TypeError, OverflowError):
                    priced = -1  # a count or a price the C integers cannot hold
                known = priced >= 0
            if not known:
                cost = self.unit_price(model, input_tokens, output_tokens, cache_read, cache_write)
        if cost is not None:
            try:
                priced = _whole(cost)
            except (TypeError, OverflowError):
                priced = -1
            known = priced >= 0
            if not known:
                return governor._on_model_response(event)
        if known and priced > _MAX_CALL:
            return governor._on_model_response(event)
        if requests:
            # Read, then deleted: compiled, ``pop`` of a list left under half full is a
            # method call (the common case: the one request in flight taken out).
            reservation = requests[index]
            del requests[index]
            held_prompt: int = reservation[2]  # compiled, C integers: counts of at most MAX_COUNT
            held_output: int = reservation[3]
            flight.input_tokens -= held_prompt
            flight.output_tokens -= held_output
            held = reservation[4]
            if held is not None:
                flight.cost -= _whole(held)
        # Counts of at most MAX_COUNT (events.check), added to totals of at most TALLY_ROOM.
        counted: int = input_tokens
        run.input_tokens += counted
        session.input_tokens += counted
        run.last_input_tokens = counted
        session.last_input_tokens = counted
        counted = output_tokens
        run.output_tokens += counted
        session.output_tokens += counted
        counted = cache_read
        if counted:
            run.cache_read_tokens += counted
            session.cache_read_tokens += counted
        counted = cache_write
        if counted:
            run.cache_write_tokens += counted
            session.cache_write_tokens += counted
        if known:
            # At most MAX_CALL_COST, added to totals of at most COST_ROOM.
            run.cost += priced
            session.cost += priced
        else:
            run.cost_known = False
            session.cost_known = False
        if event.text:
            governor._last_text = event.text
        if not known and self.priced:
            return governor._after_response(event, None)
        checks: tuple[Check, ...] | None = self.after_checks
        assert checks is not None
        try:
            for check in checks:
                slot = check.slot
                tally = check.tally
                kind = check.kind
                if kind == _COST:
                    used = tally.cost
                elif kind == _INPUT:
                    used = tally.input_tokens
                elif kind == _OUTPUT:
                    used = tally.output_tokens
                else:
                    used = tally.input_tokens
                    used += tally.output_tokens
                if not check.fits or used > check.cap + _whole(slot.extra) + _whole(slot.baseline):
                    return governor._after_response(event, _money(priced) if known else None)
        except (TypeError, OverflowError):
            # A count the C integers cannot hold: the general checks decide.
            return governor._after_response(event, _money(priced) if known else None)
        return CONTINUE


def _own(lock: Any) -> Lock | None:
    """``lock`` when the dispatch takes it in C (a ``Lock``, this module compiled), else None."""
    return lock if cython.compiled and type(lock) is Lock else None


def new_lock() -> Any:
    """A governor's lock: compiled, a ``Lock``, which the dispatch takes in C; interpreted, a
    ``threading.RLock``, which costs less to call than a ``Lock`` written in Python."""
    return Lock() if cython.compiled else threading.RLock()


class Lock:
    """A reentrant lock, as ``threading.RLock`` is, that the compiled dispatch takes and lets go
    in C, without a Python call.

    Compiled, while no other thread wants it, it is a count and the thread that holds it, each
    changed while the interpreter lock is held. A thread that finds it held by another waits
    on a ``threading.Lock`` (taken for the holder first, who lets it go with the lock), so
    that the wait can time out and be interrupted as ``threading.RLock``'s can: Ctrl-C stops
    a thread waiting for a governor. Interpreted, it is a ``threading.RLock``, through which
    every call goes."""

    __slots__ = ("_count", "_held", "_owner", "_real", "_waiting")

    def __init__(self) -> None:
        #: The thread that holds it, and how many times over.
        self._owner = 0
        self._count = 0
        #: How many threads wait for ``_real``, and whether it is taken (for the holder).
        self._waiting = 0
        self._held = False
        self._real: Any = threading.Lock() if cython.compiled else threading.RLock()

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        """Take it (again, if this thread holds it); as ``threading.RLock.acquire``, with its
        arguments checked as Python 3.11's are, whether or not it has to wait."""
        if not blocking and timeout != -1:
            raise ValueError("can't specify a timeout for a non-blocking call")
        if timeout < 0 and timeout != -1:
            raise ValueError("timeout value must be positive")
        return _take(self, blocking, timeout)

    def release(self) -> None:
        """Let it go once; RuntimeError if this thread does not hold it."""
        _give(self)

    def __enter__(self) -> bool:
        return _take(self, True, -1)

    def __exit__(self, *exc_info: object) -> None:
        _give(self)

    # What ``threading.Condition`` asks of a reentrant lock, as ``threading.RLock`` has it.

    def _is_owned(self) -> bool:
        """Whether this thread holds it."""
        return _owned(self)

    def _release_save(self) -> Any:
        """Let it go however many times this thread took it; what takes it back."""
        return _let_go_all(self)

    def _acquire_restore(self, state: Any) -> None:
        """Take it back as ``_release_save`` let it go."""
        _take_back(self, state)


if not cython.compiled:
    # Compiled, ``dispatch.pxd`` takes and lets go a Lock in C (the interpreter lock keeps each
    # step whole), reads the monotonic clock and converts the handlers' values to C integers;
    # interpreted, every step of the lock is the RLock's.

    def _take(lock: Lock, blocking: bool, timeout: float) -> bool:
        """Take ``lock``."""
        taken: bool = lock._real.acquire(blocking, timeout)
        return taken

    def _give(lock: Lock) -> int:
        """Let ``lock`` go."""
        lock._real.release()
        return 0

    def _owned(lock: Lock) -> bool:
        """Whether this thread holds ``lock``."""
        owned: bool = lock._real._is_owned()
        return owned

    def _let_go_all(lock: Lock) -> Any:
        """Let ``lock`` go whatever its count; what ``_take_back`` takes it back with."""
        return lock._real._release_save()

    def _take_back(lock: Lock, state: Any) -> int:
        """Take ``lock`` back as ``_let_go_all`` let it go."""
        lock._real._acquire_restore(state)
        return 0

    def _monotonic() -> float:
        """``time.monotonic()`` (``handle`` reads it so only compiled: interpreted, it calls the
        governor's clock)."""
        return time.monotonic()

    def _natural(value: object) -> int:
        """``value`` when it is a count or a price that the compiled handlers' C integers can
        multiply without overflow, an int in [0, 2^62); else TypeError or OverflowError."""
        if type(value) is not int:
            raise TypeError(value)
        if value >> 62:
            raise OverflowError(value)
        return value

    def _whole(value: object) -> int:
        """``value`` when it is an int within 2^120 of zero, which the compiled handlers hold in
        a C integer of 128 bits, where a sum of a few cannot overflow; else TypeError or
        OverflowError."""
        if type(value) is not int:
            raise TypeError(value)
        if not -1 <= value >> 120 <= 0:
            raise OverflowError(value)
        return value


def _money(value: int) -> int:
    """A C integer of 128 bits (compiled) as a Python int."""
    narrow = cython.cast(cython.longlong, value)
    if narrow == value:
        return narrow  # the quick conversion, from a C long long
    return value


def _flat_cost(
    found: tuple[int, int, int, int, int],
    input_tokens: object,
    output_tokens: object,
    cache_read: object,
    cache_write: object,
) -> int:
    """A response's cost at a model's flat per-token prices, in engine units; -1 when it reads
    more cached tokens than its prompt holds (the pricer says what that costs)."""
    read = _natural(cache_read)
    written = _natural(cache_write)
    plain = _natural(input_tokens) - read - written
    if plain < 0:
        return -1
    # Cached tokens are priced apart; most responses have none written, many none read.
    cost = plain * _natural(found[0]) + _natural(output_tokens) * _natural(found[1])
    if read:
        cost += read * _natural(found[2])
    if written:
        cost += written * _natural(found[3])
    return cost
