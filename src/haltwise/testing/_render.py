"""Turn scripted replies into OpenAI ``chat.completion`` JSON and SSE chunk payloads.

Private to :mod:`haltwise.testing`; pure functions, stdlib only.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from haltwise.testing._script import Reply, Usage

SYSTEM_FINGERPRINT = "fp_haltwise_scripted"

# At most this many content / argument deltas per streamed value, so long texts stay cheap.
_MAX_PIECES = 48
_WORDS = re.compile(r"\s*\S+")


def estimate_tokens(text: str) -> int:
    """A deterministic stand-in for a tokenizer: one token per four characters, at least one."""
    return max(1, math.ceil(len(text) / 4))


def _compact_json(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def estimate_usage(request: dict[str, Any], reply: Reply) -> Usage:
    """Usage for a reply that was scripted without one.

    Prompt tokens come from the JSON-encoded ``messages`` (and ``tools``, when sent);
    completion tokens from the reply text plus each tool call's name and arguments.
    """
    prompt_text = _compact_json(request.get("messages", []))
    if "tools" in request:
        prompt_text += _compact_json(request["tools"])
    completion_text = (reply.content or "") + "".join(
        call.name + call.arguments for call in reply.tool_calls
    )
    return Usage(estimate_tokens(prompt_text), estimate_tokens(completion_text))


def usage_payload(usage: Usage) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.total_tokens,
    }
    if usage.cached_tokens is not None:
        payload["prompt_tokens_details"] = {"cached_tokens": usage.cached_tokens}
    if usage.reasoning_tokens is not None:
        payload["completion_tokens_details"] = {"reasoning_tokens": usage.reasoning_tokens}
    return payload


@dataclass(frozen=True, slots=True)
class Rendering:
    """Everything about one served reply that is fixed at serve time."""

    reply: Reply
    completion_id: str
    model: str
    created: int
    call_ids: tuple[str, ...]
    usage: Usage


def completion_payload(r: Rendering) -> dict[str, Any]:
    """A complete non-streaming ``chat.completion`` object."""
    message: dict[str, Any] = {
        "role": "assistant",
        "content": r.reply.content,
        "refusal": None,
    }
    if r.reply.tool_calls:
        message["tool_calls"] = [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments},
            }
            for call, call_id in zip(r.reply.tool_calls, r.call_ids, strict=True)
        ]
    return {
        "id": r.completion_id,
        "object": "chat.completion",
        "created": r.created,
        "model": r.model,
        "system_fingerprint": SYSTEM_FINGERPRINT,
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": r.reply.resolved_finish_reason,
            }
        ],
        "usage": usage_payload(r.usage),
    }


def _group(pieces: Sequence[str]) -> list[str]:
    """Merge neighbouring pieces so there are at most ``_MAX_PIECES`` of them."""
    if len(pieces) <= _MAX_PIECES:
        return list(pieces)
    per = math.ceil(len(pieces) / _MAX_PIECES)
    return ["".join(pieces[i : i + per]) for i in range(0, len(pieces), per)]


def split_content(text: str) -> list[str]:
    """Split text into word-sized deltas (leading whitespace stays with its word)."""
    pieces: list[str] = _WORDS.findall(text)
    tail = text[sum(map(len, pieces)) :]  # trailing whitespace, if any
    if tail:
        if pieces:
            pieces[-1] += tail
        else:
            pieces.append(tail)
    return _group(pieces)


def split_arguments(arguments: str) -> list[str]:
    """Split tool-call arguments into a few pieces, the way models stream them."""
    size = 8
    return _group([arguments[i : i + size] for i in range(0, len(arguments), size)])


def stream_payloads(r: Rendering, *, include_usage: bool) -> Iterator[dict[str, Any]]:
    """The ``chat.completion.chunk`` objects of a streamed reply, in order."""

    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "id": r.completion_id,
            "object": "chat.completion.chunk",
            "created": r.created,
            "model": r.model,
            "system_fingerprint": SYSTEM_FINGERPRINT,
            "choices": [
                {
                    "index": 0,
                    "delta": delta,
                    "logprobs": None,
                    "finish_reason": finish_reason,
                }
            ],
        }
        if include_usage:
            payload["usage"] = None
        return payload

    content = r.reply.content
    yield chunk({"role": "assistant", "content": "" if content is not None else None})
    for piece in split_content(content or ""):
        yield chunk({"content": piece})
    for index, (call, call_id) in enumerate(zip(r.reply.tool_calls, r.call_ids, strict=True)):
        yield chunk(
            {
                "tool_calls": [
                    {
                        "index": index,
                        "id": call_id,
                        "type": "function",
                        "function": {"name": call.name, "arguments": ""},
                    }
                ]
            }
        )
        for piece in split_arguments(call.arguments):
            yield chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
    yield chunk({}, r.reply.resolved_finish_reason)
    if include_usage:
        yield {
            "id": r.completion_id,
            "object": "chat.completion.chunk",
            "created": r.created,
            "model": r.model,
            "system_fingerprint": SYSTEM_FINGERPRINT,
            "choices": [],
            "usage": usage_payload(r.usage),
        }
