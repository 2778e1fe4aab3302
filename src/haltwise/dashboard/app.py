"""The dashboard's web app: a Starlette app over one ledger, for ``haltwise dashboard``.

- ``GET /`` and ``GET /runs/RUN``: the page (static HTML, JS and CSS shipped in this package;
  it holds no data, so it needs no token). Everything else needs the token.
- ``GET /api/state``: the fleet snapshot (``haltwise.dashboard.watch``), with ``now`` (the
  server's clock), ``read_at`` (when the ledger last answered) and ``interval``; ``GET
  /api/events``: the same as server-sent events (``state``), one each time it changes, and a
  ``read`` event (``now`` and ``read_at``) every few seconds between, so that a page knows how
  old what it shows is; ``GET /api/runs/RUN``: a run's timeline and spend over time, for any
  run the ledger keeps. The token comes in the ``X-Haltwise-Token`` header, or for the event
  stream (browsers cannot give ``EventSource`` a header) in ``?token=``: reads are guarded
  too, since a fleet's questions and limits are nobody else's business.
- ``POST /api/runs/RUN/answer`` (``{"choice": "extend", "amount": 2}``), ``POST
  /api/runs/RUN/stop`` and ``POST /api/stop`` (``{"key": "team-a"}``): the actions, POST
  only, the token in the header only (a form on another site cannot set a header, so it cannot
  act for the user), compared in constant time. Without it: 403, and nothing happens. Stopping
  a run that is not live (or gone: its process is not heard from), answering one that is not
  waiting, and any action the ledger refuses or cannot take, is 409 with the ledger's reason;
  one the ledger could not take yet, since another process holds its write lock (``LedgerBusy``:
  an action waits a second at most), is 503 saying so: nothing was done, try again.

``RUN`` is the run's id percent-encoded as one segment (``team-a%2Fjob-42``): any id, slashes
and all, is taken whole. An id that a path cannot hold as it is (``.`` and ``..``, which
browsers resolve away, written ``%2E`` or not, as most URL libraries do; and the empty id) is
written with a ``~`` before it (``~..``), and so is an id that starts with ``~`` (``~~x``):
the server takes off one leading ``~``. The page's script writes and reads ids the same way
(``runPath`` and ``currentRun`` in ``static/app.js``).

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

from ..engine.errors import ConfigurationError, LedgerBusy, LedgerError
from ..engine.ledger import Ledger, unheard
from .watch import Watcher

__all__ = ["TOKEN_HEADER", "Dashboard", "create_app"]

#: The header that carries the token.
TOKEN_HEADER = "X-Haltwise-Token"
#: The answers a waiting run takes, and the largest extension one click may give.
CHOICES = ("continue", "extend", "wrap_up", "abort")
MAX_EXTEND = 10_000
#: The event stream says when the ledger last answered at least this often (seconds).
READ_EVERY = 2.0
#: What starts a run's id in a path when the id is escaped (see the module's docstring).
ESCAPE = "~"

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
        self.shown = ""
        #: When the ledger last answered (epoch seconds), changed or not; None before.
        self.read_at: float | None = None
        self._changed: asyncio.Condition | None = None
        self._wake: asyncio.Event | None = None

    @property
    def payload(self) -> str:
        """The snapshot as a page is sent it, with the time now and when the ledger last
        answered ("" until the first read)."""
        if not self.shown:
            return ""
        # The snapshot is already JSON: it is wrapped, not encoded again.
        return f'{{{self._times()},"interval":{json.dumps(self.interval)},"state":{self.shown}}}'

    def _times(self) -> str:
        return f'"now":{json.dumps(time.time())},"read_at":{json.dumps(self.read_at)}'

    # --- polling ---------------------------------------------------------------------------

    def _poll(self) -> str | None:
        """Read the ledger; the new snapshot if it changed."""
        with self._lock:
            watcher = self.watcher
            changed = watcher.poll()
            self.read_at = watcher.read_at
            return watcher.shown if changed or not self.shown else None

    async def polling(self) -> None:
        """Read the ledger until cancelled, telling the pages each time it changed."""
        self._changed = asyncio.Condition()
        self._wake = asyncio.Event()
        while True:
            shown = await anyio.to_thread.run_sync(self._poll)
            if shown is not None:
                async with self._changed:
                    self.shown = shown
                    self._changed.notify_all()
            with contextlib.suppress(asyncio.TimeoutError):  # TimeoutError from 3.11
                await asyncio.wait_for(self._wake.wait(), self.interval)
            self._wake.clear()

    def wake(self) -> None:
        """Read the ledger now (an action changed it)."""
        if self._wake is not None:
            self._wake.set()

    async def payloads(self, stop: anyio.Event) -> AsyncIterator[tuple[str, str]]:
        """Events for a page until ``stop``: ``state``, the snapshot now (once there is one)
        and each time it changes; between them, every ``READ_EVERY`` seconds, ``read``: the
        time, and when the ledger last answered (a read that hangs shows as it grows old)."""
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
                    while self.shown == sent and not stop.is_set():
                        try:
                            await asyncio.wait_for(changed.wait(), READ_EVERY)
                        except asyncio.TimeoutError:  # TimeoutError from 3.11
                            if sent:  # a page has its first snapshot before anything else
                                break
                    if stop.is_set():
                        return
                    news = self.shown != sent
                    sent = self.shown
                    event = ("state", self.payload) if news else ("read", f"{{{self._times()}}}")
                yield event
        finally:
            waking.cancel()

    # --- requests --------------------------------------------------------------------------

    def authorized(self, request: Request, *, query: bool = False) -> bool:
        given = request.headers.get(TOKEN_HEADER, "")
        if not given and query:
            given = request.query_params.get("token", "")
        return hmac.compare_digest(given.encode(), self.token.encode())

    def run_detail(self, run_id: str) -> dict[str, Any] | None:
        """A run's page; for a run the snapshot does not show, from the ledger's record (read
        without holding the poller up). None if the ledger has no such run."""
        with self._lock:
            detail = self.watcher.run_detail(run_id)
        if detail is not None:
            return detail
        info = self.ledger.run_info(run_id)
        if info is None:
            return None
        asked = self.ledger.pending(run_id) if info.live else []
        with self._lock:
            return self.watcher.detail_of(info, asked[0] if asked else None)

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


def _run_id(request: Request) -> str:
    """The run a request's path names: ``RUN`` decoded, its escape taken off."""
    written: str = request.path_params["run_id"]
    return written.removeprefix(ESCAPE)


def _names_an_action(request: Request) -> bool:
    """Whether a request for a run's page names an action in its path as sent (``GET
    /api/runs/RUN/stop``, the id one segment, its own slashes encoded): it is answered 405,
    as any method but POST on an action is, not taken for a run with a slash in its id."""
    raw: bytes = request.scope.get("raw_path") or request.url.path.encode()
    tail = raw.partition(b"?")[0].removeprefix(b"/api/runs/")
    return b"/" in tail and tail.rsplit(b"/", 1)[1] in (b"answer", b"stop")


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
        payload = dashboard.payload
        if not payload:
            return _problem("the ledger has not been read yet: try again in a moment", 503)
        return Response(payload, media_type="application/json")

    async def events(request: Request) -> Response:
        if not dashboard.authorized(request, query=True):
            return _refused()

        # The server shutting down sets it: the stream ends cleanly, and the server can stop.
        shutdown = anyio.Event()

        async def stream() -> AsyncIterator[dict[str, str]]:
            async for event, data in dashboard.payloads(shutdown):
                yield {"event": event, "data": data}

        return EventSourceResponse(
            stream(), ping=10, shutdown_event=shutdown, shutdown_grace_period=1.0
        )

    async def run_detail(request: Request) -> Response:
        if _names_an_action(request):
            return Response(status_code=405, headers={"allow": "POST"})
        if not dashboard.authorized(request):
            return _refused()
        run_id = _run_id(request)
        try:
            detail = await anyio.to_thread.run_sync(dashboard.run_detail, run_id)
        except LedgerError as error:
            return _problem(str(error), 409)
        if detail is None:
            return _problem(
                f"run {run_id!r} is not in the ledger: no run has that id, or it ended longer "
                "ago than the ledger keeps runs",
                404,
            )
        return JSONResponse(detail)

    async def act(work: Callable[[], Any]) -> Response:
        try:
            result = await anyio.to_thread.run_sync(work)
        except LedgerBusy as error:  # nothing was refused: the same action may succeed soon
            return JSONResponse(
                {"error": str(error)}, status_code=503, headers={"retry-after": "1"}
            )
        except LedgerError as error:
            return _problem(str(error), 409)
        dashboard.wake()
        return JSONResponse(result)

    async def answer(request: Request) -> Response:
        if not dashboard.authorized(request):
            return _refused()
        run_id = _run_id(request)
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
        run_id = _run_id(request)

        def work() -> dict[str, Any]:
            info = ledger.run_info(run_id)
            if info is not None and info.gone(time.time(), ledger.gone_after):
                raise LedgerError(
                    f"run {run_id!r} is gone: {unheard(info, time.time(), ledger.gone_after)}, "
                    "so its process is not running to hear a stop"
                )
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
            Route("/runs/{run_id:path}", index),
            Route("/api/state", state),
            Route("/api/events", events),
            # Path parameters: an id with slashes (sent as %2F, which the path has decoded)
            # is taken whole (``_run_id`` reads it). The actions come first, and their paths
            # end in their names.
            Route("/api/runs/{run_id:path}/answer", answer, methods=["POST"]),
            Route("/api/runs/{run_id:path}/stop", stop, methods=["POST"]),
            Route("/api/runs/{run_id:path}", run_detail),
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
