"""A local endpoint in front of the Anthropic Messages API that asks before each request goes.

The Claude Code CLI (the Claude Agent SDK's agent loop) sends every model request of a run, the
main loop's and every sub-agent's, retries included, to ``ANTHROPIC_BASE_URL``. Pointed at a
:class:`MessagesProxy`, it sends them here first: each ``POST /v1/messages`` is put to a *gate*
before it is forwarded, and refused with a 400 when the gate says no (no back-off, no retry
after a delay, as for a 429 or a 5xx: the CLI sends it at most twice more, each refused too);
an admitted one goes to the real endpoint, and its answer streams back to the CLI chunk by chunk
as it arrives, read on the way for its usage, its text and its tool calls, which are *reported*
the moment the response is whole, before the CLI has its last bytes. Every other request (the
CLI's ``HEAD /api/hello``, ``count_tokens``, ...) is forwarded as it is.

It listens on 127.0.0.1, on a port of the system's choosing unless told one; HTTP/1.1 with
keep-alive toward the CLI, framed by ``h11``, and ``httpx`` toward the real endpoint (headers
passed on as the CLI sent them, credentials included, but for the hop-by-hop ones). What the
gate and the report mean is the adapter's business (``haltwise.adapters.claude_agent_sdk``);
nothing here knows of limits.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any

import h11
import httpx
import orjson

__all__ = ["Exchange", "MessagesProxy"]

#: Headers that belong to one connection, not to the request or response they travel with.
HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
    }
)
#: The longest request head (request line and headers) accepted from the CLI.
HEAD_LIMIT = 1 << 20
#: How much is read from the CLI's connection at a time.
READ_SIZE = 1 << 16
#: How long the real endpoint is given to accept a connection (a response may take as long as
#: the model writes: the CLI's own timeout bounds that).
CONNECT_SECONDS = 30.0


@dataclass
class Exchange:
    """One ``POST /v1/messages`` through the proxy, as the gate and the report see it."""

    #: The request's ``model`` and ``max_tokens``, as sent.
    model: str
    max_tokens: int | None
    #: The sub-agent that sends it (the CLI's ``x-claude-code-agent-id`` header); None for the
    #: main loop.
    agent_id: str | None
    #: What the gate admitted it as (its request id).
    request_id: str = ""
    #: The response's usage as the API reported it (``message_start``, then ``message_delta``).
    usage: dict[str, int] = field(default_factory=dict)
    #: The text it wrote, in pieces, and how many tool calls it asked for.
    text: list[str] = field(default_factory=list)
    tool_calls: int = 0
    #: Whether it was answered: the whole response arrived, or an error (nothing to pay for).
    #: False when it was sent and no whole answer came: it is then worth what it reserved.
    complete: bool = False


#: Asked before a request goes: its request id to forward it, or a ``str`` refusal.
Gate = Callable[[Exchange], Awaitable["tuple[str, None] | tuple[None, str]"]]
#: Told once an admitted request has its answer, or has failed for good.
Report = Callable[[Exchange], Awaitable[None]]


class MessagesProxy:
    """The local endpoint; ``await start()`` returns its base URL, ``await close()`` ends it."""

    def __init__(self, upstream: str, gate: Gate, report: Report) -> None:
        self.upstream = upstream.rstrip("/")
        self.gate = gate
        self.report = report
        self.port = 0
        self._server: asyncio.Server | None = None
        self._client: httpx.AsyncClient | None = None
        self._connections: set[asyncio.Task[None]] = set()

    def __repr__(self) -> str:
        return f"MessagesProxy(127.0.0.1:{self.port} -> {self.upstream})"

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self, port: int = 0) -> str:
        """Listen (on ``port``, else on one the system picks); the URL to give the CLI."""
        self._client = httpx.AsyncClient(
            verify=_tls(), timeout=httpx.Timeout(None, connect=CONNECT_SECONDS)
        )
        try:
            self._server = await asyncio.start_server(self._connection, "127.0.0.1", port)
        except BaseException:
            await self._client.aclose()
            raise
        self.port = int(self._server.sockets[0].getsockname()[1])
        return self.base_url

    async def close(self) -> None:
        """Stop listening, end every exchange in flight, close the connections."""
        if self._server is not None:
            self._server.close()
        for task in list(self._connections):
            task.cancel()
        if self._connections:
            await asyncio.wait(self._connections)
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    # Toward the CLI

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        peer = _Peer(reader, writer)
        try:
            while await self._one_request(peer):
                pass
        except (ConnectionError, h11.ProtocolError):
            pass  # the CLI went away, or sent what is not HTTP/1.1
        except (httpx.HTTPError, ValueError):
            pass  # the real endpoint broke off its answer, or the request could not be read:
            # the CLI sees its connection close, as it would have without haltwise
        except asyncio.CancelledError:
            pass  # close(): the task ends as any other (its stream protocol reads its result)
        finally:
            self._connections.discard(task)
            writer.close()
            with contextlib.suppress(ConnectionError, asyncio.CancelledError):
                await writer.wait_closed()

    async def _one_request(self, peer: _Peer) -> bool:
        """Answer one request; whether the connection stays open for the next."""
        received = await peer.request()
        if received is None:
            return False  # closed between requests
        request, body = received
        method = request.method.decode("ascii")
        target = request.target.decode("latin-1")
        headers = [
            (name.decode("latin-1"), value.decode("latin-1")) for name, value in request.headers
        ]
        path = target.split("?", 1)[0]
        if method == "POST" and path.endswith("/v1/messages"):
            await self._messages(method, target, headers, body, peer)
        else:
            await self._forward(method, target, headers, body, peer, None)
        return peer.next_cycle()

    async def _messages(
        self,
        method: str,
        target: str,
        headers: list[tuple[str, str]],
        body: bytes,
        peer: _Peer,
    ) -> None:
        try:
            request = orjson.loads(body)
        except orjson.JSONDecodeError:
            request = None
        request = request if isinstance(request, dict) else {}
        max_tokens = request.get("max_tokens")
        agent = next((v for k, v in headers if k.lower() == "x-claude-code-agent-id"), "")
        exchange = Exchange(
            model=str(request.get("model") or ""),
            max_tokens=max_tokens if isinstance(max_tokens, int) else None,
            agent_id=agent or None,
        )
        request_id, refusal = await self.gate(exchange)
        if request_id is None:
            # A 400 ends the CLI's turn with this text (it retries a 429 or a 5xx after a delay).
            error = {"type": "invalid_request_error", "message": refusal}
            await peer.send_json(400, {"type": "error", "error": error})
            return
        exchange.request_id = request_id
        reported = False

        async def report() -> None:
            nonlocal reported
            if not reported:
                reported = True
                await self.report(exchange)

        try:
            await self._forward(method, target, headers, body, peer, exchange, report)
        finally:
            await report()  # however it ended: a cancel, the CLI gone, the endpoint failing

    async def _forward(
        self,
        method: str,
        target: str,
        headers: list[tuple[str, str]],
        body: bytes,
        peer: _Peer,
        exchange: Exchange | None = None,
        report: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        """Send the request on and stream its answer back; ``exchange`` is read on the way and
        ``report``ed as soon as it is whole, before the last of it is passed on."""
        assert self._client is not None
        # The answer is decoded here to be read: only encodings httpx can decode are asked for.
        sent = [(k, v) for k, v in headers if k.lower() not in (*HOP_BY_HOP, "accept-encoding")]
        outgoing = self._client.build_request(
            method, self.upstream + target, headers=sent, content=body
        )
        try:
            response = await self._client.send(outgoing, stream=True)
        except httpx.HTTPError as error:
            if exchange is not None:
                exchange.complete = True  # no answer, and nothing to pay for
            message = f"haltwise could not reach {self.upstream}: {error}"
            await peer.send_json(
                502, {"type": "error", "error": {"type": "api_error", "message": message}}
            )
            return
        try:
            await self._relay(method, response, peer, exchange, report)
        finally:
            await response.aclose()

    async def _relay(
        self,
        method: str,
        response: httpx.Response,
        peer: _Peer,
        exchange: Exchange | None,
        report: Callable[[], Awaitable[None]] | None,
    ) -> None:
        status = response.status_code
        passed = [
            (k, v)
            for k, v in response.headers.multi_items()
            if k.lower() not in (*HOP_BY_HOP, "content-encoding")
        ]
        if method == "HEAD":
            length = response.headers.get("content-length", "0")
            await peer.send(_response(status, [*passed, ("content-length", length)]))
            await peer.send(h11.EndOfMessage())
            return
        await peer.send(_response(status, passed))  # no length: h11 sends it chunked
        streamed = status < 400 and "text/event-stream" in response.headers.get("content-type", "")
        reader = _Reader(exchange, report) if exchange is not None and report is not None else None
        held = b""  # a plain answer's last chunk, passed on once the whole of it is read
        async for chunk in response.aiter_bytes():
            if reader is None:
                await peer.send_data(chunk)
            elif streamed:
                await reader.events(chunk)  # reported, if this ends it, before the CLI has it
                await peer.send_data(chunk)
            else:
                reader.parts.append(chunk)
                await peer.send_data(held)
                held = chunk
        if reader is not None and not streamed:
            await reader.whole(status)
        await peer.send_data(held)
        await peer.send(h11.EndOfMessage())


class _Reader:
    """Reads a Messages answer for its exchange as it passes: the server-sent events of a
    stream, or a plain ``message`` (or an error) once it has all arrived."""

    def __init__(self, exchange: Exchange, report: Callable[[], Awaitable[None]]) -> None:
        self.exchange = exchange
        self.report = report
        self.pending = b""
        self.parts: list[bytes] = []

    async def whole(self, status: int) -> None:
        exchange = self.exchange
        exchange.complete = True  # an error answer has nothing to pay for
        if status < 400:
            try:
                message = orjson.loads(b"".join(self.parts))
            except orjson.JSONDecodeError:
                message = None
            if isinstance(message, dict):
                exchange.usage.update(_numbers(message.get("usage")))
                for block in message.get("content") or ():
                    if block.get("type") == "text":
                        exchange.text.append(str(block.get("text", "")))
                    elif block.get("type") == "tool_use":
                        exchange.tool_calls += 1
        await self.report()

    async def events(self, chunk: bytes) -> None:
        self.pending += chunk.replace(b"\r\n", b"\n")
        *done, self.pending = self.pending.split(b"\n\n")
        for event in done:
            for line in event.split(b"\n"):
                if line.startswith(b"data:"):
                    await self.event(line[5:])

    async def event(self, data: bytes) -> None:
        try:
            event = orjson.loads(data)
        except orjson.JSONDecodeError:
            return
        if not isinstance(event, dict):
            return
        exchange = self.exchange
        kind = event.get("type")
        if kind == "message_start":
            exchange.usage.update(_numbers((event.get("message") or {}).get("usage")))
        elif kind == "content_block_start":
            if (event.get("content_block") or {}).get("type") == "tool_use":
                exchange.tool_calls += 1
        elif kind == "content_block_delta":
            delta = event.get("delta") or {}
            if delta.get("type") == "text_delta":
                exchange.text.append(str(delta.get("text", "")))
        elif kind == "message_delta":
            exchange.usage.update(_numbers(event.get("usage")))
        elif kind == "message_stop":
            exchange.complete = True
            await self.report()


# HTTP/1.1 toward the CLI


class _Peer:
    """The CLI's end of one connection: requests read and answers written through ``h11``."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.connection = h11.Connection(h11.SERVER, max_incomplete_event_size=HEAD_LIMIT)

    async def request(self) -> tuple[h11.Request, bytes] | None:
        """The next request and its body; None when the CLI closed the connection."""
        event = await self._next()
        if isinstance(event, h11.ConnectionClosed):
            return None
        if not isinstance(event, h11.Request):
            raise h11.RemoteProtocolError(f"expected a request, got {event!r}")
        parts: list[bytes] = []
        while not isinstance(body := await self._next(), h11.EndOfMessage):
            if not isinstance(body, h11.Data):
                raise h11.RemoteProtocolError(f"expected the request's body, got {body!r}")
            parts.append(bytes(body.data))
        return event, b"".join(parts)

    async def send(self, event: h11.Response | h11.Data | h11.EndOfMessage) -> None:
        data = self.connection.send(event)
        if data:
            self.writer.write(data)
        await self.writer.drain()

    async def send_data(self, chunk: bytes) -> None:
        if chunk:
            await self.send(h11.Data(data=chunk))

    async def send_json(self, status: int, payload: dict[str, Any]) -> None:
        """An answer of haltwise's own, in the Messages API's error shape."""
        body = orjson.dumps(payload)
        headers = [("content-type", "application/json"), ("content-length", str(len(body)))]
        if status == 400:
            headers.append(("x-should-retry", "false"))
        await self.send(_response(status, headers))
        await self.send(h11.Data(data=body))
        await self.send(h11.EndOfMessage())

    def next_cycle(self) -> bool:
        """Ready the connection for the CLI's next request; False when it must close."""
        connection = self.connection
        if connection.our_state is h11.DONE and connection.their_state is h11.DONE:
            connection.start_next_cycle()
            return True
        return False

    async def _next(self) -> Any:
        while (event := self.connection.next_event()) is h11.NEED_DATA:
            self.connection.receive_data(await self.reader.read(READ_SIZE))  # b"": closed
        return event


def _response(status: int, headers: list[tuple[str, str]]) -> h11.Response:
    try:
        reason = HTTPStatus(status).phrase
    except ValueError:
        reason = ""
    return h11.Response(status_code=status, headers=headers, reason=reason)


@functools.cache
def _tls() -> ssl.SSLContext:
    """TLS toward the real endpoint, as httpx sets it up by default: made once, since loading
    the certificate authorities takes tens of milliseconds, a run's start would pay them."""
    return httpx.create_ssl_context()


def _numbers(usage: Any) -> dict[str, int]:
    if not isinstance(usage, dict):
        return {}
    return {key: value for key, value in usage.items() if isinstance(value, int)}
