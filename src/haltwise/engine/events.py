"""The events a driver reports to the governor, as frozen value types.

A driver (a hand-written loop, a framework adapter, the haltwise agent, the replay of a recorded
run) describes what its agent is about to do or has just done with one of these; the governor
answers each with one decision. Nothing here does any work: these are values.

Order within one run::

    RunStarted
      ( TurnStarting  ModelRequest ModelResponse  (ToolCall ToolResult)*  TurnEnded )*
      Injected may come at any point; it never starts a new run
      Progress may come at any point: the agent or a tool says what moved
    RunEnded

Compiled (``haltwise/_compiled.py``), each is a frozen extension type written by Cython's
dataclass support, which keeps a few of its freed objects to build the next ones in;
interpreted, a frozen slotted dataclass (``_pure.py``). Both have the same fields, defaults,
equality, hash, repr, ``dataclasses.fields`` and ``replace``, and pickle.
Assigning to a field raises ``AttributeError`` (``FrozenInstanceError``, a subclass of it, when
interpreted). ``events.pxd`` declares the fields the compiled dispatch reads directly.

Building an event checks nothing, so that drivers build them cheaply; the governor checks each
one where it comes in (``check``), before anything is counted: a field of the wrong kind (a
count of tokens given as a str, a negative cost, a tool name that is None) raises
``InvalidValueError`` naming the event, the field and what it should be, and the governor's
counts stay as they were.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from .errors import InvalidValueError

if TYPE_CHECKING:
    from . import _pure as cython
else:
    try:
        import cython

        if not cython.compiled:
            raise ImportError  # Cython's own stand-ins: haltwise's are the same everywhere
    except ImportError:
        from . import _pure as cython

__all__ = [
    "MAX_CALL_DOLLARS",
    "MAX_COUNT",
    "Event",
    "Injected",
    "ModelRequest",
    "ModelResponse",
    "Progress",
    "RunEnded",
    "RunStarted",
    "ToolCall",
    "ToolResult",
    "TurnEnded",
    "TurnStarting",
    "check",
]

#: The largest count an event may carry (tokens, tool calls): 2^53 - 1, the largest integer a
#: JSON reader in any language holds exactly, and far past any real response. The governor's
#: totals of such counts are C integers in the compiled build (``state.py``).
MAX_COUNT = 2**53 - 1
#: The most one model call may cost, in dollars: a hundred quadrillion, far past any bill. The
#: governor's dollar totals are C integers in the compiled build (``state.py``).
MAX_CALL_DOLLARS = 10**17
_MAX_CALL = Decimal(MAX_CALL_DOLLARS)


@cython.dataclasses.dataclass(frozen=True)
@cython.freelist(8)
@cython.cclass
class RunStarted:
    """A user prompt starts a run: run-scoped counts reset and the run's clock starts."""

    #: The user's prompt.
    prompt: str = ""
    #: An id for the run; the governor makes one when it is not given.
    run_id: str | None = None


@cython.dataclasses.dataclass(frozen=True)
@cython.freelist(8)
@cython.cclass
class TurnStarting:
    """A turn (one model round trip with its tool calls) is about to run."""


@cython.dataclasses.dataclass(frozen=True)
@cython.freelist(8)
@cython.cclass
class ModelRequest:
    """A model call is about to be sent."""

    #: The model's name, as the provider knows it (provider prefixes are fine).
    model: str = ""
    #: The request's ``max_tokens``: with a cost limit, the worst-case cost is reserved.
    max_tokens: int | None = None
    #: The prompt's size in tokens when the driver knows it; else the last response's is used.
    input_tokens: int | None = None
    #: Pairs the request with its ``ModelResponse`` when several are in flight (else first in,
    #: first out).
    request_id: str = ""
    #: Whether the driver can send the request with a lower ``max_tokens`` when the decision
    #: says so (``decision.max_tokens``). When it cannot, a request whose ``max_tokens`` could
    #: pass a token limit is refused before it is sent.
    adjustable: bool = True


@cython.dataclasses.dataclass(frozen=True)
@cython.freelist(8)
@cython.cclass
class ModelResponse:
    """A model call returned, with its usage."""

    model: str = ""
    #: Prompt tokens, cached ones included.
    input_tokens: int = 0
    #: Completion tokens, reasoning ones included.
    output_tokens: int = 0
    #: How many of ``input_tokens`` were read from the provider's cache.
    cache_read_tokens: int = 0
    #: How many of ``input_tokens`` were written to the provider's cache.
    cache_write_tokens: int = 0
    #: The dollars actually billed, when the provider says; otherwise the pricer computes it.
    cost: Decimal | None = None
    #: The text the model wrote (kept as the run's partial output).
    text: str | None = None
    #: How many tool calls the response asked for.
    tool_calls: int = 0
    #: The ``request_id`` of the request this answers ("" : the oldest one in flight).
    request_id: str = ""
    #: False when the request was sent and no answer came (a timeout, a cancel, a crash): it is
    #: then counted at what its request reserved (its prompt and ``max_tokens``), never as free.
    answered: bool = True


@cython.dataclasses.dataclass(frozen=True)
@cython.freelist(8)
@cython.cclass
class ToolCall:
    """A tool is about to be called."""

    name: str
    #: The arguments, as a mapping or as the raw JSON text the model wrote.
    arguments: Mapping[str, Any] | str = ""
    call_id: str = ""


@cython.dataclasses.dataclass(frozen=True)
@cython.freelist(8)
@cython.cclass
class ToolResult:
    """A tool call returned."""

    name: str
    content: str = ""
    call_id: str = ""
    is_error: bool = False
    #: The exit code, for tools that run commands.
    exit_code: int | None = None


@cython.dataclasses.dataclass(frozen=True)
@cython.freelist(8)
@cython.cclass
class TurnEnded:
    """A turn finished."""

    #: The assistant's text for the turn, if any.
    text: str | None = None


@cython.dataclasses.dataclass(frozen=True)
@cython.freelist(8)
@cython.cclass
class Injected:
    """A user message arrived mid-run. It is context for the same run: no count resets."""

    text: str = ""


@cython.dataclasses.dataclass(frozen=True)
@cython.freelist(8)
@cython.cclass
class Progress:
    """The agent or a tool reports progress: how a stuck detector tells paging from looping."""

    #: What moved, e.g. ``"failing_tests"`` or ``"lines_read"``.
    metric: str = ""
    #: Its new value, when it has one.
    value: float | None = None
    note: str = ""


@cython.dataclasses.dataclass(frozen=True)
@cython.freelist(8)
@cython.cclass
class RunEnded:
    """The agent finished the run on its own."""

    #: The run's final answer.
    output: str | None = None


Event = (
    RunStarted
    | TurnStarting
    | ModelRequest
    | ModelResponse
    | ToolCall
    | ToolResult
    | TurnEnded
    | Injected
    | Progress
    | RunEnded
)


def check(event: object) -> None:
    """Raise ``InvalidValueError`` unless ``event`` is one of these events and each of its
    fields holds what it says: counts ints from 0 to ``MAX_COUNT``, a cost a finite ``Decimal``
    >= 0, texts str (or None where that is allowed), flags bool. ``Governor.handle`` calls it
    first, so that nothing is counted from an event it cannot count right.

    The frequent events are first tested for the common case (exact types, in range) in one
    expression each: interpreted, that costs a fraction of reading ``_FIELDS``, which also takes
    subclasses of int and str and names the first field that is wrong."""
    if type(event) is ToolResult:
        if _plain_tool_result(event):
            return
    elif type(event) is ToolCall:
        if _plain_tool_call(event):
            return
    elif type(event) is ModelResponse:
        if _plain_model_response(event):
            return
    elif type(event) is ModelRequest:
        if _plain_model_request(event):
            return
    elif type(event) is TurnStarting:
        return
    fields = _FIELDS.get(type(event))
    if fields is None:
        raise InvalidValueError(
            "Governor.handle(event)",
            event,
            "one of the events in haltwise.engine.events (all exported from haltwise: "
            "haltwise.TurnStarting(), haltwise.ToolCall(name), ...)",
        )
    for field, holds, expected in fields:
        if not holds(event):
            source = f"{type(event).__name__}.{field}"
            raise InvalidValueError(source, getattr(event, field), expected)


def _plain_tool_result(result: ToolResult) -> bool:
    exit_code = result.exit_code
    return (
        type(result.name) is str
        and type(result.content) is str
        and type(result.call_id) is str
        and type(result.is_error) is bool
        and (exit_code is None or type(exit_code) is int)
    )


def _plain_tool_call(call: ToolCall) -> bool:
    arguments = call.arguments
    return (
        type(call.name) is str
        and (type(arguments) is str or type(arguments) is dict)
        and type(call.call_id) is str
    )


def _plain_model_response(response: ModelResponse) -> bool:
    cost = response.cost
    if not cython.compiled:
        prompt = response.input_tokens
        read = response.cache_read_tokens
        written = response.cache_write_tokens
        output = response.output_tokens
        calls = response.tool_calls
        return (
            type(response.model) is str
            and type(prompt) is int
            and type(read) is int
            and type(written) is int
            and read >= 0
            and written >= 0
            and read + written <= prompt <= MAX_COUNT
            and type(output) is int
            and 0 <= output <= MAX_COUNT
            and (cost is None or (type(cost) is Decimal and _dollars(cost)))
            and (response.text is None or type(response.text) is str)
            and type(calls) is int
            and 0 <= calls <= MAX_COUNT
            and type(response.request_id) is str
            and type(response.answered) is bool
        )
    # Compiled, the counts are compared as C integers (``_count_of``, events.pxd).
    prompt_count = _count_of(response.input_tokens)
    read_count = _count_of(response.cache_read_tokens)
    written_count = _count_of(response.cache_write_tokens)
    return (
        type(response.model) is str
        and read_count >= 0
        and written_count >= 0
        and read_count + written_count <= prompt_count
        and _count_of(response.output_tokens) >= 0
        and (cost is None or (type(cost) is Decimal and _dollars(cost)))
        and (response.text is None or type(response.text) is str)
        and _count_of(response.tool_calls) >= 0
        and type(response.request_id) is str
        and type(response.answered) is bool
    )


def _plain_model_request(request: ModelRequest) -> bool:
    wanted = request.max_tokens
    prompt = request.input_tokens
    if not cython.compiled:
        return (
            type(request.model) is str
            and (wanted is None or (type(wanted) is int and 0 <= wanted <= MAX_COUNT))
            and (prompt is None or (type(prompt) is int and 0 <= prompt <= MAX_COUNT))
            and type(request.request_id) is str
            and type(request.adjustable) is bool
        )
    return (
        type(request.model) is str
        and (wanted is None or _count_of(wanted) >= 0)
        and (prompt is None or _count_of(prompt) >= 0)
        and type(request.request_id) is str
        and type(request.adjustable) is bool
    )


if not cython.compiled:
    # Compiled, events.pxd reads a count as a C integer; the plain tests above call it only
    # compiled (interpreted, they compare the ints themselves, at a fraction of a call's cost).

    def _count_of(value: object) -> int:
        """``value`` when it is an int (no subclass) from 0 to ``MAX_COUNT``, else -1."""
        if type(value) is int and 0 <= value <= MAX_COUNT:
            return value
        return -1


def _text(value: object) -> bool:
    return isinstance(value, str)


def _text_or_none(value: object) -> bool:
    return value is None or isinstance(value, str)


def _count(value: object) -> bool:
    """Whether ``value`` is an int (a subclass will do, but not a bool) from 0 to MAX_COUNT."""
    return isinstance(value, int) and type(value) is not bool and 0 <= value <= MAX_COUNT


def _count_or_none(value: object) -> bool:
    return value is None or _count(value)


def _number_or_none(value: object) -> bool:
    if value is None or (isinstance(value, int) and type(value) is not bool):
        return True  # an int of any size is finite (and math.isfinite cannot take every one)
    return isinstance(value, float) and math.isfinite(value)


def _dollars(cost: Decimal) -> bool:
    """Whether ``cost`` is plainly a call's dollars: finite, positive or zero (not -0) and at
    most ``MAX_CALL_DOLLARS``."""
    return cost.is_finite() and not cost.is_signed() and cost <= _MAX_CALL


def _dollars_or_none(value: object) -> bool:
    # A negative cost would take dollars off the count.
    return value is None or (
        isinstance(value, Decimal) and value.is_finite() and 0 <= value <= _MAX_CALL
    )


# What each kind of field must hold, as the errors say it.
_TEXT = "a str"
_TEXT_OR_NONE = "None or a str"
_COUNT = "a count, an int from 0 to 2^53 - 1 (not a bool)"
_COUNT_OR_NONE = f"None or {_COUNT}"
_FLAG = "True or False"

#: Each event's fields in order, each with a test of the event and what the field must hold.
_FIELDS: dict[type, tuple[tuple[str, Callable[[Any], bool], str], ...]] = {
    RunStarted: (
        ("prompt", lambda event: _text(event.prompt), _TEXT),
        ("run_id", lambda event: _text_or_none(event.run_id), _TEXT_OR_NONE),
    ),
    ModelRequest: (
        ("model", lambda event: _text(event.model), _TEXT),
        ("max_tokens", lambda event: _count_or_none(event.max_tokens), _COUNT_OR_NONE),
        ("input_tokens", lambda event: _count_or_none(event.input_tokens), _COUNT_OR_NONE),
        ("request_id", lambda event: _text(event.request_id), _TEXT),
        ("adjustable", lambda event: type(event.adjustable) is bool, _FLAG),
    ),
    ModelResponse: (
        ("model", lambda event: _text(event.model), _TEXT),
        ("input_tokens", lambda event: _count(event.input_tokens), _COUNT),
        ("output_tokens", lambda event: _count(event.output_tokens), _COUNT),
        ("cache_read_tokens", lambda event: _count(event.cache_read_tokens), _COUNT),
        ("cache_write_tokens", lambda event: _count(event.cache_write_tokens), _COUNT),
        (
            "cache_read_tokens",
            lambda event: event.cache_read_tokens <= event.input_tokens,
            "at most input_tokens, which counts the cached tokens too",
        ),
        (
            "cache_write_tokens",
            lambda event: event.cache_write_tokens <= event.input_tokens - event.cache_read_tokens,
            "at most input_tokens less cache_read_tokens: input_tokens counts the cached tokens "
            "too",
        ),
        (
            "cost",
            lambda event: _dollars_or_none(event.cost),
            "None or a Decimal of dollars from 0 to 10^17, such as Decimal('0.0042') (a float "
            "is not exact: pass Decimal(str(x)))",
        ),
        ("text", lambda event: _text_or_none(event.text), _TEXT_OR_NONE),
        ("tool_calls", lambda event: _count(event.tool_calls), _COUNT),
        ("request_id", lambda event: _text(event.request_id), _TEXT),
        ("answered", lambda event: type(event.answered) is bool, _FLAG),
    ),
    ToolCall: (
        ("name", lambda event: _text(event.name), _TEXT),
        (
            "arguments",
            lambda event: isinstance(event.arguments, str | Mapping),
            "a mapping of the arguments, or the JSON text of them",
        ),
        ("call_id", lambda event: _text(event.call_id), _TEXT),
    ),
    ToolResult: (
        ("name", lambda event: _text(event.name), _TEXT),
        ("content", lambda event: _text(event.content), "a str: the tool's output as text"),
        ("call_id", lambda event: _text(event.call_id), _TEXT),
        ("is_error", lambda event: type(event.is_error) is bool, _FLAG),
        (
            "exit_code",
            lambda event: (
                event.exit_code is None
                or (isinstance(event.exit_code, int) and type(event.exit_code) is not bool)
            ),
            "None or an int",
        ),
    ),
    TurnEnded: (("text", lambda event: _text_or_none(event.text), _TEXT_OR_NONE),),
    Injected: (("text", lambda event: _text(event.text), _TEXT),),
    Progress: (
        ("metric", lambda event: _text(event.metric), _TEXT),
        ("value", lambda event: _number_or_none(event.value), "None or a finite number"),
        ("note", lambda event: _text(event.note), _TEXT),
    ),
    RunEnded: (("output", lambda event: _text_or_none(event.output), _TEXT_OR_NONE),),
}
