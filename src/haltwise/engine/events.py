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
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import MISSING, dataclass, fields
from decimal import Decimal
from typing import Any, TypeVar

__all__ = [
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
]

_E = TypeVar("_E")


def _quick(cls: type[_E]) -> type[_E]:
    """``cls`` with an ``__init__`` that stores each field through its slot's descriptor.

    A frozen dataclass's own ``__init__`` stores through ``object.__setattr__``, which costs
    twice as much, and drivers build an event for every step of a loop. The signature,
    defaults and everything else of the dataclass are unchanged.
    """
    params = []
    namespace: dict[str, Any] = {}
    for field in fields(cls):  # type: ignore[arg-type]
        assert field.default_factory is MISSING, "events hold values: no default factories"
        namespace[f"_set_{field.name}"] = getattr(cls, field.name).__set__
        if field.default is MISSING:
            params.append(field.name)
        else:
            namespace[f"_default_{field.name}"] = field.default
            params.append(f"{field.name}=_default_{field.name}")
    body = "".join(f"    _set_{f.name}(self, {f.name})\n" for f in fields(cls))  # type: ignore[arg-type]
    text = f"def __init__(self, {', '.join(params)}):\n{body or '    pass'}\n"
    exec(text, namespace)  # our own source, written from the dataclass's fields
    init = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__doc__ = cls.__init__.__doc__
    cls.__init__ = init  # type: ignore[method-assign]
    return cls


@_quick
@dataclass(frozen=True, slots=True)
class RunStarted:
    """A user prompt starts a run: run-scoped counts reset and the run's clock starts."""

    #: The user's prompt.
    prompt: str = ""
    #: An id for the run; the governor makes one when it is not given.
    run_id: str | None = None


@dataclass(frozen=True, slots=True)
class TurnStarting:
    """A turn (one model round trip with its tool calls) is about to run."""


@_quick
@dataclass(frozen=True, slots=True)
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


@_quick
@dataclass(frozen=True, slots=True)
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


@_quick
@dataclass(frozen=True, slots=True)
class ToolCall:
    """A tool is about to be called."""

    name: str
    #: The arguments, as a mapping or as the raw JSON text the model wrote.
    arguments: Mapping[str, Any] | str = ""
    call_id: str = ""


@_quick
@dataclass(frozen=True, slots=True)
class ToolResult:
    """A tool call returned."""

    name: str
    content: str = ""
    call_id: str = ""
    is_error: bool = False
    #: The exit code, for tools that run commands.
    exit_code: int | None = None


@_quick
@dataclass(frozen=True, slots=True)
class TurnEnded:
    """A turn finished."""

    #: The assistant's text for the turn, if any.
    text: str | None = None


@_quick
@dataclass(frozen=True, slots=True)
class Injected:
    """A user message arrived mid-run. It is context for the same run: no count resets."""

    text: str = ""


@_quick
@dataclass(frozen=True, slots=True)
class Progress:
    """The agent or a tool reports progress: how a stuck detector tells paging from looping."""

    #: What moved, e.g. ``"failing_tests"`` or ``"lines_read"``.
    metric: str = ""
    #: Its new value, when it has one.
    value: float | None = None
    note: str = ""


@_quick
@dataclass(frozen=True, slots=True)
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
