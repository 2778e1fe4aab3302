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
- ``ModelRequest`` and ``ModelResponse`` (an LLM call): the dispatch's own handlers
  (``dispatch.py``, compiled by Cython when haltwise was installed with a C compiler), given
  the limits' numbers and slots as ``Check`` objects.

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
from .dispatch import Check
from .events import ModelRequest, ModelResponse, ToolCall, TurnStarting
from .limits import Leaf, _MaxCost, _MaxModelCalls, _MaxTokens, _MaxToolCalls, _MaxTurns
from .state import Slot

if TYPE_CHECKING:
    from .governor import Governor

__all__ = ["compile_handlers", "source"]

Handler = Callable[[Any], Decision]
#: A check of the governor's tables: (limit, its slot or None, the context it reads).
_Check = tuple[Any, "Slot | None", Any]
#: The limits each fast handler can decide, by the event it checks them before.
_BEFORE: dict[type, tuple[type[Leaf], ...]] = {
    TurnStarting: (_MaxTurns,),
    ModelRequest: (_MaxModelCalls, _MaxTokens, _MaxCost),
    ModelResponse: (),
    ToolCall: (_MaxToolCalls,),
}
#: ... and after (a response's usage is counted first, then checked).
_AFTER: dict[type, tuple[type[Leaf], ...]] = {ModelResponse: (_MaxTokens, _MaxCost)}
#: The events whose handlers are written here; the dispatch has its own for the others.
_WRITTEN = (TurnStarting, ToolCall)


def compile_handlers(governor: Governor) -> dict[type, Handler]:
    """Handlers for the events whose checks in the governor's fast tables can all be inlined
    (none when its configuration is not the common one)."""
    plan = _Plan(governor)
    handlers: dict[type, Handler] = {}
    if plan.written:
        namespace: dict[str, Any] = {}
        exec(_compiled(plan.source()), namespace)  # our own source, written from our limits
        written: tuple[Handler, ...] = namespace["build"](*plan.arguments())
        handlers.update(zip(plan.written, written, strict=True))
    request = plan.events.get(ModelRequest)
    response = plan.events.get(ModelResponse)
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
        for event_type, before in _BEFORE.items():
            pre, post = tables[event_type]
            after = _AFTER.get(event_type, ())
            if all(_inlined(check, before, governor) for check in pre) and all(
                _inlined(check, after, governor) for check in post
            ):
                self.events[event_type] = (pre, post)
                if event_type in _WRITTEN:
                    self.written[event_type] = (pre, post)
                    for _, slot, _ in (*pre, *post):
                        assert slot is not None
                        if slot not in self.slots:
                            self.slots.append(slot)

    def checks(self, checks: tuple[_Check, ...]) -> tuple[Check, ...]:
        """``checks`` as the dispatch's LLM-call handlers run them."""
        made = []
        for limit, slot, _ in checks:
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
            CONTINUE,
            tuple(self.slots),
        )

    def slot(self, slot: Slot | None) -> str:
        assert slot is not None
        return f"slot{self.slots.index(slot)}"

    def tally(self, slot: Slot | None) -> str:
        assert slot is not None
        return "session" if slot.tally is self.governor._session else "run"

    def source(self) -> str:
        lines = [
            "def build(governor, dispatch, run, session, CONTINUE, slots):",
            f"    {', '.join(f'slot{i}' for i in range(len(self.slots)))}, = slots"
            if self.slots
            else "    pass",
        ]
        writers = {TurnStarting: self._turn_starting, ToolCall: self._tool_call}
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
        for limit, slot, _ in pre:
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
            "        return governor._on_tool_call(event)",
            "    name = event.name",
        ]
        for limit, slot, _ in pre:
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
                "        return governor._on_tool_call(event)",
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


def _name(event_type: type) -> str:
    return {TurnStarting: "turn_starting", ToolCall: "tool_call"}[event_type]


def _inlined(check: _Check, kinds: tuple[type[Leaf], ...], governor: Governor) -> bool:
    """Whether a fast handler can stand in for ``check``: a limit of a kind it inlines,
    counted on the governor's own tallies, that can only trip (no note, no shadow)."""
    limit, slot, ctx = check
    return (
        type(limit) in kinds
        and slot is not None
        and ctx is governor
        and limit.share is None
        and limit.warn_at is None
        and not limit.shadow
    )
