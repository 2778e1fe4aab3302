"""How a guarded block ends when no event of its own is there to end it.

- A block that falls off its end after its time ran out (or after ``cancel()``): the implicit
  finish meets the stop, which the ``with`` catches like any other.
- ``guard.arun()`` with a synchronous prompter: the prompter waits on a thread of its own, for
  the ask's timeout and no more, while the loop goes on.
- ``guard.arun()`` and a time limit set mid-run (``Governor.set_limit``): the block's task is
  cancelled at the new deadline, with no event in between.

The deadline tests wait for real, a fraction of a second: only the real clock moves the
loop's timers. Each runs on a daemon thread that must finish within ``WAITING``, so that a
block the run fails to end fails the test instead of hanging the suite.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable

import pytest
from finishing import WAITING, finished

from haltwise import (
    Ask,
    Guard,
    Outcome,
    Status,
    TimeLimitExceeded,
    max_turns,
    timeout,
)
from haltwise.engine.policies import ask
from haltwise.testing import FakeClock

#: How soon after its deadline a run must have ended.
PROMPTLY = 1.0


# The implicit finish


#: How the block's last step ends the run, and the status it ends with.
ENDINGS: dict[str, tuple[Callable[[Guard, FakeClock], object], Status]] = {
    "its time ran out": (lambda guard, clock: clock.advance(11), Status.TIMED_OUT),
    "it was cancelled": (lambda guard, clock: guard.governor.cancel("stop"), Status.CANCELLED),
}


@pytest.mark.parametrize("ending", ENDINGS)
def test_a_stop_met_as_the_block_falls_off_its_end_is_caught(ending: str) -> None:
    end, status = ENDINGS[ending]
    clock = FakeClock()
    guard = Guard(timeout(seconds=10), clock=clock)
    with guard.run("go") as run:
        run.turn()
        end(guard, clock)
    assert run.outcome is not None and run.outcome.status is status


@pytest.mark.parametrize("ending", ENDINGS)
def test_a_stop_met_as_the_async_block_falls_off_its_end_is_caught(ending: str) -> None:
    end, status = ENDINGS[ending]

    async def main() -> Outcome | None:
        clock = FakeClock()
        guard = Guard(timeout(seconds=10), clock=clock)
        async with guard.arun("go") as run:
            await run.turn()
            end(guard, clock)
        return run.outcome

    outcome = asyncio.run(main())
    assert outcome is not None and outcome.status is status


def test_without_suppress_the_stop_met_at_the_end_propagates() -> None:
    clock = FakeClock()
    guard = Guard(timeout(seconds=10), clock=clock)
    with pytest.raises(TimeLimitExceeded), guard.run("go", suppress=False) as run:
        run.turn()
        clock.advance(11)
    assert run.outcome is not None and run.outcome.status is Status.TIMED_OUT


# A synchronous prompter under arun


def test_arun_gives_a_sync_prompter_the_asks_timeout_and_no_more() -> None:
    release = threading.Event()

    def slow(question: Ask) -> bool:
        release.wait(2 * WAITING)  # a human who never answers
        return True

    async def main() -> Outcome | None:
        guard = Guard(max_turns(0, on_limit=ask(timeout=0.05)), prompter=slow)
        async with guard.arun("go") as run:
            await run.turn()
        return run.outcome

    try:
        outcome = finished(lambda: asyncio.run(main()))
    finally:
        release.set()
    assert outcome is not None and outcome.reason == "turn_limit"
    assert "No answer came within 0.05s" in outcome.message


def test_arun_goes_on_with_its_other_tasks_while_a_sync_prompter_waits() -> None:
    """The human answers through another task of the loop (a web page's handler, say): with
    the prompter on the loop's own thread, that task could never run."""
    answered = threading.Event()

    def prompter(question: Ask) -> bool:
        return answered.wait(WAITING)

    async def main() -> Outcome | None:
        async def answer() -> None:
            answered.set()

        guard = Guard(max_turns(0, on_limit="ask"), prompter=prompter)
        async with guard.arun("go") as run:
            answering = asyncio.create_task(answer())
            await run.turn()
            await answering
            await run.finish("done")
        return run.outcome

    outcome = finished(lambda: asyncio.run(main()))
    assert outcome is not None and outcome.status is Status.COMPLETED


# A deadline set mid-run


@pytest.mark.parametrize("where", ["in the block", "on another thread"])
def test_a_time_limit_set_mid_run_cancels_a_hung_await_at_its_deadline(where: str) -> None:
    async def main() -> tuple[Outcome | None, float]:
        guard = Guard(max_turns(10))
        limit = timeout(seconds=0.05)
        async with guard.arun("go") as run:
            await run.turn()
            started = time.monotonic()
            if where == "in the block":
                guard.governor.set_limit(limit)
            else:
                await asyncio.to_thread(guard.governor.set_limit, limit)
            await asyncio.sleep(2 * WAITING)  # a hung call: only the run's deadline ends it
        return run.outcome, time.monotonic() - started

    outcome, took = finished(lambda: asyncio.run(main()))
    assert outcome is not None and outcome.status is Status.TIMED_OUT
    assert took < PROMPTLY
