"""What sharing a budget costs: the ledgers' throughput, and a governed event with a shared limit.

1. Reserve + commit pairs per second (one model request's worth of ledger work) from 1 and from 16
   processes, on SQLite (one file, WAL) and on a real ``redis-server`` started here (skipped,
   saying why, when it is not installed). Goals: at least 20,000/s on Redis and 5,000/s on
   SQLite with 16 processes.
2. One governed run (the governor benchmark's stream) with ``max_cost("5")`` local, against the
   same run with ``max_cost("5", key="team")`` shared through each ledger, side by side in
   interleaved rounds: what the ledger adds per event, and that a run with no shared limit
   pays nothing for the feature (the governor benchmark compares it with an earlier revision).

``python benchmarks/run.py ledger``
"""

from __future__ import annotations

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

from haltwise import Governor, Prices, max_cost, max_turns
from haltwise.engine.ledger import Budget, Ledger, MemoryLedger
from haltwise.ledgers import open_ledger

PAIRS_PER_PROCESS = 2_000
PROCESSES = (1, 16)
ROUNDS = 15
PRICES = Prices({"gpt-4o": {"input": "2.50", "output": "10.00", "cache_read": "1.25"}})


def _pairs(url: str, count: int, start: EventType) -> None:
    ledger = open_ledger(url)
    budget = Budget("bench", "nano_usd")
    start.wait()
    for _ in range(count):
        grant = ledger.reserve(budget, 1_000, 10**15, holder=f"p{os.getpid()}")
        ledger.commit(budget, grant.id, 700)
    ledger.close()


def throughput(url: str, processes: int) -> float:
    """Reserve + commit pairs per second, ``processes`` at once."""
    context = multiprocessing.get_context("fork")
    start = context.Event()
    workers = [
        context.Process(target=_pairs, args=(url, PAIRS_PER_PROCESS, start))
        for _ in range(processes)
    ]
    for worker in workers:
        worker.start()
    time.sleep(0.3)  # every worker connected and waiting
    began = time.perf_counter()
    start.set()
    for worker in workers:
        worker.join()
        assert worker.exitcode == 0
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


def governed_run(ledger: Ledger, shared: bool) -> Callable[[], None]:
    import bench_governor as stream

    limit = max_cost("5", key="team") if shared else max_cost("5")
    governor = Governor(limit | max_turns(25), ledger=ledger, pricer=PRICES)
    events = stream.build_run()
    handle = governor.handle

    def run() -> None:
        for event in events:
            handle(event)

    return run


def main() -> None:
    targets: list[tuple[str, str, Redis | None]] = []
    folder = Path(tempfile.mkdtemp(prefix="haltwise-ledger-bench-"))
    targets.append(("SQLite", f"sqlite://{folder / 'bench.db'}", None))
    if shutil.which("redis-server"):
        redis = Redis()
        targets.append(("Redis", redis.url, redis))
    else:
        print("(Redis skipped: redis-server is not installed; apt-get install redis-server)")
    goals = {"SQLite": 5_000, "Redis": 20_000}
    try:
        print("reserve + commit pairs per second (one model request's ledger work)")
        for name, url, _ in targets:
            for processes in PROCESSES:
                rate = throughput(url, processes)
                verdict = ""
                if processes == 16:
                    goal = goals[name]
                    verdict = f"  goal >= {goal:,}/s: {'PASS' if rate >= goal else 'UNDER'}"
                print(
                    f"  {name:7} {processes:2} process{'es' if processes > 1 else '  '}"
                    f"  {rate:10,.0f}/s{verdict}"
                )

        print(
            "\none governed run of 162 events, max_cost local vs shared (per event, median of "
            f"{ROUNDS} interleaved rounds)"
        )
        contenders = [("local limit (memory ledger)", governed_run(MemoryLedger(), False))]
        contenders.append(("shared, memory ledger", governed_run(MemoryLedger(), True)))
        for name, url, _ in targets:
            contenders.append((f"shared, {name}", governed_run(open_ledger(url), True)))
        times: dict[str, list[float]] = {label: [] for label, _ in contenders}
        for _ in range(ROUNDS):
            for label, run in contenders:
                began = time.perf_counter()
                run()
                times[label].append((time.perf_counter() - began) / 162)
        base = statistics.median(times[contenders[0][0]])
        for label, _ in contenders:
            median = statistics.median(times[label])
            print(f"  {label:28} {median * 1e6:8.1f} us/event  {median / base:6.2f}x")
    finally:
        for _, _, server in targets:
            if server is not None:
                server.stop()
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
