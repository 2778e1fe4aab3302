"""What sharing a budget costs: the ledgers' throughput, and a governed event with a shared limit.

Today's code is timed beside the base revision's (``HALTWISE_BENCH_BASE``, by default ``main``:
extracted with ``git archive`` and imported under another name; skipped, saying why, outside a
git checkout), in the same run.

1. Reserve + commit pairs per second (one model request's worth of ledger work) from 1 and from 16
   processes, on SQLite (one file, WAL) and on a real ``redis-server`` started here (skipped,
   saying why, when it is not installed), today's and the base revision's; the best of
   interleaved rounds, since the machine is shared. Goals: at least 20,000/s on Redis and
   5,000/s on SQLite with 16 processes. Beside them, ceilings: the same processes and round
   trips doing next to nothing. For SQLite, two of the ledger's own write transactions per pair,
   each an ``UPDATE`` of one row; for Redis, two ``EVALSHA`` of ``return 1`` per pair over a
   bare socket (no framing, no parsing: the most any Python client could do), and through
   redis-py's ``evalsha``.
2. One governed run (the governor benchmark's stream) with ``max_cost`` local and no ledger,
   today's and the base revision's, and with ``max_cost(..., key="team")`` shared through each
   ledger, side by side in interleaved rounds: what the ledger adds per event, and that a run
   with no shared limit is not slower than before.

``python benchmarks/run.py ledger``
"""

from __future__ import annotations

import hashlib
import importlib.util
import multiprocessing
import os
import shutil
import socket
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from multiprocessing.synchronize import Event as EventType
from pathlib import Path
from typing import Any

import redis as redis_py

import haltwise
from haltwise.engine.ledger import Budget, Ledger, MemoryLedger
from haltwise.ledgers import open_ledger
from haltwise.ledgers.sqlite import SqliteLedger
from revisions import load_revision

PAIRS_PER_PROCESS = 2_000
PROCESSES = (1, 16)
#: Interleaved rounds of the throughput table (its best is the figure: others' load only lowers it).
THROUGHPUT_ROUNDS = 3
ROUNDS = 30
#: Governed runs timed together in each round of each contender (one run is short).
RUNS_PER_BATCH = 10
PRICES = {"gpt-4o": {"input": "2.50", "output": "10.00", "cache_read": "1.25"}}
#: The revision whose Governor is timed beside today's, with no ledger.
BASE_REVISION = os.environ.get("HALTWISE_BENCH_BASE", "main")
#: The name the base revision's package is imported under.
BASE_PACKAGE = "haltwise_at_base"
TRIVIAL = b"return 1"

Worker = Callable[[str, int, EventType], None]


def _spend(ledger: Any, budget: Any, count: int, start: EventType) -> None:
    start.wait()
    for _ in range(count):
        grant = ledger.reserve(budget, 1_000, 10**15, holder=f"p{os.getpid()}")
        ledger.commit(budget, grant.id, 700)
    ledger.close()


def _pairs(url: str, count: int, start: EventType) -> None:
    _spend(open_ledger(url), Budget("bench", "nano_usd"), count, start)


def _pairs_at_base(url: str, count: int, start: EventType) -> None:
    """The same with the ledgers of the base revision (``load_revision`` loaded it)."""
    ledgers = importlib.import_module(f"{BASE_PACKAGE}.ledgers")
    budget = importlib.import_module(f"{BASE_PACKAGE}.engine.ledger").Budget
    _spend(ledgers.open_ledger(url), budget("bench", "nano_usd"), count, start)


def _bare_sqlite(url: str, count: int, start: EventType) -> None:
    """Two of the ledger's own write transactions per pair, each with one UPDATE of one row."""
    ledger = SqliteLedger(url.removeprefix("sqlite://"))
    with ledger._transaction() as db:
        db.execute("CREATE TABLE IF NOT EXISTS bare (id INTEGER PRIMARY KEY, n INTEGER)")
        db.execute("INSERT OR IGNORE INTO bare VALUES (1, 0)")
    start.wait()
    for _ in range(2 * count):
        with ledger._transaction() as db:
            db.execute("UPDATE bare SET n = n + 1 WHERE id = 1")
    ledger.close()


def _bare_socket(url: str, count: int, start: EventType) -> None:
    """Two EVALSHA of ``return 1`` per pair on a bare socket: sent, and the reply's line read."""
    port = int(url.rsplit(":", 1)[1].split("/")[0])
    conn = socket.create_connection(("127.0.0.1", port))
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    conn.sendall(b"*3\r\n$6\r\nSCRIPT\r\n$4\r\nLOAD\r\n$8\r\n" + TRIVIAL + b"\r\n")
    sha = conn.recv(128).split(b"\r\n")[1]
    command = b"*3\r\n$7\r\nEVALSHA\r\n$40\r\n" + sha + b"\r\n$1\r\n0\r\n"
    start.wait()
    for _ in range(2 * count):
        conn.sendall(command)
        reply = conn.recv(64)
        while not reply.endswith(b"\r\n"):
            reply += conn.recv(64)
    conn.close()


def _redis_py(url: str, count: int, start: EventType) -> None:
    """Two ``evalsha`` of ``return 1`` per pair through redis-py's client."""
    client = redis_py.Redis.from_url(url)
    sha = client.script_load(TRIVIAL)
    assert sha == hashlib.sha1(TRIVIAL).hexdigest()
    start.wait()
    for _ in range(2 * count):
        client.evalsha(sha, 0)
    client.close()


def throughput(worker: Worker, url: str, processes: int) -> float:
    """Pairs per second, ``processes`` at once."""
    context = multiprocessing.get_context("fork")
    start = context.Event()
    workers = [
        context.Process(target=worker, args=(url, PAIRS_PER_PROCESS, start))
        for _ in range(processes)
    ]
    for process in workers:
        process.start()
    time.sleep(0.3)  # every worker connected and waiting
    began = time.perf_counter()
    start.set()
    for process in workers:
        process.join()
        assert process.exitcode == 0
    return processes * PAIRS_PER_PROCESS / (time.perf_counter() - began)


class Redis:
    """A throwaway ``redis-server`` on a free port, no persistence."""

    def __init__(self) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.dir = tempfile.mkdtemp(prefix="haltwise-redis-")
        self.process = subprocess.Popen(
            [
                "redis-server",
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                self.dir,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
        )
        self.url = f"redis://127.0.0.1:{self.port}/0"
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("redis-server did not start")

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)
        shutil.rmtree(self.dir, ignore_errors=True)


def governed_run(ledger: Ledger | None, shared: bool, api: Any = haltwise) -> Callable[[], None]:
    import bench_governor as stream

    # $1,000: no round of the benchmark spends the shared budget (about $0.20 a run) to its end.
    limit = api.max_cost("1000", key="team") if shared else api.max_cost("1000")
    governor = api.Governor(limit | api.max_turns(25), ledger=ledger, pricer=api.Prices(PRICES))
    events = stream.build_run(api=api)
    handle = governor.handle

    def run() -> None:
        for event in events:
            handle(event)

    return run


def print_throughput(targets: list[tuple[str, str, Redis | None]], base: Any) -> None:
    rows: list[tuple[str, str, Worker, str, int]] = []
    for name, url, server in targets:
        for processes in PROCESSES:
            rows.append((name, "haltwise", _pairs, url, processes))
        if not isinstance(base, str):
            # Its own file or database: an older layout is not opened by both.
            base_url = url.replace("bench.db", "base.db") if server is None else url[:-1] + "1"
            for processes in PROCESSES:
                rows.append(
                    (name, f"haltwise at {BASE_REVISION}", _pairs_at_base, base_url, processes)
                )
        if server is None:
            rows.append((name, "ceiling: bare UPDATE transactions", _bare_sqlite, url, 16))
        else:
            rows.append((name, "ceiling: bare socket, EVALSHA", _bare_socket, url, 16))
            rows.append((name, "redis-py evalsha (return 1)", _redis_py, url, 16))
    rates: dict[int, list[float]] = {index: [] for index in range(len(rows))}
    for _ in range(THROUGHPUT_ROUNDS):
        for index, (_, _, worker, url, processes) in enumerate(rows):
            rates[index].append(throughput(worker, url, processes))
    print(
        "reserve + commit pairs per second (one model request's ledger work; ceilings: the same "
        f"round trips doing nothing), best and median of {THROUGHPUT_ROUNDS} interleaved rounds"
    )
    goals = {"SQLite": 5_000, "Redis": 20_000}
    ours = {
        (name, processes): max(rates[index])
        for index, (name, _, worker, _, processes) in enumerate(rows)
        if worker is _pairs
    }
    for index, (name, what, worker, _, processes) in enumerate(rows):
        best, median = max(rates[index]), statistics.median(rates[index])
        note = ""
        if worker is _pairs and processes == 16:
            goal = goals[name]
            note = f"  goal >= {goal:,}/s: {'PASS' if best >= goal else 'UNDER'}"
        elif worker is _pairs_at_base:
            note = f"  haltwise is {ours[(name, processes)] / best:.1f}x it"
        elif worker is not _pairs:
            note = f"  haltwise is {ours[(name, processes)] / best:.0%} of it"
        print(
            f"  {name:7} {what:34} {processes:2} process{'es' if processes > 1 else '  '}"
            f"  {best:8,.0f}/s (median {median:8,.0f}){note}"
        )


def main() -> None:
    targets: list[tuple[str, str, Redis | None]] = []
    folder = Path(tempfile.mkdtemp(prefix="haltwise-ledger-bench-"))
    targets.append(("SQLite", f"sqlite://{folder / 'bench.db'}", None))
    if shutil.which("redis-server"):
        server = Redis()
        targets.append(("Redis", server.url, server))
    else:
        print("(Redis skipped: redis-server is not installed; apt-get install redis-server)")
    base = load_revision(BASE_REVISION, BASE_PACKAGE)
    if isinstance(base, str):
        print(f"(the base revision is not timed: {base})")
    try:
        print_throughput(targets, base)
        print(
            "\none governed run of 162 events, max_cost local vs shared (per event, median of "
            f"{ROUNDS} interleaved rounds of {RUNS_PER_BATCH} runs)"
        )
        contenders = [("local limit, no ledger", governed_run(None, False))]
        if not isinstance(base, str):
            contenders.append((f"  the same at {BASE_REVISION}", governed_run(None, False, base)))
        contenders.append(("shared, memory ledger", governed_run(MemoryLedger(), True)))
        for name, url, _ in targets:
            contenders.append((f"shared, {name}", governed_run(open_ledger(url), True)))
        times: dict[str, list[float]] = {label: [] for label, _ in contenders}
        for _ in range(ROUNDS):
            for label, run in contenders:
                began = time.perf_counter()
                for _ in range(RUNS_PER_BATCH):
                    run()
                times[label].append((time.perf_counter() - began) / (162 * RUNS_PER_BATCH))
        first = statistics.median(times[contenders[0][0]])
        for label, _ in contenders:
            median = statistics.median(times[label])
            print(f"  {label:28} {median * 1e6:8.1f} us/event  {median / first:6.2f}x")
    finally:
        for _, _, started in targets:
            if started is not None:
                started.stop()
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
