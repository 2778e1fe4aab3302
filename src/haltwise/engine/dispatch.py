"""What ``Governor.handle`` does for every event, and its handlers for an LLM call's two events.

``Dispatch.handle`` takes the governor's lock, looks at the clock against the earliest plain
deadline, and hands the event to the fast path's handler for its type while nothing but the
limits can change the decision (``plain``), else to the governor's general path.

``on_model_request`` and ``on_model_response`` decide a ``ModelRequest`` and a
``ModelResponse`` under the common limits (model calls, tokens, dollars, counted on the
governor's own tallies), as the general handlers would when every check passes; the moment a
check would have anything to say they hand the event, unchanged and from the same state, to
the general handler. ``hotpath.py`` chooses when they are used and gives them their checks
(``Check``), in the compiled build only: interpreted, their loop over the checks costs more
than the handlers ``hotpath.py`` writes with each limit's number in their source, and the pure
build uses those. ``tests/core/test_fast_path.py`` requires the same decisions and counts from
them as from the general path, and from the compiled build as from the pure one.

This module is compiled by Cython from this source when haltwise is installed with a C
compiler (``haltwise/_compiled.py``); ``dispatch.pxd`` types its attributes, and those of the
events and tallies it reads (``events.pxd``, ``state.pxd``), so that each is a C struct member.
Interpreted, it is the same code.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .decisions import CONTINUE, Decision
from .events import ModelRequest, ModelResponse
from .pricing import units
from .state import MAX_IN_FLIGHT, InFlight, Slot, Tally

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

__all__ = ["COMPILED", "Check", "Dispatch"]

#: Whether this module runs compiled.
COMPILED: bool = cython.compiled

#: What a ``Check`` compares (C ints, compiled): model calls, input, output or total tokens, or
#: dollars.
_CALLS = cython.declare(cython.int, 0)
_INPUT = cython.declare(cython.int, 1)
_OUTPUT = cython.declare(cython.int, 2)
_TOTAL = cython.declare(cython.int, 3)
_COST = cython.declare(cython.int, 4)


class Check:
    """A limit on model calls, tokens or dollars, as the LLM-call handlers check it: what it
    counts, its number (calls, tokens, or dollars in engine units), its slot, and whether it
    counts on the run's tally (else the session's)."""

    __slots__ = ("kind", "maximum", "on_run", "slot", "tally")

    def __init__(self, limit: Any, slot: Slot, on_run: bool) -> None:
        reason = limit.reason
        if reason == "cost_limit":
            self.kind = _COST
            self.maximum = limit.units
        else:
            kinds = {"input": _INPUT, "output": _OUTPUT, "total": _TOTAL}
            self.kind = kinds[limit.kind] if reason == "token_limit" else _CALLS
            self.maximum = limit.maximum
        self.slot = slot
        self.tally = slot.tally
        self.on_run = on_run


class Dispatch:
    """The governor's per-event entry point and the state it reads on every event."""

    __slots__ = (
        "after_checks",
        "before_checks",
        "clock",
        "due",
        "early",
        "fast_request",
        "fast_response",
        "flat",
        "flight",
        "governor",
        "hot",
        "lock",
        "plain",
        "priced",
        "run",
        "run_prices",
        "session",
        "unit_price",
        "worst_units",
    )

    def __init__(self, governor: Governor, lock: Any, clock: Any, plain: bool) -> None:
        self.governor = governor
        #: Held while an event is decided and counted (``Governor.lock``).
        self.lock = lock
        self.clock = clock
        #: The earliest deadline of the plain time limits left out of the checks (None: none).
        self.due: float | None = None
        #: True while nothing but the limits can change the next decision (the fast path).
        self.plain = plain
        #: A note a limit gave before the event spent, returned once the event is admitted
        #: (``Governor._pre``).
        self.early: Any = None
        #: The fast path's handlers by event type (``use``), and whether those of an LLM
        #: call's two events are this dispatch's own (called without a lookup).
        self.hot: dict[type, Any] = {}
        self.fast_request = False
        self.fast_response = False
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

    def handle(self, event: Any) -> Decision:
        """The decision for ``event`` (``Governor.handle``)."""
        # acquire/release rather than ``with``: the pair costs half as much on the hot path.
        lock = self.lock
        lock.acquire()
        try:
            due = self.due
            if due is not None and self.clock() >= due:
                self.governor._time_is_up()
            if self.plain:
                # The common case, in one test: live, unasked, uncancelled, no parent.
                kind = type(event)
                # Only compiled are the LLM-call handlers called without a lookup (Cython
                # drops the test): interpreted, hotpath.py writes its own for them.
                if cython.compiled:
                    if kind is ModelRequest and self.fast_request:
                        return self.on_model_request(event)
                    if kind is ModelResponse and self.fast_response:
                        return self.on_model_response(event)
                handler = self.hot.get(kind)
                if handler is not None:
                    decision: Decision = handler(event)
                    return decision
            return self.governor._handle_slowly(event)
        finally:
            lock.release()

    def use(self, hot: dict[type, Any]) -> None:
        """Hand each event type to ``hot[type]`` on the fast path (none: the general path)."""
        self.hot = hot
        self.fast_request = hot.get(ModelRequest) == self.on_model_request
        self.fast_response = hot.get(ModelResponse) == self.on_model_response

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
        # no token limit lowers max_tokens (then each allowance is None).
        governor = self.governor
        flight = self.flight
        requests: list[Any] = flight.requests
        if self.early is not None or len(requests) >= MAX_IN_FLIGHT:
            return governor._on_model_request(event)
        run = self.run
        session = self.session
        model = event.model
        wanted = event.max_tokens
        asked = event.input_tokens
        # The prompt's size, as each tally estimates it when the driver does not say.
        prompt_run = run.last_input_tokens if asked is None else asked
        prompt_session = session.last_input_tokens if asked is None else asked
        worst_run = None
        checks: tuple[Check, ...] | None = self.before_checks
        assert checks is not None
        for check in checks:
            slot = check.slot
            tally = check.tally
            kind = check.kind
            if kind == _CALLS:
                if tally.model_calls - slot.baseline >= check.maximum + slot.extra:
                    return governor._on_model_request(event)
                continue
            prompt = prompt_run if check.on_run else prompt_session
            # ``free`` is the cap less what is spent or held: the general checks'
            # ``used >= cap`` is ``free <= 0``, and ``used + more > cap`` is ``more > free``.
            if kind == _COST:
                free = check.maximum + slot.extra - (tally.cost - slot.baseline + flight.cost)
                if free <= 0:
                    return governor._on_model_request(event)
                if wanted is not None:
                    worst = self._worst(model, prompt, wanted)
                    if worst is None or worst > free:
                        return governor._on_model_request(event)
                    if check.on_run:
                        worst_run = worst
                continue
            if kind == _INPUT:
                used = tally.input_tokens + flight.input_tokens
            elif kind == _OUTPUT:
                used = tally.output_tokens + flight.output_tokens
            else:
                used = (
                    tally.input_tokens
                    + tally.output_tokens
                    + flight.input_tokens
                    + flight.output_tokens
                )
            free = check.maximum + slot.extra - (used - slot.baseline)
            if kind == _INPUT:
                if free <= 0 or (asked is not None and asked > free):
                    return governor._on_model_request(event)
                continue
            room = free if kind == _OUTPUT else free - prompt
            if wanted is None or free <= 0 or not 0 < wanted <= room:
                return governor._on_model_request(event)
            slot.state = None
        run.model_calls += 1
        session.model_calls += 1
        output = 0 if wanted is None else wanted
        if not self.priced or wanted is None:
            cost = None
        elif self.run_prices:
            cost = worst_run  # the run's cost limit priced this very request
        else:
            cost = governor.request_cost(model, prompt_run, wanted) if model else None
        requests.append((event.request_id, model, prompt_run, output, cost, ()))
        flight.input_tokens += prompt_run
        flight.output_tokens += output
        if cost is not None:
            flight.cost += cost
        return CONTINUE

    def _worst(self, model: Any, prompt: Any, wanted: Any) -> int | None:
        """The most a request can cost, in engine units (None: no price)."""
        if not model:
            return None
        found = self.flat.get(model)
        if found is None or (prompt | wanted) < 0:
            worst: int | None = self.worst_units(model, prompt, wanted)
            return worst
        return prompt * found[4] + wanted * found[1]  # type: ignore[no-any-return]

    def on_model_response(self, event: ModelResponse) -> Decision:
        # Mirrors Governor._count_response and _add_usage for an answered response whose
        # request (if any) holds nothing of a shared budget; then the checks after it.
        governor = self.governor
        if self.early is not None or not event.answered:
            return governor._on_model_response(event)
        flight = self.flight
        requests: list[Any] = flight.requests
        if requests:
            request_id = event.request_id
            index = flight.index(request_id) if request_id else 0
            if requests[index][5]:
                return governor._on_model_response(event)
            reservation = requests.pop(index)
            flight.input_tokens -= reservation[2]
            flight.output_tokens -= reservation[3]
            held = reservation[4]
            if held is not None:
                flight.cost -= held
        input_tokens = event.input_tokens
        output_tokens = event.output_tokens
        cache_read = event.cache_read_tokens
        cache_write = event.cache_write_tokens
        given = event.cost
        model = event.model
        cost: Any
        if given is not None:
            cost = units(given)
        elif not self.priced:
            # The pricer is made when the first response is priced.
            cost = governor._price(model, input_tokens, output_tokens, cache_read, cache_write)
        elif model:
            found = self.flat.get(model)
            if (
                found is None
                or (input_tokens | output_tokens | cache_read | cache_write) < 0
                or cache_read + cache_write > input_tokens
            ):
                cost = self.unit_price(model, input_tokens, output_tokens, cache_read, cache_write)
            else:
                # Cached tokens are priced apart; most responses have none written, many none read.
                cost = (input_tokens - cache_read - cache_write) * found[0] + output_tokens * found[
                    1
                ]
                if cache_read:
                    cost += cache_read * found[2]
                if cache_write:
                    cost += cache_write * found[3]
        else:
            cost = None
        run = self.run
        session = self.session
        run.input_tokens += input_tokens
        session.input_tokens += input_tokens
        run.output_tokens += output_tokens
        session.output_tokens += output_tokens
        run.last_input_tokens = input_tokens
        session.last_input_tokens = input_tokens
        if cache_read:
            run.cache_read_tokens += cache_read
            session.cache_read_tokens += cache_read
        if cache_write:
            run.cache_write_tokens += cache_write
            session.cache_write_tokens += cache_write
        if cost is None:
            run.cost_known = False
            session.cost_known = False
        else:
            run.cost += cost
            session.cost += cost
        if event.text:
            governor._last_text = event.text
        if cost is None and self.priced:
            return governor._after_response(event, cost)
        checks: tuple[Check, ...] | None = self.after_checks
        assert checks is not None
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
                used = tally.input_tokens + tally.output_tokens
            if used - slot.baseline > check.maximum + slot.extra:
                return governor._after_response(event, cost)
        return CONTINUE
