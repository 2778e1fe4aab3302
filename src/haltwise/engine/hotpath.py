"""The fast path's handlers for a governor's four most frequent events, chosen for its limits.

The governor's general handlers walk check tables and ask each limit (``limit.pre(event, slot,
ctx)``) what it thinks; for a model call under five limits that is a dozen Python calls. When
the limits are the common kinds (turns, model calls, tool calls, tokens, dollars), checked
against this governor's own counts (no phase open, no budget shared through a ledger, no soft
threshold, no shadow mode), the events that only those limits check get a handler of their
own:

- ``TurnStarting`` and ``ToolCall``: this module writes the source of one handler each, with
  every check inlined as an integer comparison against the limit's number, and compiles it,
  as ``dataclasses`` writes an ``__init__``;
- ``ModelRequest`` and ``ModelResponse`` (an LLM call): in the compiled build, the dispatch's
  own handlers (``dispatch.py``, compiled by Cython), given the limits' numbers and slots as
  ``Check`` objects; in the pure build, handlers written here like the other two. Interpreted,
  the dispatch's handlers cost an LLM call about 10% more than written ones (a loop over
  the checks, each reading its number and kind), and issue 15 lets no figure get worse.

A fast handler decides only the common case: every check passes and nothing is lowered. It
reads before it writes: the moment a check would have anything to say, or anything unusual is
in play (a note waiting, a request with shared-budget holds, too many requests in flight), it
hands the event to the general handler, unchanged and from the same state, which decides it
as it always has. After a response is counted, a check that trips hands over the rest of the
decision (``Governor._after_response``) the same way. ``tests/core/test_fast_path.py`` drives
random limits and runs through both paths and requires the same decisions and counts.

``source(governor)`` returns the code written for a governor's limits, for debugging.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from types import CodeType
from typing import TYPE_CHECKING, Any

from .decisions import CONTINUE, Decision
from .dispatch import COMPILED, Check
from .events import ModelRequest, ModelResponse, ToolCall, TurnStarting
from .limits import Leaf, _MaxCost, _MaxModelCalls, _MaxTokens, _MaxToolCalls, _MaxTurns
from .pricing import units
from .state import COST_ROOM, MAX_CALL_COST, MAX_IN_FLIGHT, TALLY_ROOM, Slot

if TYPE_CHECKING:
    from .governor import Governor

__all__ = ["compile_handlers", "source"]

Handler = Callable[[Any], Decision]
#: A check of the governor's tables: (limit, its slot or None, the context it reads, and the
#: limit's bound ``pre`` or ``post``).
_Check = tuple[Any, "Slot | None", Any, Any]
#: The limits each fast handler can decide, by the event it checks them before.
_BEFORE: dict[type, tuple[type[Leaf], ...]] = {
    TurnStarting: (_MaxTurns,),
    ModelRequest: (_MaxModelCalls, _MaxTokens, _MaxCost),
    ModelResponse: (),
    ToolCall: (_MaxToolCalls,),
}
#: ... and after (a response's usage is counted first, then checked).
_AFTER: dict[type, tuple[type[Leaf], ...]] = {ModelResponse: (_MaxTokens, _MaxCost)}
#: The events whose handlers are written here; the dispatch has its own for the others, used
#: when it is compiled.
_WRITTEN: tuple[type, ...] = (
    (TurnStarting, ToolCall) if COMPILED else (TurnStarting, ModelRequest, ModelResponse, ToolCall)
)


def compile_handlers(governor: Governor) -> dict[type, Handler]:
    """Handlers for the events whose checks in the governor's fast tables can all be inlined
    (none when its configuration is not the common one)."""
    plan = _Plan(governor)
    handlers: dict[type, Handler] = {}
    if plan.written:
        # Written once for governors of the same limits, as it is written from them alone.
        blueprint = governor._blueprint
        if blueprint.hot_source is None:
            blueprint.hot_source = plan.source()
        namespace: dict[str, Any] = {}
        exec(_compiled(blueprint.hot_source), namespace)  # our own source, from our limits
        written: tuple[Handler, ...] = namespace["build"](*plan.arguments())
        handlers.update(zip(plan.written, written, strict=True))
    request = None if ModelRequest in plan.written else plan.events.get(ModelRequest)
    response = None if ModelResponse in plan.written else plan.events.get(ModelResponse)
    if request is not None or response is not None:
        dispatch = governor._dispatch
        dispatch.use_checks(
            () if request is None else plan.checks(request[0]),
            () if response is None else plan.checks(response[1]),
            # Made now rather than at the first request: the cost limit prices every one.
            governor._pricing() if governor._needs_prices else None,
        )
        if request is not None:
            handlers[ModelRequest] = dispatch.on_model_request
        if response is not None:
            handlers[ModelResponse] = dispatch.on_model_response
    return handlers


def source(governor: Governor) -> str:
    """The source of the handlers written for ``governor``'s limits ("" when none are)."""
    plan = _Plan(governor)
    return plan.source() if plan.written else ""


@lru_cache(maxsize=128)
def _compiled(text: str) -> CodeType:
    # Governors with the same limits share their code; only the objects it reads differ.
    return compile(text, "<haltwise hot path>", "exec")


class _Plan:
    """Which events get a handler, and the names the written code reads."""

    def __init__(self, governor: Governor) -> None:
        self.governor = governor
        self.slots: list[Slot] = []
        self.events: dict[type, tuple[tuple[_Check, ...], tuple[_Check, ...]]] = {}
        self.written: dict[type, tuple[tuple[_Check, ...], tuple[_Check, ...]]] = {}
        if governor._parent is not None or governor._phases or governor._shared_checks:
            return
        tables = governor._fast_tables
        # Which events get a handler depends on the limits alone: found once for them.
        blueprint = governor._blueprint
        if blueprint.hot_events is None:
            blueprint.hot_events = tuple(
                event_type
                for event_type, before in _BEFORE.items()
                if all(_inlined(check, before, governor) for check in tables[event_type][0])
                and all(
                    _inlined(check, _AFTER.get(event_type, ()), governor)
                    for check in tables[event_type][1]
                )
            )
        for event_type in blueprint.hot_events:
            pre, post = tables[event_type]
            self.events[event_type] = (pre, post)
            if event_type in _WRITTEN:
                self.written[event_type] = (pre, post)
                for _, slot, _, _ in (*pre, *post):
                    assert slot is not None
                    if slot not in self.slots:
                        self.slots.append(slot)

    def checks(self, checks: tuple[_Check, ...]) -> tuple[Check, ...]:
        """``checks`` as the dispatch's LLM-call handlers run them."""
        made = []
        for limit, slot, _, _ in checks:
            assert slot is not None
            made.append(Check(limit, slot, slot.tally is self.governor._run))
        return tuple(made)

    def arguments(self) -> tuple[Any, ...]:
        governor = self.governor
        return (
            governor,
            governor._dispatch,
            governor._run,
            governor._session,
            governor._in_flight,
            governor._after_response,
            CONTINUE,
            units,
            # Made now rather than at the first request: the cost limit prices every one.
            governor._pricing() if self.priced() else None,
            tuple(self.slots),
        )

    def priced(self) -> bool:
        """Whether a written handler prices every call (a cost limit is among the checks)."""
        return self.governor._needs_prices and any(
            event_type in self.written for event_type in (ModelRequest, ModelResponse)
        )

    def slot(self, slot: Slot | None) -> str:
        assert slot is not None
        return f"slot{self.slots.index(slot)}"

    def tally(self, slot: Slot | None) -> str:
        assert slot is not None
        return "session" if slot.tally is self.governor._session else "run"

    def source(self) -> str:
        lines = [
            "def build(",
            "    governor, dispatch, run, session, flight, after_response,",
            "    CONTINUE, units, pricer, slots,",
            "):",
            f"    {', '.join(f'slot{i}' for i in range(len(self.slots)))}, = slots"
            if self.slots
            else "    pass",
            "    requests = flight.requests",
        ]
        if self.priced():
            lines += [
                "    worst_units = pricer.worst_units",
                "    unit_price = pricer.units",
                # A model's flat per-token prices, once the pricer has resolved it (the pricer
                # empties this when its data changes); a model not in it is priced by the pricer.
                "    flat = getattr(pricer, 'flat_units', {})",
            ]
        writers = {
            TurnStarting: self._turn_starting,
            ModelRequest: self._model_request,
            ModelResponse: self._model_response,
            ToolCall: self._tool_call,
        }
        for event_type, (pre, post) in self.written.items():
            lines.append("")
            lines += [f"    {line}" if line else "" for line in writers[event_type](pre, post)]
        lines.append("")
        lines.append(f"    return ({''.join(f'on_{_name(t)}, ' for t in self.written)})")
        return "\n".join(lines) + "\n"

    # Each writer returns one handler's lines. ``governor._on_*`` is the general handler for
    # the event, called whenever the generated one would not decide as it does.

    def _turn_starting(self, pre: tuple[_Check, ...], post: tuple[_Check, ...]) -> list[str]:
        lines = [
            "def on_turn_starting(event):",
            "    if dispatch.early is not None:",
            "        return governor._on_turn_starting(event)",
        ]
        for limit, slot, _, _ in pre:
            name, tally = self.slot(slot), self.tally(slot)
            lines += [
                f"    # {limit!r}",
                f"    if {tally}.turns - {name}.baseline >= {limit.maximum} + {name}.extra:",
                "        return governor._on_turn_starting(event)",
            ]
        return [*lines, "    run.turns += 1", "    session.turns += 1", "    return CONTINUE"]

    def _tool_call(self, pre: tuple[_Check, ...], post: tuple[_Check, ...]) -> list[str]:
        lines = [
            "def on_tool_call(event):",
            "    if dispatch.early is not None:",
            "        return dispatch.on_tool_call(event)",
            "    name = event.name",
        ]
        for limit, slot, _, _ in pre:
            name, tally = self.slot(slot), self.tally(slot)
            if limit.tool is None:
                used = f"{tally}.tool_calls"
                test = ""
            else:
                used = f"{tally}.tool_calls_by_name.get({limit.tool!r}, 0)"
                test = f"name == {limit.tool!r} and "
            lines += [
                f"    # {limit!r}",
                f"    if {test}{used} - {name}.baseline >= {limit.maximum} + {name}.extra:",
                "        return dispatch.on_tool_call(event)",
            ]
        return [
            *lines,
            "    run.tool_calls += 1",
            "    session.tool_calls += 1",
            "    by_name = run.tool_calls_by_name",
            "    by_name[name] = by_name.get(name, 0) + 1",
            "    by_name = session.tool_calls_by_name",
            "    by_name[name] = by_name.get(name, 0) + 1",
            "    return CONTINUE",
        ]

    def _model_request(self, pre: tuple[_Check, ...], post: tuple[_Check, ...]) -> list[str]:
        # Mirrors Governor._on_model_request and _count_request when every check passes and
        # no token limit lowers max_tokens (then each allowance is None).
        lines = [
            "def on_model_request(event):",
            f"    if dispatch.early is not None or len(requests) >= {MAX_IN_FLIGHT}:",
            "        return governor._on_model_request(event)",
            "    wanted = event.max_tokens",
            "    asked = event.input_tokens",
            # The prompt's size, as each tally estimates it when the driver does not say.
            "    prompt = run.last_input_tokens if asked is None else asked",
        ]
        if any(self.tally(slot) == "session" for _, slot, _, _ in pre):
            lines.append(
                "    prompt_session = session.last_input_tokens if asked is None else asked"
            )
        for limit, slot, _, _ in pre:
            name, tally = self.slot(slot), self.tally(slot)
            lines.append(f"    # {limit!r}")
            if isinstance(limit, _MaxModelCalls):
                lines += [
                    f"    if {tally}.model_calls - {name}.baseline >= {limit.maximum} + "
                    f"{name}.extra:",
                    "        return governor._on_model_request(event)",
                ]
                continue
            prompt = "prompt" if tally == "run" else "prompt_session"
            # ``free`` is the cap less what is spent or held: the general checks' ``used >= cap``
            # is ``free <= 0``, and ``used + more > cap`` is ``more > free``. (One name, reused:
            # a run's dollars are large ints, and none is kept past its check.)
            if isinstance(limit, _MaxCost):
                lines += [
                    f"    free = {limit.units} + {name}.extra - "
                    f"({tally}.cost - {name}.baseline + flight.cost)",
                    "    if free <= 0:",
                    "        return governor._on_model_request(event)",
                    "    if wanted is not None:",
                    "        found = flat.get(event.model)",
                    f"        if found is None or ({prompt} | wanted) < 0:",
                    f"            worst_{tally} = worst_units(event.model, {prompt}, wanted) "
                    "if event.model else None",
                    "        else:",
                    f"            worst_{tally} = {prompt} * found[4] + wanted * found[1]",
                    f"        if worst_{tally} is None or worst_{tally} > free "
                    f"or worst_{tally} > {MAX_CALL_COST}:",
                    "            return governor._on_model_request(event)",
                ]
                continue
            kind = limit.kind
            used = {
                "input": f"{tally}.input_tokens + flight.input_tokens",
                "output": f"{tally}.output_tokens + flight.output_tokens",
                "total": f"{tally}.input_tokens + {tally}.output_tokens + flight.input_tokens"
                " + flight.output_tokens",
            }[kind]
            lines.append(f"    free = {limit.maximum} + {name}.extra - ({used} - {name}.baseline)")
            if kind == "input":
                lines += [
                    "    if free <= 0 or (asked is not None and asked > free):",
                    "        return governor._on_model_request(event)",
                ]
                continue
            room = "free" if kind == "output" else f"free - {prompt}"
            lines += [
                f"    if wanted is None or free <= 0 or not 0 < wanted <= {room}:",
                "        return governor._on_model_request(event)",
                f"    {name}.state = None",
            ]
        lines += [
            "    run.model_calls += 1",
            "    session.model_calls += 1",
            "    output = 0 if wanted is None else wanted",
        ]
        if not self.governor._needs_prices:
            lines.append("    cost = None")
        elif any(
            isinstance(limit, _MaxCost) and self.tally(slot) == "run" for limit, slot, _, _ in pre
        ):
            # The run's cost limit priced this very request (an empty model name raised).
            lines.append("    cost = None if wanted is None else worst_run")
        else:
            lines.append(
                "    cost = governor.request_cost(event.model, prompt, wanted) "
                "if wanted is not None and event.model else None"
            )
        return [
            *lines,
            "    requests.append((event.request_id, event.model, prompt, output, cost, ()))",
            "    flight.input_tokens += prompt",
            "    flight.output_tokens += output",
            "    if cost is not None:",
            "        flight.cost += cost",
            "    return CONTINUE",
        ]

    def _model_response(self, pre: tuple[_Check, ...], post: tuple[_Check, ...]) -> list[str]:
        # Mirrors Governor._count_response and _add_usage for an answered response whose
        # request (if any) holds nothing of a shared budget; then the checks after it.
        room = f"> {TALLY_ROOM}"  # a total past it takes no more: the general handler says so
        lines = [
            "def on_model_response(event):",
            "    if (",
            "        dispatch.early is not None",
            "        or not event.answered",
            f"        or run.input_tokens {room} or run.output_tokens {room}",
            f"        or session.input_tokens {room} or session.output_tokens {room}",
            f"        or run.cost > {COST_ROOM} or session.cost > {COST_ROOM}",
            "    ):",
            "        return governor._on_model_response(event)",
            "    if requests:",
            "        request_id = event.request_id",
            "        index = flight.index(request_id) if request_id else 0",
            "        if requests[index][5]:",
            "            return governor._on_model_response(event)",
            "    input_tokens = event.input_tokens",
            "    output_tokens = event.output_tokens",
            "    cache_read = event.cache_read_tokens",
            "    cache_write = event.cache_write_tokens",
            "    given = event.cost",
            "    model = event.model",
            "    if given is not None:",
            "        cost = units(given)",
        ]
        if self.governor._needs_prices:
            lines += [
                "    elif model:",
                "        found = flat.get(model)",
                # The counts are ints >= 0, the cached tokens among the input ones (check).
                "        if found is None:",
                "            cost = unit_price(",
                "                model, input_tokens, output_tokens, cache_read, cache_write",
                "            )",
                "        else:",
                "            cost = (",
                "                (input_tokens - cache_read - cache_write) * found[0]",
                "                + output_tokens * found[1]",
                "                + cache_read * found[2]",
                "                + cache_write * found[3]",
                "            )",
                "    else:",
                "        cost = None",
                # Past it, the general handler says the price is wrong, counting nothing.
                f"    if cost is not None and cost > {MAX_CALL_COST}:",
                "        return governor._on_model_response(event)",
            ]
        else:  # the pricer is made when the first response is priced
            lines += [
                "    else:",
                "        cost = governor._price(",
                "            model, input_tokens, output_tokens, cache_read, cache_write",
                "        )",
            ]
        lines += [
            # Priced before the request is taken out: the price may send the event on.
            "    if requests:",
            "        reservation = requests[index]",
            # Read, then deleted: ``pop`` is a method call.
            "        del requests[index]",
            "        _, _, prompt, output, held, _ = reservation",
            "        flight.input_tokens -= prompt",
            "        flight.output_tokens -= output",
            "        if held is not None:",
            "            flight.cost -= held",
            "    run.input_tokens += input_tokens",
            "    session.input_tokens += input_tokens",
            "    run.output_tokens += output_tokens",
            "    session.output_tokens += output_tokens",
            "    run.last_input_tokens = session.last_input_tokens = input_tokens",
            "    if cache_read:",
            "        run.cache_read_tokens += cache_read",
            "        session.cache_read_tokens += cache_read",
            "    if cache_write:",
            "        run.cache_write_tokens += cache_write",
            "        session.cache_write_tokens += cache_write",
            "    if cost is None:",
            "        run.cost_known = session.cost_known = False",
            "    else:",
            "        run.cost += cost",
            "        session.cost += cost",
            "    if event.text:",
            "        governor._last_text = event.text",
        ]
        if self.governor._needs_prices:
            lines += ["    if cost is None:", "        return after_response(event, cost)"]
        for limit, slot, _, _ in post:
            name, tally = self.slot(slot), self.tally(slot)
            if isinstance(limit, _MaxCost):
                used, cap = f"{tally}.cost", limit.units
            else:
                used = {
                    "input": f"{tally}.input_tokens",
                    "output": f"{tally}.output_tokens",
                    "total": f"{tally}.input_tokens + {tally}.output_tokens",
                }[limit.kind]
                cap = limit.maximum
            lines += [
                f"    # {limit!r}",
                f"    if {used} - {name}.baseline > {cap} + {name}.extra:",
                "        return after_response(event, cost)",
            ]
        return [*lines, "    return CONTINUE"]


def _name(event_type: type) -> str:
    return {
        TurnStarting: "turn_starting",
        ModelRequest: "model_request",
        ModelResponse: "model_response",
        ToolCall: "tool_call",
    }[event_type]


def _inlined(check: _Check, kinds: tuple[type[Leaf], ...], governor: Governor) -> bool:
    """Whether a fast handler can stand in for ``check``: a limit of a kind it inlines,
    counted on the governor's own tallies, that can only trip (no note, no shadow)."""
    limit, slot, ctx, _ = check
    return (
        type(limit) in kinds
        and slot is not None
        and ctx is governor
        and limit.share is None
        and limit.warn_at is None
        and not limit.shadow
    )
