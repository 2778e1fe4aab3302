"""The dashboard's web app: a Starlette app over one ledger, for ``haltwise dashboard``.

- ``GET /`` and ``GET /runs/RUN``: the page (static HTML, JS and CSS shipped in this package;
  it holds no data, so it needs no token). Everything else needs the token.
- ``GET /api/state``: the fleet snapshot (``haltwise.dashboard.watch``); ``GET /api/events``:
  the same as server-sent events, one each time it changes; ``GET /api/runs/RUN``: a run's
  timeline and spend over time. The token comes in the ``X-Haltwise-Token`` header, or for the
  event stream (browsers cannot give ``EventSource`` a header) in ``?token=``: reads are
  guarded too, since a fleet's questions and limits are nobody else's business.
- ``POST /api/runs/RUN/answer`` (``{"choice": "extend", "amount": 2}``), ``POST
  /api/runs/RUN/stop`` and ``POST /api/stop`` (``{"key": "team-a"}``): the actions, POST
  only, the token in the header only (a form on another site cannot set a header, so it cannot
  act for the user), compared in constant time. Without it: 403, and nothing happens. Stopping
  a run that is not live, or answering one that is not waiting, is 409.

One poller reads the ledger every ``interval`` seconds (at once after an action) on a worker
thread; every open page shares its snapshot.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import threading
import time
from collections.abc import AsyncIterator, Callable
from importlib import resources
from typing import Any

import anyio
import anyio.to_thread
from sse_starlette.sse import EventSourceResponse
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..engine.errors import ConfigurationError, LedgerError
from ..engine.ledger import Ledger
from .watch import Watcher

__all__ = ["TOKEN_HEADER", "Dashboard", "create_app"]

#: The header that carries the token.
TOKEN_HEADER = "X-Haltwise-Token"
#: The answers a waiting run takes, and the largest extension one click may give.
CHOICES = ("continue", "extend", "wrap_up", "abort")
MAX_EXTEND = 10_000

STATIC = resources.files(__package__) / "static"

_HEADERS = [
    (
        b"content-security-policy",
        b"default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; "
        b"frame-ancestors 'none'; form-action 'none'",
    ),
    (b"referrer-policy", b"no-referrer"),
    (b"x-content-type-options", b"nosniff"),
    (b"cache-control", b"no-store"),
]


class Dashboard:
    """The watcher, its poller, and the snapshot shared by every page."""

    def __init__(self, ledger: Ledger, *, token: str, interval: float = 0.25) -> None:
        if not token:
            raise ConfigurationError(
                "the dashboard needs a token: every read and action asks for it"
            )
        self.ledger = ledger
        self.token = token
        self.interval = interval
        self.watcher = Watcher(ledger)
        #: Guards the watcher: the poller thread writes it, requests read it.
        self._lock = threading.Lock()
        #: The latest snapshot as JSON ("" until the first read).
        self.payload = ""
        self._changed: asyncio.Condition | None = None
        self._wake: asyncio.Event | None = None

    # --- polling ---------------------------------------------------------------------------

    def _poll(self) -> str | None:
        """Read the ledger; the new payload if the snapshot changed."""
        with self._lock:
            watcher = self.watcher
            if not watcher.poll() and self.payload:
                return None
            # The snapshot is already JSON: it is wrapped, not encoded again.
            now, read_at = json.dumps(time.time()), json.dumps(watcher.read_at)
            return f'{{"now":{now},"read_at":{read_at},"state":{watcher.shown}}}'

    async def polling(self) -> None:
        """Read the ledger until cancelled, telling the pages each time it changed."""
        self._changed = asyncio.Condition()
        self._wake = asyncio.Event()
        while True:
            payload = await anyio.to_thread.run_sync(self._poll)
            if payload is not None:
                async with self._changed:
                    self.payload = payload
                    self._changed.notify_all()
            with contextlib.suppress(asyncio.TimeoutError):  # TimeoutError from 3.11
                await asyncio.wait_for(self._wake.wait(), self.interval)
            self._wake.clear()

    def wake(self) -> None:
        """Read the ledger now (an action changed it)."""
        if self._wake is not None:
            self._wake.set()

    async def payloads(self, stop: anyio.Event) -> AsyncIterator[str]:
        """The snapshot now (once there is one), then each time it changes, until ``stop``."""
        assert self._changed is not None, "the poller is not running"
        changed = self._changed

        async def wake_when_stopped() -> None:
            await stop.wait()
            async with changed:
                changed.notify_all()

        waking = asyncio.create_task(wake_when_stopped())
        sent = ""
        try:
            while True:
                async with changed:
                    while self.payload == sent and not stop.is_set():
                        await changed.wait()
                    if stop.is_set():
                        return
                    sent = self.payload
                yield sent
        finally:
            waking.cancel()

    # --- requests --------------------------------------------------------------------------

    def authorized(self, request: Request, *, query: bool = False) -> bool:
        given = request.headers.get(TOKEN_HEADER, "")
        if not given and query:
            given = request.query_params.get("token", "")
        return hmac.compare_digest(given.encode(), self.token.encode())

    def run_detail(self, run_id: str) -> dict[str, Any] | None:
        with self._lock:
            return self.watcher.run_detail(run_id)

    def note(self, run_id: str, kind: str, label: str) -> None:
        with self._lock:
            self.watcher.note(run_id, kind, label)


def _refused() -> JSONResponse:
    return JSONResponse(
        {
            "error": f"a missing or wrong token: send the one haltwise dashboard printed "
            f"in the {TOKEN_HEADER} header"
        },
        status_code=403,
    )


def _problem(message: str, status: int) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


async def _body(request: Request) -> dict[str, Any] | None:
    """The request's JSON object; None for anything else, which the action answers 400. JSON
    nested deeper than Python's recursion limit is not JSON an action takes either."""
    try:
        data = await request.json()
    except (ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) else None


def create_app(ledger: Ledger, *, token: str, interval: float = 0.25) -> Starlette:
    """The dashboard over ``ledger``, guarded by ``token``; the ledger is read every
    ``interval`` seconds while the app runs."""
    dashboard = Dashboard(ledger, token=token, interval=interval)
    page = STATIC / "index.html"

    async def index(request: Request) -> Response:
        return FileResponse(str(page), media_type="text/html")

    async def state(request: Request) -> Response:
        if not dashboard.authorized(request):
            return _refused()
        if not dashboard.payload:
            return _problem("the ledger has not been read yet: try again in a moment", 503)
        return Response(dashboard.payload, media_type="application/json")

    async def events(request: Request) -> Response:
        if not dashboard.authorized(request, query=True):
            return _refused()

        # The server shutting down sets it: the stream ends cleanly, and the server can stop.
        shutdown = anyio.Event()

        async def stream() -> AsyncIterator[dict[str, str]]:
            async for payload in dashboard.payloads(shutdown):
                yield {"event": "state", "data": payload}

        return EventSourceResponse(
            stream(), ping=10, shutdown_event=shutdown, shutdown_grace_period=1.0
        )

    async def run_detail(request: Request) -> Response:
        if not dashboard.authorized(request):
            return _refused()
        run_id = request.path_params["run_id"]
        detail = await anyio.to_thread.run_sync(dashboard.run_detail, run_id)
        if detail is None:
            return _problem(f"run {run_id!r} is neither live nor among the recent runs", 404)
        return JSONResponse(detail)

    async def act(work: Callable[[], Any]) -> Response:
        try:
            result = await anyio.to_thread.run_sync(work)
        except LedgerError as error:
            return _problem(str(error), 409)
        dashboard.wake()
        return JSONResponse(result)

    async def answer(request: Request) -> Response:
        if not dashboard.authorized(request):
            return _refused()
        run_id = request.path_params["run_id"]
        body = await _body(request)
        choice = None if body is None else body.get("choice")
        amount = None if body is None else body.get("amount")
        if choice not in CHOICES:
            return _problem(f"choice: one of {', '.join(CHOICES)}", 400)
        if choice == "extend":
            if type(amount) is not int or not 0 < amount <= MAX_EXTEND:
                return _problem(f"amount: a whole number from 1 to {MAX_EXTEND}", 400)
        else:
            amount = None

        def work() -> dict[str, Any]:
            # The timeline shows the answer when the ledger does, wherever it came from.
            answered = ledger.answer(run_id, choice, amount)
            return {"run_id": run_id, "answer": answered.answer, "amount": answered.amount}

        return await act(work)

    async def stop(request: Request) -> Response:
        if not dashboard.authorized(request):
            return _refused()
        run_id = request.path_params["run_id"]

        def work() -> dict[str, Any]:
            told = ledger.kill(run_id, "stopped from the dashboard")
            if not told:  # answered 409, as a question that is no longer open is
                raise LedgerError(
                    f"run {run_id!r} is not live: it has ended, or no run has that id"
                )
            dashboard.note(run_id, "stop", "told to stop (from the dashboard)")
            return {"told": told}

        return await act(work)

    async def stop_key(request: Request) -> Response:
        if not dashboard.authorized(request):
            return _refused()
        body = await _body(request)
        key = None if body is None else body.get("key")
        if not isinstance(key, str) or not key:
            return _problem("key: the budget key whose live runs stop", 400)

        def work() -> dict[str, Any]:
            told = ledger.kill(None, f"stopped from the dashboard (every run of {key})", key=key)
            for run_id in told:
                dashboard.note(run_id, "stop", f"told to stop with every run of {key}")
            return {"told": told}

        return await act(work)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        poller = asyncio.create_task(dashboard.polling())
        try:
            yield
        finally:
            poller.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await poller

    app = Starlette(
        routes=[
            Route("/", index),
            Route("/runs/{run_id}", index),
            Route("/api/state", state),
            Route("/api/events", events),
            Route("/api/runs/{run_id}", run_detail),
            Route("/api/runs/{run_id}/answer", answer, methods=["POST"]),
            Route("/api/runs/{run_id}/stop", stop, methods=["POST"]),
            Route("/api/stop", stop_key, methods=["POST"]),
            Mount("/static", StaticFiles(directory=str(STATIC)), name="static"),
        ],
        lifespan=lifespan,
    )
    app.state.dashboard = dashboard
    app.add_middleware(_Guarded)
    return app


class _Guarded:
    """Headers on every response: no scripts or styles from anywhere but this server, no
    framing, no referrer, nothing cached."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def guarded(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *_HEADERS]
            await send(message)

        await self.app(scope, receive, guarded)
