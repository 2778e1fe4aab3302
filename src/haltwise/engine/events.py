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
dataclass support; interpreted, a frozen slotted dataclass (``_pure.py``). Both have the same
fields, defaults, equality, hash, repr, ``dataclasses.fields`` and ``replace``, and pickle.
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
from collections.abc import Mapping
from decimal import Decimal
from typing import TYPE_CHECKING, Any, NoReturn

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


@cython.dataclasses.dataclass(frozen=True)
@cython.cclass
class RunStarted:
    """A user prompt starts a run: run-scoped counts reset and the run's clock starts."""

    #: The user's prompt.
    prompt: str = ""
    #: An id for the run; the governor makes one when it is not given.
    run_id: str | None = None


@cython.dataclasses.dataclass(frozen=True)
@cython.cclass
class TurnStarting:
    """A turn (one model round trip with its tool calls) is about to run."""


@cython.dataclasses.dataclass(frozen=True)
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
@cython.cclass
class ToolCall:
    """A tool is about to be called."""

    name: str
    #: The arguments, as a mapping or as the raw JSON text the model wrote.
    arguments: Mapping[str, Any] | str = ""
    call_id: str = ""


@cython.dataclasses.dataclass(frozen=True)
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
@cython.cclass
class TurnEnded:
    """A turn finished."""

    #: The assistant's text for the turn, if any.
    text: str | None = None


@cython.dataclasses.dataclass(frozen=True)
@cython.cclass
class Injected:
    """A user message arrived mid-run. It is context for the same run: no count resets."""

    text: str = ""


@cython.dataclasses.dataclass(frozen=True)
@cython.cclass
class Progress:
    """The agent or a tool reports progress: how a stuck detector tells paging from looping."""

    #: What moved, e.g. ``"failing_tests"`` or ``"lines_read"``.
    metric: str = ""
    #: Its new value, when it has one.
    value: float | None = None
    note: str = ""


@cython.dataclasses.dataclass(frozen=True)
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


# What each kind of field must hold, as the errors say it.
_TEXT = "a str"
_TEXT_OR_NONE = "None or a str"
_COUNT = "a count, an int from 0 to 2^53 - 1 (not a bool)"
_COUNT_OR_NONE = f"None or {_COUNT}"
_FLAG = "True or False"


def check(event: object) -> None:
    """Raise ``InvalidValueError`` unless ``event`` is one of these events and each of its
    fields holds what it says: counts ints from 0 to ``MAX_COUNT``, a cost a finite ``Decimal``
    >= 0, texts str (or None where that is allowed), flags bool. ``Governor.handle`` calls it
    first, so that nothing is counted from an event it cannot count right."""
    # The most frequent first.
    if type(event) is ToolResult:
        _check_tool_result(event)
    elif type(event) is ToolCall:
        _check_tool_call(event)
    elif type(event) is ModelResponse:
        _check_model_response(event)
    elif type(event) is ModelRequest:
        _check_model_request(event)
    elif type(event) is TurnStarting:
        pass
    elif type(event) is TurnEnded:
        if not _text_or_none(event.text):
            _invalid(event, "text", _TEXT_OR_NONE)
    elif type(event) is RunStarted:
        if not _text(event.prompt):
            _invalid(event, "prompt", _TEXT)
        if not _text_or_none(event.run_id):
            _invalid(event, "run_id", _TEXT_OR_NONE)
    elif type(event) is RunEnded:
        if not _text_or_none(event.output):
            _invalid(event, "output", _TEXT_OR_NONE)
    elif type(event) is Injected:
        if not _text(event.text):
            _invalid(event, "text", _TEXT)
    elif type(event) is Progress:
        _check_progress(event)
    else:
        raise InvalidValueError(
            "Governor.handle(event)", event, "one of the events in haltwise.events"
        )


# Each check of a frequent event first tests the common case (exact types, in range) in one
# expression, which interpreted costs a fraction of the field-by-field checks below it; those
# also take subclasses, and name the first field that is wrong.


def _check_model_request(request: ModelRequest) -> None:
    wanted = request.max_tokens
    prompt = request.input_tokens
    if (
        type(request.model) is str
        and (wanted is None or (type(wanted) is int and 0 <= wanted <= MAX_COUNT))
        and (prompt is None or (type(prompt) is int and 0 <= prompt <= MAX_COUNT))
        and type(request.request_id) is str
        and type(request.adjustable) is bool
    ):
        return
    if not _text(request.model):
        _invalid(request, "model", _TEXT)
    if not _count_or_none(request.max_tokens):
        _invalid(request, "max_tokens", _COUNT_OR_NONE)
    if not _count_or_none(request.input_tokens):
        _invalid(request, "input_tokens", _COUNT_OR_NONE)
    if not _text(request.request_id):
        _invalid(request, "request_id", _TEXT)
    if not _flag(request.adjustable):
        _invalid(request, "adjustable", _FLAG)


def _check_model_response(response: ModelResponse) -> None:
    prompt = response.input_tokens
    read = response.cache_read_tokens
    written = response.cache_write_tokens
    output = response.output_tokens
    calls = response.tool_calls
    cost = response.cost
    if (
        type(response.model) is str
        and type(prompt) is int
        and type(read) is int
        and type(written) is int
        and read >= 0
        and written >= 0
        and read + written <= prompt <= MAX_COUNT
        and type(output) is int
        and 0 <= output <= MAX_COUNT
        and (cost is None or (type(cost) is Decimal and cost.is_finite() and not cost.is_signed()))
        and (response.text is None or type(response.text) is str)
        and type(calls) is int
        and 0 <= calls <= MAX_COUNT
        and type(response.request_id) is str
        and type(response.answered) is bool
    ):
        return
    if not _text(response.model):
        _invalid(response, "model", _TEXT)
    if not _count(response.input_tokens):
        _invalid(response, "input_tokens", _COUNT)
    if not _count(response.output_tokens):
        _invalid(response, "output_tokens", _COUNT)
    if not _count(response.cache_read_tokens):
        _invalid(response, "cache_read_tokens", _COUNT)
    if not _count(response.cache_write_tokens):
        _invalid(response, "cache_write_tokens", _COUNT)
    cached = response.cache_read_tokens + response.cache_write_tokens
    if cached and cached > response.input_tokens:
        _invalid(
            response,
            "cache_read_tokens" if response.cache_read_tokens else "cache_write_tokens",
            "cache_read_tokens + cache_write_tokens at most input_tokens "
            f"({response.input_tokens}), which counts the cached tokens too",
        )
    if not _dollars_or_none(response.cost):
        _invalid(
            response,
            "cost",
            "None or a finite Decimal of dollars >= 0, such as Decimal('0.0042') (a float is "
            "not exact: pass Decimal(str(x)))",
        )
    if not _text_or_none(response.text):
        _invalid(response, "text", _TEXT_OR_NONE)
    if not _count(response.tool_calls):
        _invalid(response, "tool_calls", _COUNT)
    if not _text(response.request_id):
        _invalid(response, "request_id", _TEXT)
    if not _flag(response.answered):
        _invalid(response, "answered", _FLAG)


def _check_tool_call(call: ToolCall) -> None:
    arguments = call.arguments
    if (
        type(call.name) is str
        and (type(arguments) is str or type(arguments) is dict)
        and type(call.call_id) is str
    ):
        return
    if not _text(call.name):
        _invalid(call, "name", _TEXT)
    if type(arguments) is not dict and not _text(arguments) and not isinstance(arguments, Mapping):
        _invalid(call, "arguments", "a mapping of the arguments, or the JSON text of them")
    if not _text(call.call_id):
        _invalid(call, "call_id", _TEXT)


def _check_tool_result(result: ToolResult) -> None:
    exit_code = result.exit_code
    if (
        type(result.name) is str
        and type(result.content) is str
        and type(result.call_id) is str
        and type(result.is_error) is bool
        and (exit_code is None or type(exit_code) is int)
    ):
        return
    if not _text(result.name):
        _invalid(result, "name", _TEXT)
    if not _text(result.content):
        _invalid(result, "content", "a str: the tool's output as text")
    if not _text(result.call_id):
        _invalid(result, "call_id", _TEXT)
    if not _flag(result.is_error):
        _invalid(result, "is_error", _FLAG)
    if exit_code is not None and not _integer(exit_code):
        _invalid(result, "exit_code", "None or an int")


def _check_progress(progress: Progress) -> None:
    if not _text(progress.metric):
        _invalid(progress, "metric", _TEXT)
    value = progress.value
    if value is not None and not (
        (_integer(value) or isinstance(value, float)) and math.isfinite(value)
    ):
        _invalid(progress, "value", "None or a finite number")
    if not _text(progress.note):
        _invalid(progress, "note", _TEXT)


def _text(value: object) -> bool:
    return type(value) is str or isinstance(value, str)


def _text_or_none(value: object) -> bool:
    return value is None or type(value) is str or isinstance(value, str)


def _flag(value: object) -> bool:
    return type(value) is bool


def _integer(value: object) -> bool:
    """Whether ``value`` is an int (a subclass will do) other than a bool."""
    return type(value) is int or (isinstance(value, int) and type(value) is not bool)


def _count(value: object) -> bool:
    return _integer(value) and 0 <= value <= MAX_COUNT  # type: ignore[operator]


def _count_or_none(value: object) -> bool:
    return value is None or _count(value)


def _dollars_or_none(value: object) -> bool:
    # A negative cost would take dollars off the count.
    return value is None or (isinstance(value, Decimal) and value.is_finite() and value >= 0)


def _invalid(event: object, field: str, expected: str) -> NoReturn:
    raise InvalidValueError(f"{type(event).__name__}.{field}", getattr(event, field), expected)
