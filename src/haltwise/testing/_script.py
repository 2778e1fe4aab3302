"""Values that make up a :class:`~haltwise.testing.ScriptedServer` script.

A script is a sequence of entries, answered one per chat completion request:

* :class:`Reply` (built with :func:`reply`) - an assistant message with text and/or
  :class:`ToolCall` values (built with :func:`tool_call`), optional :class:`Usage`;
* :class:`ErrorReply` (built with :func:`error`) - an OpenAI-style error with an HTTP status;
* a plain ``str`` - shorthand for ``reply(text)``;
* a callable taking the parsed request body and returning any of the above, for replies
  that depend on what the client sent.

Everything here is immutable and stdlib-only.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

__all__ = [
    "ErrorReply",
    "FinishReason",
    "Reply",
    "ScriptEntry",
    "ScriptedResponse",
    "ToolCall",
    "Usage",
    "error",
    "reply",
    "tool_call",
]

FinishReason: TypeAlias = Literal["stop", "length", "tool_calls", "content_filter"]
"""The ``finish_reason`` values a scripted reply may report."""

_FINISH_REASONS: frozenset[str] = frozenset({"stop", "length", "tool_calls", "content_filter"})


def _check_count(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < 0:
        raise ValueError(f"{name} must be >= 0, got {value}")
    return value


def _check_seconds(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{name} must be a number of seconds, got {type(value).__name__}")
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be a finite number of seconds >= 0, got {value!r}")
    return float(value)


@dataclass(frozen=True, slots=True, repr=False)
class Usage:
    """Token usage reported for one reply.

    ``cached_tokens`` is the part of ``prompt_tokens`` served from the provider's prompt
    cache and ``reasoning_tokens`` the part of ``completion_tokens`` spent on hidden
    reasoning, as in OpenAI's ``prompt_tokens_details`` / ``completion_tokens_details``.
    Leave them as ``None`` to omit those detail objects from the response entirely.
    """

    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int | None = None
    reasoning_tokens: int | None = None

    def __post_init__(self) -> None:
        _check_count("prompt_tokens", self.prompt_tokens)
        _check_count("completion_tokens", self.completion_tokens)
        if self.cached_tokens is not None:
            _check_count("cached_tokens", self.cached_tokens)
            if self.cached_tokens > self.prompt_tokens:
                raise ValueError(
                    f"cached_tokens ({self.cached_tokens}) cannot exceed "
                    f"prompt_tokens ({self.prompt_tokens})"
                )
        if self.reasoning_tokens is not None:
            _check_count("reasoning_tokens", self.reasoning_tokens)
            if self.reasoning_tokens > self.completion_tokens:
                raise ValueError(
                    f"reasoning_tokens ({self.reasoning_tokens}) cannot exceed "
                    f"completion_tokens ({self.completion_tokens})"
                )

    @property
    def total_tokens(self) -> int:
        """``prompt_tokens + completion_tokens``."""
        return self.prompt_tokens + self.completion_tokens

    def __repr__(self) -> str:
        parts = [repr(self.prompt_tokens), repr(self.completion_tokens)]
        if self.cached_tokens is not None:
            parts.append(f"cached_tokens={self.cached_tokens!r}")
        if self.reasoning_tokens is not None:
            parts.append(f"reasoning_tokens={self.reasoning_tokens!r}")
        return f"Usage({', '.join(parts)})"


@dataclass(frozen=True, slots=True, repr=False)
class ToolCall:
    """One function call the scripted assistant asks for.

    ``arguments`` is the raw JSON text sent to the client, exactly as a model would emit
    it (so a script can also send malformed arguments on purpose). ``id`` of ``None``
    means the server assigns ``call_1``, ``call_2``, ... in the order calls are served.
    """

    name: str
    arguments: str = "{}"
    id: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError("tool call name must be a non-empty string")
        if not isinstance(self.arguments, str):
            raise TypeError(
                f"ToolCall.arguments must be a JSON string, got {type(self.arguments).__name__}"
                " (use tool_call(name, {...}) to encode a mapping)"
            )

    def __repr__(self) -> str:
        parts = [repr(self.name), repr(self.arguments)]
        if self.id is not None:
            parts.append(f"id={self.id!r}")
        return f"ToolCall({', '.join(parts)})"


class ScriptedResponse:
    """Common base of :class:`Reply` and :class:`ErrorReply`; not meant to be subclassed.

    It exists so that a list mixing replies and errors type-checks as a script.
    """

    __slots__ = ()


@dataclass(frozen=True, slots=True, repr=False)
class Reply(ScriptedResponse):
    """A scripted assistant message. Build it with :func:`reply`.

    ``usage`` of ``None`` means the server estimates usage from the request and the reply,
    so responses always carry usage. ``finish_reason`` of ``None`` means ``"tool_calls"``
    when there are tool calls and ``"stop"`` otherwise. ``delay`` is how long the server
    waits before answering.
    """

    content: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage | None = None
    finish_reason: FinishReason | None = None
    delay: float = 0.0

    def __post_init__(self) -> None:
        if self.content is not None and not isinstance(self.content, str):
            raise TypeError(f"reply content must be a str, got {type(self.content).__name__}")
        object.__setattr__(self, "tool_calls", tuple(self.tool_calls))
        for call in self.tool_calls:
            if not isinstance(call, ToolCall):
                raise TypeError(
                    f"tool_calls must hold ToolCall values (see tool_call()), got {call!r}"
                )
        if self.finish_reason is not None and self.finish_reason not in _FINISH_REASONS:
            raise ValueError(
                f"finish_reason must be one of {sorted(_FINISH_REASONS)}, "
                f"got {self.finish_reason!r}"
            )
        _check_seconds("delay", self.delay)

    @property
    def resolved_finish_reason(self) -> FinishReason:
        """The ``finish_reason`` the server reports for this reply."""
        if self.finish_reason is not None:
            return self.finish_reason
        return "tool_calls" if self.tool_calls else "stop"

    def __repr__(self) -> str:
        parts: list[str] = []
        if self.content is not None:
            parts.append(repr(self.content))
        if self.tool_calls:
            parts.append(f"tool_calls={list(self.tool_calls)!r}")
        if self.usage is not None:
            parts.append(f"usage={self.usage!r}")
        if self.finish_reason is not None:
            parts.append(f"finish_reason={self.finish_reason!r}")
        if self.delay:
            parts.append(f"delay={self.delay!r}")
        return f"Reply({', '.join(parts)})"


_DEFAULT_ERROR_TYPES: dict[int, str] = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    409: "conflict_error",
    422: "invalid_request_error",
    429: "rate_limit_error",
}


@dataclass(frozen=True, slots=True, repr=False)
class ErrorReply(ScriptedResponse):
    """A scripted OpenAI-style error response. Build it with :func:`error`."""

    status: int
    message: str
    type: str
    code: str | None = None
    headers: tuple[tuple[str, str], ...] = ()
    delay: float = 0.0

    def __post_init__(self) -> None:
        if isinstance(self.status, bool) or not isinstance(self.status, int):
            raise TypeError(f"error status must be an int, got {type(self.status).__name__}")
        if not 400 <= self.status <= 599:
            raise ValueError(
                f"error status must be an HTTP error code (400-599), got {self.status}"
            )
        if not isinstance(self.message, str):
            raise TypeError(f"error message must be a str, got {type(self.message).__name__}")
        _check_seconds("delay", self.delay)

    def body(self) -> dict[str, Any]:
        """The JSON body sent with this error."""
        return {
            "error": {
                "message": self.message,
                "type": self.type,
                "param": None,
                "code": self.code,
            }
        }

    def __repr__(self) -> str:
        parts = [repr(self.status), repr(self.message), f"type={self.type!r}"]
        if self.code is not None:
            parts.append(f"code={self.code!r}")
        if self.headers:
            parts.append(f"headers={dict(self.headers)!r}")
        if self.delay:
            parts.append(f"delay={self.delay!r}")
        return f"ErrorReply({', '.join(parts)})"


ScriptEntry: TypeAlias = str | ScriptedResponse | Callable[[dict[str, Any]], str | ScriptedResponse]
"""One entry of a script: a reply, an error, a plain string, or a callable producing one.

Type checkers infer ``list[object]`` for a list literal that mixes strings or callables with
replies; annotate such a variable as ``list[ScriptEntry]``.
"""


def tool_call(
    name: str,
    arguments: Mapping[str, Any] | str | None = None,
    *,
    id: str | None = None,  # named like the OpenAI field
) -> ToolCall:
    """Build a :class:`ToolCall`.

    ``arguments`` may be a mapping (encoded as JSON) or a ready JSON string, which is sent
    unchanged - handy for testing how a loop copes with malformed arguments.
    """
    if arguments is None:
        encoded = "{}"
    elif isinstance(arguments, str):
        encoded = arguments
    elif isinstance(arguments, Mapping):
        try:
            encoded = json.dumps(dict(arguments), ensure_ascii=False)
        except (TypeError, ValueError) as exc:
            raise TypeError(
                f"tool call arguments for {name!r} are not JSON-encodable: {exc}"
            ) from exc
    else:
        raise TypeError(
            f"tool call arguments must be a mapping or a JSON string, "
            f"got {type(arguments).__name__}"
        )
    return ToolCall(name=name, arguments=encoded, id=id)


def reply(
    content: str | None = None,
    *,
    tool_calls: Iterable[ToolCall] = (),
    usage: Usage | tuple[int, int] | None = None,
    cached_tokens: int | None = None,
    reasoning_tokens: int | None = None,
    finish_reason: FinishReason | None = None,
    delay: float = 0.0,
) -> Reply:
    """Build a scripted assistant :class:`Reply`.

    ``usage`` is a :class:`Usage` or a ``(prompt_tokens, completion_tokens)`` tuple;
    ``cached_tokens`` and ``reasoning_tokens`` add the detail counts to a tuple. Without
    ``usage`` the server reports a deterministic estimate (see :class:`ScriptedServer`).
    A reply with neither content nor tool calls has empty content.
    """
    calls = tuple(tool_calls)
    if content is None and not calls:
        content = ""
    resolved: Usage | None
    if usage is None:
        if cached_tokens is not None or reasoning_tokens is not None:
            raise ValueError(
                "cached_tokens/reasoning_tokens need explicit usage=(prompt, completion)"
            )
        resolved = None
    elif isinstance(usage, Usage):
        if cached_tokens is not None or reasoning_tokens is not None:
            raise ValueError(
                "pass cached_tokens/reasoning_tokens inside Usage(...) or with a tuple, not both"
            )
        resolved = usage
    elif isinstance(usage, tuple) and len(usage) == 2:
        prompt, completion = usage
        resolved = Usage(prompt, completion, cached_tokens, reasoning_tokens)
    else:
        raise TypeError(
            f"usage must be a Usage or a (prompt_tokens, completion_tokens) tuple, got {usage!r}"
        )
    return Reply(
        content=content,
        tool_calls=calls,
        usage=resolved,
        finish_reason=finish_reason,
        delay=_check_seconds("delay", delay),
    )


def error(
    status: int,
    message: str,
    *,
    type: str | None = None,  # named like the OpenAI field
    code: str | None = None,
    retry_after: float | None = None,
    headers: Mapping[str, str] | None = None,
    delay: float = 0.0,
) -> ErrorReply:
    """Build a scripted :class:`ErrorReply` answered with HTTP ``status``.

    The body is ``{"error": {"message", "type", "param", "code"}}`` as OpenAI sends it;
    ``type`` defaults from the status (``rate_limit_error`` for 429, ``server_error`` for
    5xx, ...). ``retry_after`` (seconds) sets the ``retry-after-ms`` and ``retry-after``
    headers that the ``openai`` client honours between retries; ``headers`` adds any
    others (for example ``{"x-should-retry": "false"}``).
    """
    if type is None:
        type = _DEFAULT_ERROR_TYPES.get(status, "server_error" if status >= 500 else "api_error")
    extra: dict[str, str] = {}
    if retry_after is not None:
        seconds = _check_seconds("retry_after", retry_after)
        extra["retry-after-ms"] = str(round(seconds * 1000))
        extra["retry-after"] = str(math.ceil(seconds))
    if headers:
        extra.update(headers)
    return ErrorReply(
        status=status,
        message=message,
        type=type,
        code=code,
        headers=tuple(extra.items()),
        delay=_check_seconds("delay", delay),
    )
