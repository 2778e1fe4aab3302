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
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import TYPE_CHECKING, Any

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
