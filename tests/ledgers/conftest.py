"""Ledgers under test: in memory, a SQLite file, and a real ``redis-server`` started here.

``redis-server`` (the Debian package; ``scripts/test.sh`` installs it) runs on a free port with
no persistence, for the whole session, and is stopped at the end. Where it is missing the Redis
cases skip saying so, unless ``CI_REQUIRE_REDIS=1`` (CI), where they fail.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from haltwise.engine.ledger import Ledger, MemoryLedger
from haltwise.ledgers.sqlite import SqliteLedger


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class RedisServer:
    """A ``redis-server`` process on a free loopback port, with no persistence."""

    def __init__(self, directory: Path, *, persistent: bool = False) -> None:
        self.port = _free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.directory = directory
        self.persistent = persistent
        self.start()

    def start(self) -> None:
        """Start it (again: on the same port and files)."""
        self.process = subprocess.Popen(
            [
                "redis-server",
                *("--port", str(self.port), "--bind", "127.0.0.1", "--save", ""),
                *("--appendonly", "yes" if self.persistent else "no", "--appendfsync", "always"),
                *("--dir", str(self.directory)),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as conn:
                    conn.sendall(b"PING\r\n")
                    if conn.recv(16).startswith(b"+PONG"):
                        return
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"redis-server did not start on port {self.port}")

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    if shutil.which("redis-server") is None:
        if os.environ.get("CI_REQUIRE_REDIS") == "1":
            pytest.fail("redis-server is not installed (scripts/test.sh installs it)")
        pytest.skip("redis-server is not installed: `apt-get install redis-server` to run these")
    server = RedisServer(tmp_path_factory.mktemp("redis"))
    yield server
    server.stop()


LedgerFactory = Callable[[], Ledger]


@pytest.fixture(params=["memory", "sqlite", "redis"])
def make_ledger(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LedgerFactory]:
    """Opens ledgers that share one store: each call is another "process" on the same data."""
    yield from _opener(request.param, request, tmp_path)


@pytest.fixture(params=["sqlite", "redis"])
def make_shared(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LedgerFactory]:
    """The same, for the ledgers that processes share (a memory ledger's runs are not live)."""
    yield from _opener(request.param, request, tmp_path)


def _opener(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LedgerFactory]:
    made: list[Ledger] = []
    if kind == "memory":
        shared = MemoryLedger()

        def make() -> Ledger:
            return shared

    elif kind == "sqlite":
        path = tmp_path / "ledger.db"

        def make() -> Ledger:
            ledger = SqliteLedger(path)
            made.append(ledger)
            return ledger

    else:
        from haltwise.ledgers.redis import RedisLedger

        server: RedisServer = request.getfixturevalue("redis_server")
        prefix = f"test-{uuid.uuid4().hex[:8]}:"

        def make() -> Ledger:
            ledger = RedisLedger(server.url, prefix=prefix)
            made.append(ledger)
            return ledger

    yield make
    for ledger in made:
        ledger.close()
