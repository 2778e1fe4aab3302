"""The dashboard under test: a real ``haltwise dashboard`` process, and Debian's Chromium
driven by Playwright for Python.

``scripts/test.sh`` installs both (``chromium`` from apt, ``playwright`` with the dev extra; no
browser is downloaded). Where either is missing the browser tests skip saying so, unless
``CI_REQUIRE_BROWSER=1`` (CI), where they fail.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from haltwise.engine.ledger import MemoryLedger, RunInfo
from haltwise.ledgers.sqlite import SqliteLedger

pytest.importorskip("starlette", reason="the dashboard's extra is not installed")


def _unavailable(why: str) -> None:
    if os.environ.get("CI_REQUIRE_BROWSER") == "1":
        pytest.fail(f"{why} (scripts/test.sh installs it)")
    pytest.skip(why)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Chromium for one test module: Playwright's synchronous API keeps an event loop running
    on this thread while it is open, which other tests' ``asyncio.run`` would trip over."""
    chromium = shutil.which("chromium")
    if chromium is None:
        _unavailable("chromium is not installed: `apt-get install chromium` to run these")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("playwright is not installed: `pip install playwright` to run these")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=chromium, args=["--no-sandbox"] if os.geteuid() == 0 else []
        )
        yield launched
        launched.close()


class DashboardProcess:
    """``python -m haltwise dashboard`` on a free port, until ``stop``."""

    def __init__(self, ledger: str, env: dict[str, str]) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "haltwise", "dashboard", "--ledger", ledger, "--port", "0"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert self.process.stdout is not None
        first = self._first_line()
        found = re.search(r"(http://127\.0\.0\.1:\d+)/#token=(\S+)", first)
        assert found, f"no URL in {first!r}: {self.process.stderr and self.process.stderr.read()}"
        #: The server's root, and the token it printed.
        self.base = found[1]
        self.token = found[2]
        self.url = found[0]

    def _first_line(self) -> str:
        got: list[str] = []
        reader = threading.Thread(target=lambda: got.append(self.process.stdout.readline()))  # type: ignore[union-attr]
        reader.start()
        reader.join(timeout=30)
        if not got:
            self.stop()
            raise AssertionError("haltwise dashboard printed nothing in 30 s")
        return got[0]

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        #: What it wrote to stderr, once stopped.
        self.stderr = self.process.communicate()[1]
        return self.process.returncode


def clean_env(tmp_path: Path) -> dict[str, str]:
    """This environment without haltwise's or OpenAI's settings, its data under ``tmp_path``."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("HALTWISE_", "OPENAI_"))
    }
    env.update(XDG_DATA_HOME=str(tmp_path / "data"), PYTHONUNBUFFERED="1")
    return env


class ServedApp:
    """An app (``create_app`` over a ledger of the test's own) served by uvicorn on a free
    loopback port, on a thread of this process, until ``stop``: for a ledger the test steers
    (one that hangs), which a ``haltwise dashboard`` process could not be given. Close the
    pages first: their event streams end with them."""

    def __init__(self, app: Any) -> None:
        import socket

        import uvicorn

        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(16)
        #: The server's root.
        self.base = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self.listener]}, daemon=True
        )
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started and time.monotonic() < deadline:
            time.sleep(0.01)
        assert self.server.started, "uvicorn did not start in 10 s"

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
        self.listener.close()


class Stuck(MemoryLedger):
    """A memory ledger whose reads of the live runs hang while ``hang`` is clear, as a SQLite
    file locked by another process, or a Redis server that does not answer, would."""

    def __init__(self) -> None:
        super().__init__()
        self.hang = threading.Event()
        self.hang.set()

    def runs(self, *, live: bool = True, limit: int = 100) -> list[RunInfo]:
        self.hang.wait()
        return super().runs(live=live, limit=limit)


#: The choices a run's question offers.
CHOICES = ("continue", "extend", "wrap_up", "abort")


def gone_fleet(path: Path) -> SqliteLedger:
    """A SQLite ledger at ``path`` with two runs: ``dead``, which asked a question and was last
    heard from two minutes ago (its process killed), and ``alive``, just registered, which
    started before it. The ledger is returned open."""
    then = time.time() - 120
    with SqliteLedger(path, clock=lambda: then) as before:
        before.register(RunInfo("dead", started=then))
        before.ask("dead", "Go on?", CHOICES)
        before.heartbeat("dead", {"turns": 2}, "waiting")  # then its process was killed
    ledger = SqliteLedger(path)
    ledger.register(RunInfo("alive", started=then - 10))
    return ledger


def run_path(run_id: str) -> str:
    """``run_id`` as the page's script writes it in a path (``runPath`` in ``static/app.js``)."""
    from haltwise.dashboard.app import ESCAPE  # the app needs the extra, checked for above

    escaped = run_id in ("", ".", "..") or run_id.startswith(ESCAPE)
    return (ESCAPE if escaped else "") + quote(run_id, safe="")
