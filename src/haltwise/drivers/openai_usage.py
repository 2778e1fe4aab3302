"""A ``ModelResponse`` event from an OpenAI-style chat completion, read by duck typing; and the
one rule for a model call whose usage is unknown.

No import of ``openai``: any object (or dict) shaped like a chat completion works, so the same
code serves the official client, LiteLLM, and recorded transcripts.

A call whose usage is unknown was still made, and is never counted as free: a completion with
no usage (a stream's final object without ``stream_options={"include_usage": True}``, a proxy
that drops it, a bare string), or with a figure that is not a token count (``-5``, ``1.5``,
``"12"``: a guess from a figure known to be wrong would be no better), counts at an estimate
from characters (``CHARS_PER_TOKEN``), each figure at least what its request reserved
(``reserved_tokens``: its prompt and its ``max_tokens``), so that token and cost limits go on
counting. ``Guard``'s runs and the haltwise agent count such calls by this rule, and each says
so once per run.
"""

from __future__ import annotations

import reprlib
from collections.abc import Mapping
from typing import Any

from ..engine.events import MAX_COUNT, ModelResponse
from ..engine.governor import Governor

__all__ = [
    "CHARS_PER_TOKEN",
    "estimate",
    "estimated_tokens",
    "read_completion",
    "reserved_tokens",
    "response_event",
    "token_counts",
]

#: Characters a token, for a model call whose usage is unknown: its prompt and its reply (text,
#: tool names and arguments) count this many characters a token, and at least one token each.
#: About what English text and code average with the common tokenizers; what the request
#: reserved is counted if it is more.
CHARS_PER_TOKEN = 4


def _get(obj: Any, name: str) -> Any:
    if obj is None:
        return None
    if isinstance(obj, Mapping):
        return obj.get(name)
    return getattr(obj, name, None)


def estimated_tokens(characters: int) -> int:
    """``characters`` of text as tokens (``CHARS_PER_TOKEN``), rounded up; at least one."""
    return max(1, -(-characters // CHARS_PER_TOKEN))


def token_counts(usage: Any) -> tuple[int, int, int] | str:
    """The prompt, completion and cached tokens of a completion's usage (an object or a
    mapping); or, for the first figure that is not a count the governor takes (an int from 0 to
    2^53 - 1), that figure as ``name=value``.

    The cached count is cut to the prompt's: some proxies count the cached tokens outside the
    prompt, and the prompt's count is the one the limits read, as the audit's readers do."""
    details = _get(usage, "prompt_tokens_details")
    cached = _get(details, "cached_tokens")
    figures: dict[str, Any] = {
        "usage.prompt_tokens": _get(usage, "prompt_tokens"),
        "usage.completion_tokens": _get(usage, "completion_tokens"),
        # Left out by many endpoints: nothing was read from a cache.
        "usage.prompt_tokens_details.cached_tokens": 0 if cached is None else cached,
    }
    for name, value in figures.items():
        if type(value) is not int or not 0 <= value <= MAX_COUNT:
            return f"{name}={reprlib.repr(value)}"
    prompt, completion, cached = figures.values()
    return prompt, completion, min(cached, prompt)


def reserved_tokens(governor: Governor, request_id: str = "") -> tuple[int, int]:
    """The prompt and output tokens reserved by the request in flight that a response with
    ``request_id`` answers, as the governor pairs them (the one with that id, else the oldest):
    its prompt (as given, else the last one counted) and its ``max_tokens``, if it asked for
    one. ``(0, 0)`` when no request is in flight.

    Read from the governor's checkpoint, where each is ``[request_id, model, prompt, output,
    cost, holds]``: only for a call whose usage is unknown, so the copy costs nothing on the
    common path."""
    in_flight = governor.checkpoint()["in_flight"]
    if not in_flight:
        return 0, 0
    matching = (entry for entry in in_flight if request_id and entry[0] == request_id)
    _, _, prompt, output, *_ = next(matching, in_flight[0])
    return int(prompt), int(output)


def estimate(reserved: tuple[int, int], prompt_chars: int, written_chars: int) -> tuple[int, int]:
    """The input and output tokens of a call whose usage is unknown: ``prompt_chars`` of prompt
    and ``written_chars`` of reply (text, tool names and arguments) as tokens, each at least
    what its request ``reserved`` (``reserved_tokens``)."""
    prompt, output = reserved
    return max(prompt, estimated_tokens(prompt_chars)), max(output, estimated_tokens(written_chars))


def read_completion(
    completion: Any,
    *,
    model: str | None = None,
    request_id: str = "",
    reserved: tuple[int, int] = (0, 0),
    prompt_chars: int = 0,
) -> tuple[ModelResponse, str | None]:
    """The ``ModelResponse`` for a chat completion, and what was wrong with its usage: None when
    it reported token counts; else ``"no token usage"``, or the first figure that is not a count
    (``"usage.prompt_tokens=-5, which is not a token count"``). Its tokens are then estimated
    (``estimate``) from its reply and ``prompt_chars`` of its prompt (as much of it as the caller
    knows), each at least what its request ``reserved``.

    A ``str`` is taken as the reply's text, with no usage."""
    if isinstance(completion, str):
        text: Any = completion
        tool_calls: Any = ()
    else:
        choices = _get(completion, "choices")
        message = _get(choices[0], "message") if choices else None
        text = _get(message, "content")
        tool_calls = _get(message, "tool_calls") or ()
    usage = None if isinstance(completion, str) else _get(completion, "usage")
    counts = None if usage is None else token_counts(usage)
    if isinstance(counts, tuple):
        input_tokens, output_tokens, cached = counts
        problem = None
    else:
        functions = [_get(call, "function") for call in tool_calls]
        names = (_get(function, "name") for function in functions)
        arguments = (_get(function, "arguments") for function in functions)
        written = [text, *names, *arguments]
        written_chars = sum(
            len(part if isinstance(part, str) else str(part)) for part in written if part
        )
        input_tokens, output_tokens = estimate(reserved, prompt_chars, written_chars)
        cached = 0
        problem = "no token usage" if counts is None else f"{counts}, which is not a token count"
    event = ModelResponse(
        model=model or _get(completion, "model") or "",
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        cache_read_tokens=cached,
        text=text,
        tool_calls=len(tool_calls),
        request_id=request_id,
    )
    return event, problem


def response_event(
    completion: Any,
    *,
    model: str | None = None,
    request_id: str = "",
    reserved: tuple[int, int] = (0, 0),
    prompt_chars: int = 0,
) -> ModelResponse:
    """The ``ModelResponse`` for a chat completion (its usage, text and tool calls); with no
    usage, or usage that is not token counts, an estimate (``read_completion``)."""
    event, _ = read_completion(
        completion,
        model=model,
        request_id=request_id,
        reserved=reserved,
        prompt_chars=prompt_chars,
    )
    return event
