"""A scripted, in-process OpenAI-compatible HTTP server for tests.

:class:`ScriptedServer` listens on a free loopback port and answers
``POST /v1/chat/completions`` from a script of :func:`~haltwise.testing.reply`,
:func:`~haltwise.testing.error` and callable entries, one entry per request, both as plain
JSON and as server-sent events when the request asks to stream. It also answers
``GET /v1/models``. It records every chat completion request body so tests can assert on
what an agent loop actually sent. Real clients (the ``openai`` SDK, ``httpx``, ``curl``)
talk to it over real HTTP; only the standard library is used.
"""

from __future__ import annotations

import contextlib
import copy
import json
import selectors
import socket
import socketserver
import threading
import time
from collections.abc import Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, cast
from urllib.parse import urlsplit

from haltwise.testing._raw import RawReply
from haltwise.testing._render import Rendering, completion_payload, estimate_usage, stream_payloads
from haltwise.testing._script import (
    ErrorReply,
    Reply,
    ScriptedResponse,
    ScriptEntry,
    error,
    reply,
)

__all__ = ["ScriptedServer"]

_HOST = "127.0.0.1"
# How long close() waits for requests that are still being answered.
_CLOSE_GRACE_SECONDS = 2.0


class ScriptedServer:
    """An OpenAI-compatible chat completions server that replays a script.

    Each ``POST /v1/chat/completions`` request takes the next script entry:

    * a :class:`~haltwise.testing.Reply` (or a plain ``str``, meaning ``reply(text)``) is
      sent as a ``chat.completion`` object, or as ``chat.completion.chunk`` server-sent
      events when the request has ``"stream": true`` (the usage chunk is only sent when
      ``stream_options.include_usage`` is true, as OpenAI does);
    * an :class:`~haltwise.testing.ErrorReply` is sent as an OpenAI-style error body with
      its HTTP status;
    * a :class:`~haltwise.testing.RawReply` (:func:`~haltwise.testing.raw`,
      :func:`~haltwise.testing.raw_stream`) is sent byte for byte, as a misbehaving endpoint
      would;
    * a callable is called with a copy of the parsed request body and its result is sent.

    An entry built with ``delay=`` waits that many seconds before answering (``close()``
    cuts the wait short). Replies without explicit usage get a deterministic estimate: a
    quarter of the characters of the JSON-encoded request ``messages`` (plus ``tools``) for
    prompt tokens, and a quarter of the reply text plus tool-call names and arguments for
    completion tokens, each rounded up and at least 1. Tool calls without an explicit id get
    ``call_1``, ``call_2``, ... numbered across the server's lifetime.

    Once the script is used up, requests get HTTP 500 with the message
    ``"script exhausted after N responses"``, unless ``repeat_last=True``, in which case
    the last entry answers every further request. Malformed requests get HTTP 400 and
    neither consume an entry nor appear in :attr:`requests`.

    The server binds ``127.0.0.1`` on a free port when started (by :meth:`start` or by
    entering it as a context manager) and serves from daemon threads. It is thread-safe.
    """

    def __init__(
        self,
        script: Iterable[ScriptEntry],
        *,
        model: str = "scripted-model",
        repeat_last: bool = False,
    ) -> None:
        entries = tuple(script)
        for index, entry in enumerate(entries):
            if not isinstance(entry, str | Reply | ErrorReply | RawReply) and (
                isinstance(entry, ScriptedResponse) or not callable(entry)
            ):
                raise TypeError(
                    f"script[{index}] must be reply(...), error(...), raw(...), a str or a "
                    "callable, "
                    f"got {entry!r}"
                )
        if repeat_last and not entries:
            raise ValueError("repeat_last=True needs a non-empty script")
        self._script = entries
        self._model = model
        self._repeat_last = repeat_last
        self._created = int(time.time())

        self._lock = threading.Lock()
        self._handlers_idle = threading.Condition(self._lock)
        self._active_handlers = 0
        self._in_handler = threading.local()
        self._closing = threading.Event()

        self._requests: list[dict[str, Any]] = []
        self._cursor = 0
        self._served = 0
        self._next_call_id = 1

        self._state = "new"
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._wake: socket.socket | None = None

    # -- lifecycle ---------------------------------------------------------------------

    def start(self) -> ScriptedServer:
        """Bind a free loopback port and start serving; returns ``self``.

        Starting a running server does nothing; a closed server cannot be restarted.
        """
        with self._lock:
            if self._state == "running":
                return self
            if self._state == "closed":
                raise RuntimeError("a closed ScriptedServer cannot be restarted")
            httpd = _HTTPServer(self)
            try:
                wake_reader, wake_writer = socket.socketpair()
            except BaseException:
                httpd.server_close()
                raise
            thread = threading.Thread(
                target=self._serve,
                args=(httpd, wake_reader),
                name=f"haltwise-scripted-server:{httpd.server_port}",
                daemon=True,
            )
            self._httpd, self._thread, self._wake = httpd, thread, wake_writer
            self._state = "running"
        thread.start()
        return self

    def close(self) -> None:
        """Stop serving and release the port. Safe to call more than once.

        Requests still being answered are given a moment to finish; delayed and streaming
        responses are cut short.
        """
        with self._lock:
            httpd, thread, wake = self._httpd, self._thread, self._wake
            was_running = self._state == "running"
            self._state = "closed"
        if not was_running or httpd is None or thread is None or wake is None:
            return
        self._closing.set()
        try:
            # A serving thread that has not reached its first wait yet sees the flag and ends
            # without reading this, its end of the pair closed: nothing is left to wake.
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                wake.send(b"\0")
        finally:
            wake.close()
        thread.join()
        httpd.server_close()
        own = 1 if getattr(self._in_handler, "active", False) else 0
        deadline = time.monotonic() + _CLOSE_GRACE_SECONDS
        with self._handlers_idle:
            while self._active_handlers > own:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._handlers_idle.wait(remaining)

    def _serve(self, httpd: _HTTPServer, wake: socket.socket) -> None:
        """Accept connections until close() writes to ``wake``; no polling, so close is quick."""
        try:
            with selectors.DefaultSelector() as selector:
                selector.register(httpd, selectors.EVENT_READ)
                selector.register(wake, selectors.EVENT_READ)
                while not self._closing.is_set():
                    for key, _ in selector.select():
                        if key.fileobj is httpd and not self._closing.is_set():
                            httpd.handle_request()  # ready, so this accepts without blocking
        finally:
            wake.close()

    def __enter__(self) -> ScriptedServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- public state ------------------------------------------------------------------

    @property
    def port(self) -> int:
        """The TCP port the server listens on."""
        return self._running_httpd().server_port

    @property
    def url(self) -> str:
        """The server root, e.g. ``http://127.0.0.1:54321``."""
        return f"http://{_HOST}:{self.port}"

    @property
    def base_url(self) -> str:
        """The OpenAI API base URL, ``url + "/v1"``: pass it as ``base_url=`` to clients."""
        return f"{self.url}/v1"

    @property
    def model(self) -> str:
        """The model name reported in responses and by ``GET /v1/models``."""
        return self._model

    @property
    def script(self) -> tuple[ScriptEntry, ...]:
        """The script entries, in order."""
        return self._script

    @property
    def requests(self) -> list[dict[str, Any]]:
        """Parsed bodies of the chat completion requests received so far, in order.

        Includes requests that found the script exhausted. The list is a snapshot.
        """
        with self._lock:
            return list(self._requests)

    @property
    def responses_served(self) -> int:
        """How many requests have been answered from the script (error entries included)."""
        with self._lock:
            return self._served

    @property
    def running(self) -> bool:
        """Whether the server is currently accepting requests."""
        with self._lock:
            return self._state == "running"

    def __repr__(self) -> str:
        with self._lock:
            state, httpd = self._state, self._httpd
            served = self._served
        where = f" {_HOST}:{httpd.server_port}" if httpd is not None else ""
        return (
            f"<ScriptedServer{where} {state} model={self._model!r} "
            f"served={served}/{len(self._script)}{' repeat_last' if self._repeat_last else ''}>"
        )

    # -- internals used by the request handler -----------------------------------------

    def _running_httpd(self) -> _HTTPServer:
        with self._lock:
            httpd, state = self._httpd, self._state
        if httpd is None or state != "running":
            raise RuntimeError(
                f"ScriptedServer is not running ({state}); use start() or a with-block"
            )
        return httpd

    def _handler_started(self) -> None:
        with self._lock:
            self._active_handlers += 1

    def _handler_finished(self) -> None:
        with self._handlers_idle:
            self._active_handlers -= 1
            self._handlers_idle.notify_all()

    def _take(self, body: dict[str, Any]) -> tuple[int, ScriptEntry, int] | int:
        """Record a request and pick its entry.

        Returns ``(index, entry, serial)`` where ``serial`` numbers the responses served
        (from 1), or, when the script is exhausted, how many responses were served.
        """
        with self._lock:
            self._requests.append(body)
            if self._cursor < len(self._script):
                index = self._cursor
                self._cursor += 1
            elif self._repeat_last:
                index = len(self._script) - 1
            else:
                return self._served
            self._served += 1
            return index, self._script[index], self._served

    def _render(self, result: Reply, body: dict[str, Any], serial: int) -> Rendering:
        with self._lock:
            call_ids: list[str] = []
            for call in result.tool_calls:
                if call.id is not None:
                    call_ids.append(call.id)
                else:
                    call_ids.append(f"call_{self._next_call_id}")
                    self._next_call_id += 1
        return Rendering(
            reply=result,
            completion_id=f"chatcmpl-scripted-{serial}",
            model=self._model,
            created=int(time.time()),
            call_ids=tuple(call_ids),
            usage=result.usage if result.usage is not None else estimate_usage(body, result),
        )


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    request_queue_size = 128  # the default of 5 drops bursts of concurrent connections
    timeout = 0  # handle_request() is only called once the socket is ready

    def __init__(self, owner: ScriptedServer) -> None:
        self.owner = owner
        super().__init__((_HOST, 0), _Handler)

    def server_bind(self) -> None:
        # HTTPServer.server_bind() resolves the host's FQDN, which can stall on DNS.
        socketserver.TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name = str(host)
        self.server_port = int(port)

    def process_request(self, request: Any, client_address: Any) -> None:
        self.owner._handler_started()
        try:
            super().process_request(request, client_address)
        except BaseException:
            self.owner._handler_finished()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        self.owner._in_handler.active = True
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.owner._handler_finished()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"  # one request per connection; streams end at close
    server_version = "haltwise-scripted"
    timeout = 10.0

    @property
    def owner(self) -> ScriptedServer:
        return cast(_HTTPServer, self.server).owner

    def version_string(self) -> str:
        return self.server_version

    def log_message(self, format: str, *args: Any) -> None:
        """Keep test output quiet."""

    def handle(self) -> None:
        # A client that hangs up or stalls gets no answer; that is not a server error.
        with contextlib.suppress(ConnectionError, TimeoutError):
            super().handle()

    # -- routing -----------------------------------------------------------------------

    def _route(self) -> str:
        path = urlsplit(self.path).path
        return path.rstrip("/") or "/"

    def do_GET(self) -> None:
        route = self._route()
        model = self.owner.model
        listing = {
            "id": model,
            "object": "model",
            "created": self.owner._created,
            "owned_by": "haltwise",
        }
        if route == "/v1/models":
            self._send_json(200, {"object": "list", "data": [listing]})
        elif route == f"/v1/models/{model}":
            self._send_json(200, listing)
        elif route.startswith("/v1/models/"):
            self._send_error(
                error(
                    404,
                    f"The model '{route[len('/v1/models/') :]}' does not exist",
                    code="model_not_found",
                )
            )
        else:
            self._send_error(error(404, f"Unknown path: GET {route}"))

    def do_POST(self) -> None:
        route = self._route()
        if route != "/v1/chat/completions":
            self._send_error(error(404, f"Unknown path: POST {route}"))
            return
        body = self._read_body()
        if body is None:
            return
        owner = self.owner
        taken = owner._take(body)
        if isinstance(taken, int):
            self._send_error(
                error(500, f"script exhausted after {taken} responses", code="script_exhausted")
            )
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
            options = body.get("stream_options")
            include_usage = isinstance(options, dict) and options.get("include_usage") is True
            self._send_stream(rendering, include_usage=include_usage, request_id=request_id)
        else:
            self._send_json(200, completion_payload(rendering), request_id=request_id)

    # -- helpers -----------------------------------------------------------------------

    def _read_body(self) -> dict[str, Any] | None:
        try:
            length = int(self.headers.get("Content-Length", ""))
        except ValueError:
            length = -1
        if length < 0:
            self._send_error(error(411, "A valid Content-Length header is required"))
            return None
        try:
            body = json.loads(self.rfile.read(length))
        except ValueError as exc:
            self._send_error(error(400, f"Request body is not valid JSON: {exc}"))
            return None
        if not isinstance(body, dict):
            self._send_error(error(400, "Request body must be a JSON object"))
            return None
        if not isinstance(body.get("messages"), list):
            self._send_error(
                error(400, "'messages' is required and must be an array", code="invalid_messages")
            )
            return None
        return body

    def _resolve(
        self, index: int, entry: ScriptEntry, body: dict[str, Any]
    ) -> Reply | ErrorReply | RawReply | None:
        """Turn a script entry into a reply; answers with a 500 and returns None if it can't."""
        result: object = entry
        if callable(entry) and not isinstance(entry, str | ScriptedResponse):
            try:
                result = entry(copy.deepcopy(body))
            except Exception as exc:
                self._send_error(
                    error(
                        500,
                        f"script[{index}] raised {type(exc).__name__}: {exc}",
                        code="script_error",
                    )
                )
                return None
        if isinstance(result, str):
            result = reply(result)
        if not isinstance(result, Reply | ErrorReply | RawReply):
            self._send_error(
                error(
                    500,
                    f"script[{index}] returned {result!r}; expected reply(...), "
                    "error(...), raw(...) or a str",
                    code="script_error",
                )
            )
            return None
        return result

    def _send_json(
        self,
        status: int,
        payload: dict[str, Any],
        *,
        headers: Iterable[tuple[str, str]] = (),
        request_id: str | None = None,
    ) -> None:
        data = json.dumps(payload, ensure_ascii=False).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if request_id is not None:
            self.send_header("x-request-id", request_id)
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _send_error(self, err: ErrorReply, *, request_id: str | None = None) -> None:
        self._send_json(err.status, err.body(), headers=err.headers, request_id=request_id)

    def _send_raw(self, result: RawReply) -> None:
        self.send_response(result.status)
        self.send_header("Content-Type", result.content_type)
        self.send_header("Content-Length", str(len(result.body)))
        self.end_headers()
        self.wfile.write(result.body)

    def _send_stream(self, rendering: Rendering, *, include_usage: bool, request_id: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("x-request-id", request_id)
        self.end_headers()
        closing = self.owner._closing
        for payload in stream_payloads(rendering, include_usage=include_usage):
            if closing.is_set():
                return
            event = "data: " + json.dumps(payload, ensure_ascii=False) + "\n\n"
            self.wfile.write(event.encode("utf-8"))
        self.wfile.write(b"data: [DONE]\n\n")
