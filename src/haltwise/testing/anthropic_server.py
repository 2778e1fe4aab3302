"""A scripted, in-process Anthropic-compatible HTTP server for tests.

:class:`AnthropicServer` answers ``POST /v1/messages`` from the same script as
:class:`~haltwise.testing.ScriptedServer` (:func:`~haltwise.testing.reply`,
:func:`~haltwise.testing.tool_call`, :func:`~haltwise.testing.error`, plain strings and
callables), as a Messages API ``message`` object or, when the request asks to stream, as the
server-sent events the Messages API sends: ``message_start``, ``ping``, then for each content
block ``content_block_start`` / ``content_block_delta`` (``text_delta`` or
``input_json_delta``) / ``content_block_stop``, then ``message_delta`` (stop reason and usage)
and ``message_stop``. It records the body of every ``/v1/messages`` request.

It also answers what a client such as the Claude Code CLI calls besides: ``HEAD /api/hello``
(its connectivity check), ``POST /v1/messages/count_tokens`` (an estimate; no script entry is
used) and ``GET /v1/models``. Anything else gets a 404 with an Anthropic error body naming the
path, and is logged in :attr:`AnthropicServer.unknown_requests`.

How the shared script maps onto the Messages API:

* usage: ``prompt_tokens`` is the whole prompt, cached tokens included (as haltwise counts
  it); ``cached_tokens`` are reported as ``cache_read_input_tokens``, an
  :class:`AnthropicUsage`'s ``cache_write_tokens`` as ``cache_creation_input_tokens``, and the
  rest as ``input_tokens``. ``message_start`` carries the input side and ``output_tokens`` of
  at most 1, as the real API does; the final ``output_tokens`` come in ``message_delta``;
* ``finish_reason``: ``stop`` is ``end_turn``, ``tool_calls`` is ``tool_use``, ``length`` is
  ``max_tokens``, ``content_filter`` is ``refusal``;
* a tool call's ``arguments`` become the ``tool_use`` block's ``input``: in a stream they are
  sent as written (so a script can send malformed JSON on purpose); a plain response needs a
  JSON object, and answers a 500 naming the entry otherwise;
* errors: ``{"type": "error", "error": {"type", "message"}}`` with the entry's status;
  ``server_error`` is named ``api_error`` (``overloaded_error`` for 529), as Anthropic does.

Only the standard library is used. The listening, threading and shutdown are
:class:`~haltwise.testing.ScriptedServer`'s; only the wire format differs.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from haltwise.testing._raw import RawReply
from haltwise.testing._render import (
    Rendering,
    estimate_tokens,
    estimate_usage,
    split_arguments,
    split_content,
)
from haltwise.testing._script import ErrorReply, Reply, ScriptEntry, Usage, error
from haltwise.testing.server import ScriptedServer, _Handler

__all__ = ["AnthropicServer", "AnthropicUsage"]

#: What each OpenAI-style finish reason is called in the Messages API.
_STOP_REASONS = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "length": "max_tokens",
    "content_filter": "refusal",
}


@dataclass(frozen=True, slots=True, repr=False)
class AnthropicUsage(Usage):
    """:class:`~haltwise.testing.Usage` with prompt-cache writes, which only Anthropic reports.

    ``prompt_tokens`` is still the whole prompt; ``cached_tokens`` (cache reads) and
    ``cache_write_tokens`` are parts of it.
    """

    cache_write_tokens: int = 0

    def __post_init__(self) -> None:
        Usage.__post_init__(self)
        if isinstance(self.cache_write_tokens, bool) or not isinstance(
            self.cache_write_tokens, int
        ):
            raise TypeError(
                f"cache_write_tokens must be an int, got {type(self.cache_write_tokens).__name__}"
            )
        if self.cache_write_tokens < 0:
            raise ValueError(f"cache_write_tokens must be >= 0, got {self.cache_write_tokens}")
        if (self.cached_tokens or 0) + self.cache_write_tokens > self.prompt_tokens:
            raise ValueError(
                f"cached_tokens + cache_write_tokens ({self.cached_tokens or 0} + "
                f"{self.cache_write_tokens}) cannot exceed prompt_tokens ({self.prompt_tokens})"
            )

    def __repr__(self) -> str:
        base = Usage.__repr__(self).removeprefix("Usage(").removesuffix(")")
        return f"AnthropicUsage({base}, cache_write_tokens={self.cache_write_tokens!r})"


class AnthropicServer(ScriptedServer):
    """A Messages API server that replays a script; see the module docstring.

    ``base_url`` is the server root, which is what Anthropic clients take
    (``anthropic.Anthropic(base_url=server.base_url)``, ``ANTHROPIC_BASE_URL``). Responses name
    the model the request asked for. Tool calls without an explicit id get ``toolu_scripted_1``,
    ``toolu_scripted_2``, ... Everything else (``delay=``, ``repeat_last``, an exhausted script
    answering 500, ``requests``, the lifecycle) is as in :class:`ScriptedServer`.
    """

    def __init__(
        self,
        script: Iterable[ScriptEntry],
        *,
        model: str = "claude-scripted",
        repeat_last: bool = False,
    ) -> None:
        super().__init__(script, model=model, repeat_last=repeat_last)
        self._unknown: list[tuple[str, str]] = []

    def start(self) -> AnthropicServer:
        super().start()
        # The listener is built with the OpenAI handler. Requests can only come once the port is
        # known, that is after start() returns, so switching the handler here misses none.
        self._running_httpd().RequestHandlerClass = _AnthropicHandler
        return self

    def __enter__(self) -> AnthropicServer:
        return self.start()

    @property
    def base_url(self) -> str:
        """The server root, e.g. ``http://127.0.0.1:54321``: Anthropic clients add ``/v1``."""
        return self.url

    def claude_code_env(self, home: str | os.PathLike[str]) -> dict[str, str]:
        """Environment that points the Claude Code CLI (the Claude Agent SDK's agent loop) at
        this server and keeps it off the network and out of the user's files: pass it as
        ``ClaudeAgentOptions(env=...)``. ``home`` is a scratch directory (its ``HOME`` and
        config dir); the CLI then calls nothing but this server."""
        home = os.fspath(home)
        return {
            "ANTHROPIC_BASE_URL": self.base_url,
            "ANTHROPIC_API_KEY": "test",
            "HOME": home,
            "CLAUDE_CONFIG_DIR": os.path.join(home, ".claude"),
            # Telemetry, error reports, auto-update, feature flags: all off at once.
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_ERROR_REPORTING": "1",
            "DISABLE_AUTOUPDATER": "1",
        }

    @property
    def unknown_requests(self) -> list[tuple[str, str]]:
        """``(method, path)`` of each request to a path this server does not know, in order."""
        with self._lock:
            return list(self._unknown)

    def __repr__(self) -> str:
        return super().__repr__().replace("<ScriptedServer", "<AnthropicServer", 1)

    def _render(self, result: Reply, body: dict[str, Any], serial: int) -> Rendering:
        with self._lock:
            call_ids: list[str] = []
            for call in result.tool_calls:
                if call.id is not None:
                    call_ids.append(call.id)
                else:
                    call_ids.append(f"toolu_scripted_{self._next_call_id}")
                    self._next_call_id += 1
        model = body.get("model")
        return Rendering(
            reply=result,
            completion_id=f"msg_scripted_{serial}",
            model=model if isinstance(model, str) and model else self._model,
            created=int(time.time()),
            call_ids=tuple(call_ids),
            usage=result.usage if result.usage is not None else estimate_usage(body, result),
        )

    def _unknown_path(self, method: str, path: str) -> None:
        with self._lock:
            self._unknown.append((method, path))


# The wire format.


def _usage_fields(usage: Usage) -> dict[str, int]:
    cache_read = usage.cached_tokens or 0
    cache_write = getattr(usage, "cache_write_tokens", 0)
    return {
        "input_tokens": usage.prompt_tokens - cache_read - cache_write,
        "cache_creation_input_tokens": cache_write,
        "cache_read_input_tokens": cache_read,
        "output_tokens": usage.completion_tokens,
    }


def _stop_reason(reply: Reply) -> str:
    return _STOP_REASONS[reply.resolved_finish_reason]


def _message(
    r: Rendering, content: list[dict[str, Any]], stop_reason: str | None
) -> dict[str, Any]:
    return {
        "id": r.completion_id,
        "type": "message",
        "role": "assistant",
        "model": r.model,
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": _usage_fields(r.usage),
    }


def message_payload(r: Rendering) -> dict[str, Any]:
    """A complete Messages API ``message``; raises ``ValueError`` for arguments that are not a
    JSON object (a plain response has nowhere to put them as written)."""
    content: list[dict[str, Any]] = []
    if r.reply.content:
        content.append({"type": "text", "text": r.reply.content})
    for call, call_id in zip(r.reply.tool_calls, r.call_ids, strict=True):
        try:
            arguments = json.loads(call.arguments)
        except ValueError:
            arguments = None
        if not isinstance(arguments, dict):
            raise ValueError(
                f"tool call {call.name!r} has arguments that are not a JSON object "
                f"({call.arguments!r}); only a streamed reply can send them as written"
            )
        content.append({"type": "tool_use", "id": call_id, "name": call.name, "input": arguments})
    return _message(r, content, _stop_reason(r.reply))


def stream_events(r: Rendering) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(event name, data)`` for each server-sent event of a streamed reply, in order."""
    start = _message(r, [], None)
    start["usage"]["output_tokens"] = min(1, r.usage.completion_tokens)
    yield "message_start", {"type": "message_start", "message": start}
    yield "ping", {"type": "ping"}
    # (the block as it starts, the kind of its deltas, the field they fill, the pieces)
    blocks: list[tuple[dict[str, Any], str, str, list[str]]] = []
    if r.reply.content:
        text = {"type": "text", "text": ""}
        blocks.append((text, "text_delta", "text", split_content(r.reply.content)))
    for call, call_id in zip(r.reply.tool_calls, r.call_ids, strict=True):
        use = {"type": "tool_use", "id": call_id, "name": call.name, "input": {}}
        # The API opens every tool input with an empty piece.
        pieces = ["", *split_arguments(call.arguments)]
        blocks.append((use, "input_json_delta", "partial_json", pieces))
    for index, (block, kind, field, pieces) in enumerate(blocks):
        yield (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": index,
                "content_block": block,
            },
        )
        for piece in pieces:
            delta = {"type": kind, field: piece}
            yield (
                "content_block_delta",
                {"type": "content_block_delta", "index": index, "delta": delta},
            )
        yield "content_block_stop", {"type": "content_block_stop", "index": index}
    end = {"stop_reason": _stop_reason(r.reply), "stop_sequence": None}
    yield "message_delta", {"type": "message_delta", "delta": end, "usage": _usage_fields(r.usage)}
    yield "message_stop", {"type": "message_stop"}


def error_payload(err: ErrorReply) -> dict[str, Any]:
    """The Anthropic error body for a scripted error."""
    kind = err.type
    if kind == "server_error":
        kind = "overloaded_error" if err.status == 529 else "api_error"
    return {"type": "error", "error": {"type": kind, "message": err.message}}


class _AnthropicHandler(_Handler):
    """The Messages API on top of the scripted server's request handling."""

    server_version = "haltwise-scripted-anthropic"

    @property
    def anthropic(self) -> AnthropicServer:
        owner = self.owner
        assert isinstance(owner, AnthropicServer)
        return owner

    def _unknown(self, method: str, route: str) -> None:
        self.anthropic._unknown_path(method, route)
        self._send_error(error(404, f"Unknown path: {method} {route}"))

    def do_HEAD(self) -> None:  # noqa: N802 (http.server names handlers so)
        route = self._route()
        if route == "/api/hello":
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.anthropic._unknown_path("HEAD", route)
        self.send_response(404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self) -> None:  # noqa: N802 (http.server names handlers so)
        route = self._route()
        model = self.owner.model
        listing = {
            "type": "model",
            "id": model,
            "display_name": model,
            "created_at": "2025-01-01T00:00:00Z",
        }
        if route == "/api/hello":
            self._send_json(200, {})
        elif route == "/v1/models":
            self._send_json(
                200, {"data": [listing], "has_more": False, "first_id": model, "last_id": model}
            )
        elif route == f"/v1/models/{model}":
            self._send_json(200, listing)
        else:
            self._unknown("GET", route)

    def do_POST(self) -> None:  # noqa: N802 (http.server names handlers so)
        route = self._route()
        if route == "/v1/messages/count_tokens":
            body = self._read_body()
            if body is not None:
                self._send_json(200, {"input_tokens": _estimate_prompt(body)})
            return
        if route != "/v1/messages":
            self._unknown("POST", route)
            return
        body = self._read_body()
        if body is None or not self._valid(body):
            return
        owner = self.anthropic
        taken = owner._take(body)
        if isinstance(taken, int):
            self._send_error(error(500, f"script exhausted after {taken} responses"))
            return
        index, entry, serial = taken
        result = self._resolve(index, entry, body)
        if result is None:
            return
        if result.delay and owner._closing.wait(result.delay):
            return  # shutting down: drop the connection without an answer
        request_id = f"req_scripted_{serial}"
        if isinstance(result, ErrorReply):
            self._send_error(result, request_id=request_id)
            return
        if isinstance(result, RawReply):
            self._send_raw(result)
            return
        rendering = owner._render(result, body, serial)
        if body.get("stream") is True:
            self._send_events(rendering, request_id)
            return
        try:
            payload = message_payload(rendering)
        except ValueError as exc:
            self._send_error(error(500, f"script[{index}]: {exc}", code="script_error"))
            return
        self._send_json(200, payload, request_id=request_id)

    def _valid(self, body: dict[str, Any]) -> bool:
        """What the Messages API rejects before anything else: a missing model or max_tokens."""
        for field in ("model", "max_tokens"):
            if field not in body:
                self._send_error(error(400, f"{field}: Field required"))
                return False
        return True

    def _send_error(self, err: ErrorReply, *, request_id: str | None = None) -> None:
        self._send_json(err.status, error_payload(err), headers=err.headers, request_id=request_id)

    def _send_json(
        self,
        status: int,
        payload: dict[str, Any],
        *,
        headers: Iterable[tuple[str, str]] = (),
        request_id: str | None = None,
    ) -> None:
        extra = list(headers)
        if request_id is not None:
            extra.append(("request-id", request_id))
        super()._send_json(status, payload, headers=extra)

    def _send_events(self, rendering: Rendering, request_id: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("request-id", request_id)
        self.end_headers()
        closing = self.owner._closing
        for name, data in stream_events(rendering):
            if closing.is_set():
                return
            event = f"event: {name}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"
            self.wfile.write(event.encode("utf-8"))
            self.wfile.flush()


def _estimate_prompt(body: dict[str, Any]) -> int:
    parts = [body.get("system", ""), body.get("messages", []), body.get("tools", [])]
    return estimate_tokens(json.dumps(parts, ensure_ascii=False, sort_keys=True))
