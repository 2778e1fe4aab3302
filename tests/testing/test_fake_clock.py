"""FakeClock: a monotonic clock, sleep and async sleep that only move when told to."""

from __future__ import annotations

import asyncio
import math
import threading
import time
from collections.abc import Callable

import pytest

from haltwise.testing import FakeClock


def test_starts_where_told_and_reads_like_time_monotonic() -> None:
    assert FakeClock()() == 0.0
    clock = FakeClock(start=100.5)
    assert clock() == 100.5
    assert clock.now == 100.5
    assert isinstance(clock(), float)
    assert FakeClock(7)() == 7.0


def test_advance_moves_forward_and_returns_the_new_time() -> None:
    clock = FakeClock()
    assert clock.advance(1.5) == 1.5
    assert clock.advance(0) == 1.5
    assert clock.advance(2) == 3.5
    assert clock.now == clock() == 3.5
    assert clock.sleeps == ()  # advancing is not sleeping


def test_negative_advance_is_rejected_with_a_clear_message() -> None:
    clock = FakeClock(10.0)
    with pytest.raises(ValueError, match=r"advance\(\).*-1.*cannot go backwards"):
        clock.advance(-1)
    assert clock() == 10.0


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_non_finite_durations_are_rejected(bad: float) -> None:
    clock = FakeClock()
    with pytest.raises(ValueError, match="finite"):
        clock.advance(bad)
    with pytest.raises(ValueError, match="finite"):
        clock.sleep(bad)
    assert clock() == 0.0


def test_bad_types_are_rejected() -> None:
    with pytest.raises(TypeError):
        FakeClock().advance("1")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        FakeClock().sleep(True)
    with pytest.raises(TypeError):
        FakeClock("0")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="finite"):
        FakeClock(math.inf)


def test_sleep_advances_instantly_and_is_recorded() -> None:
    clock = FakeClock()
    started = time.monotonic()
    clock.sleep(3600)
    clock.sleep(0.25)
    assert time.monotonic() - started < 0.5
    assert clock() == 3600.25
    assert clock.sleeps == (3600.0, 0.25)
    with pytest.raises(ValueError, match="non-negative"):
        clock.sleep(-0.1)


def test_asleep_advances_and_lets_other_tasks_run() -> None:
    clock = FakeClock()
    order: list[str] = []

    async def sleeper() -> None:
        order.append("sleeper starts")
        await clock.asleep(30)
        order.append("sleeper wakes")

    async def other() -> None:
        order.append("other runs")

    async def main() -> None:
        await asyncio.gather(sleeper(), other())

    started = time.monotonic()
    asyncio.run(main())
    assert time.monotonic() - started < 0.5
    assert order == ["sleeper starts", "other runs", "sleeper wakes"]
    assert clock() == 30.0
    assert clock.sleeps == (30.0,)


def test_usable_wherever_time_monotonic_is_expected() -> None:
    def timed_out(
        started: float, limit: float, clock: Callable[[], float] = time.monotonic
    ) -> bool:
        return clock() - started >= limit

    clock = FakeClock()
    started = clock()
    assert not timed_out(started, 5.0, clock=clock)
    clock.advance(4.999)
    assert not timed_out(started, 5.0, clock=clock)
    clock.sleep(0.001)
    assert timed_out(started, 5.0, clock=clock)


def test_thread_safe_advances() -> None:
    clock = FakeClock()

    def work() -> None:
        for _ in range(1000):
            clock.advance(1)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert clock() == 8000.0


def test_repr_shows_the_time() -> None:
    clock = FakeClock(2.5)
    assert repr(clock) == "FakeClock(now=2.5)"
