"""Many processes, one budget: the ledger never lets them overspend it.

Sixteen processes of 500 priced model calls spend one ``max_cost`` budget through SQLite and
through a real redis-server. The committed total never exceeds the limit, at least 95% of it
is used, the ledger's total is exactly what the answers cost, and no refused request was sent.
A worker killed while it holds a reservation costs the budget nothing once its lease runs out.
"""

from __future__ import annotations

import multiprocessing
import os
import random
import signal
import time
from decimal import Decimal
from multiprocessing.synchronize import Event as EventType
from pathlib import Path

import pytest

from haltwise import (
    CONTINUE,
    Governor,
    ModelRequest,
    ModelResponse,
    Prices,
    RunStarted,
    Stop,
    max_cost,
)
from haltwise.engine.ledger import Budget
from haltwise.engine.shared import nano_ceil
from haltwise.ledgers import open_ledger

from .conftest import RedisServer

WORKERS = 16
CALLS = 500
PRICES = {"m": {"input": "1", "output": "10"}}  # $ per million tokens
#: Each request: 1,000 prompt tokens and up to 100 output tokens, $0.002 at worst.
LIMIT = Decimal("2.50")


def _worker(url: str, seed: int, results: multiprocessing.Queue[tuple[int, int, int]]) -> None:
    rng = random.Random(seed)
    pricer = Prices(PRICES)
    governor = Governor(max_cost(str(LIMIT), key="fleet"), ledger=open_ledger(url), pricer=pricer)
    governor.handle(RunStarted("work"))
    sent = refused = spent = 0
    for _ in range(CALLS):
        decision = governor.handle(ModelRequest("m", max_tokens=100, input_tokens=1_000))
        if decision is not CONTINUE:
            assert isinstance(decision, Stop)
            assert decision.provider_called is False
            refused += 1
            governor.handle(RunStarted("work"))  # try again: others may have given some back
            continue
        sent += 1
        output = rng.randint(1, 100)
        cost = pricer.units("m", 1_000, output, 0, 0)
        assert cost is not None
        spent += nano_ceil(cost)
        governor.handle(ModelResponse("m", input_tokens=1_000, output_tokens=output))
    results.put((sent, refused, spent))


def _spend_from_many_processes(url: str) -> None:
    context = multiprocessing.get_context("fork")
    results: multiprocessing.Queue[tuple[int, int, int]] = context.Queue()
    workers = [
        context.Process(target=_worker, args=(url, seed, results)) for seed in range(WORKERS)
    ]
    for worker in workers:
        worker.start()
    totals = [results.get(timeout=120) for _ in workers]
    for worker in workers:
        worker.join(timeout=30)
        assert worker.exitcode == 0
    sent = sum(total[0] for total in totals)
    refused = sum(total[1] for total in totals)
    spent = sum(total[2] for total in totals)
    (state,) = [s for s in open_ledger(url).budgets() if s.budget.key == "fleet"]
    limit = int(LIMIT * 10**9)
    assert state.reserved == 0
    assert state.spent == spent  # exactly what the answers cost
    assert spent <= limit
    assert spent >= limit * 95 // 100
    assert sent + refused == WORKERS * CALLS
    assert refused > 0


def test_sqlite_processes_never_overspend(tmp_path: Path) -> None:
    _spend_from_many_processes(f"sqlite:///{tmp_path / 'fleet.db'}")


def test_redis_processes_never_overspend(redis_server: RedisServer) -> None:
    ledger = open_ledger(redis_server.url)
    for state in ledger.budgets():
        assert state.budget.key != "fleet"
    _spend_from_many_processes(redis_server.url)
    # Leave the server clean for the other tests.
    ledger._redis.flushdb()  # type: ignore[attr-defined]


def _holder(url: str, ready: EventType) -> None:
    governor = Governor(
        max_cost("0.01", key="killed"), ledger=open_ledger(url), pricer=Prices(PRICES), lease=1.0
    )
    governor.handle(RunStarted("holds"))
    governor.handle(ModelRequest("m", max_tokens=100, input_tokens=1_000))  # holds $0.002
    ready.set()
    time.sleep(60)


@pytest.mark.parametrize("backend", ["sqlite", "redis"])
def test_a_killed_holder_gives_its_reservation_back_when_the_lease_runs_out(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if backend == "sqlite":
        url = f"sqlite:///{tmp_path / 'killed.db'}"
    else:
        url = request.getfixturevalue("redis_server").url
    context = multiprocessing.get_context("fork")
    ready = context.Event()
    holder = context.Process(target=_holder, args=(url, ready))
    holder.start()
    assert ready.wait(30)
    os.kill(holder.pid or 0, signal.SIGKILL)
    holder.join()
    ledger = open_ledger(url)
    budget = Budget("killed", "nano_usd")
    assert not ledger.reserve(budget, 9_000_000, 10_000_000, holder="me").granted
    time.sleep(1.2)
    assert ledger.reserve(budget, 9_000_000, 10_000_000, holder="me").granted
