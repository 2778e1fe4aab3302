"""A ``ModelResponse`` event from an OpenAI-style chat completion, read by duck typing.

No import of ``openai``: any object (or dict) shaped like a chat completion works, so the same
code serves the official client, LiteLLM, and recorded transcripts.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..engine.events import ModelResponse

__all__ = ["response_event"]


def _get(obj: Any, name: str) -> Any:
    if obj is None:
        return None
    if isinstance(obj, Mapping):
        return obj.get(name)
    return getattr(obj, name, None)


def response_event(completion: Any, *, model: str | None = None) -> ModelResponse:
    """The ``ModelResponse`` for a chat completion (its usage, text and tool calls)."""
    usage = _get(completion, "usage")
    details = _get(usage, "prompt_tokens_details")
    message = None
    choices = _get(completion, "choices")
    if choices:
        message = _get(choices[0], "message")
    tool_calls = _get(message, "tool_calls") or ()
    return ModelResponse(
        model=model or _get(completion, "model") or "",
        input_tokens=int(_get(usage, "prompt_tokens") or 0),
        output_tokens=int(_get(usage, "completion_tokens") or 0),
        cache_read_tokens=int(_get(details, "cached_tokens") or 0),
        text=_get(message, "content"),
        tool_calls=len(tool_calls),
    )
