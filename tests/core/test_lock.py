"""The governor's lock: reentrant, one thread at a time, and a wait for it that times out or is
interrupted as ``threading.RLock``'s is.

Compiled, a governor's lock is ``dispatch.Lock``, which the dispatch takes and lets go in C; a
thread that finds it held waits on a ``threading.Lock``, so that Ctrl-C still stops a thread
waiting for a governor (a lock that waited in C could not be interrupted). Interpreted, it is
a ``threading.RLock``. Both builds run these tests; ``Lock`` itself is tested in both (it is an
RLock inside, interpreted).
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from collections.abc import Iterator
from types import FrameType

import pytest

from haltwise import Continue, Governor, RunStarted, TurnStarting, max_turns
from haltwise.engine.dispatch import COMPILED, Lock

THREADS = 8
ROUNDS = 2_000
#: A thread that holds a lock in these tests lets it go after this long at most, so that a
#: lock that cannot be interrupted fails a test instead of hanging the suite.
HOLD = 10.0


class Interrupted(Exception):
    """Raised by the test's SIGINT handler (the default one would stop pytest itself)."""


@pytest.fixture
def held() -> Iterator[tuple[Lock, threading.Event]]:
    """A ``Lock`` held by another thread until the event is set (or ``HOLD`` passes)."""
    lock = Lock()
    taken, go = threading.Event(), threading.Event()

    def holder() -> None:
        with lock:
            taken.set()
            go.wait(HOLD)

    thread = threading.Thread(target=holder)
    thread.start()
    assert taken.wait(5)
    yield lock, go
    go.set()
    thread.join(5)


def taken_elsewhere(lock: Lock) -> bool:
    """Whether another thread can take ``lock`` now (it lets it go at once)."""
    result: list[bool] = []

    def attempt() -> None:
        got = lock.acquire(blocking=False)
        if got:
            lock.release()
        result.append(got)

    thread = threading.Thread(target=attempt)
    thread.start()
    thread.join(5)
    return result == [True]


def test_a_governors_lock_is_taken_in_c_in_the_compiled_build() -> None:
    lock = Governor(None).lock
    if COMPILED:
        assert type(lock) is Lock
    else:
        assert type(lock) is type(threading.RLock())


def test_the_thread_that_holds_it_may_take_it_again() -> None:
    lock = Lock()
    assert lock.acquire()
    assert lock.acquire()
    lock.release()
    assert not taken_elsewhere(lock)  # still held once
    lock.release()
    assert taken_elsewhere(lock)


def test_only_its_holder_may_let_it_go() -> None:
    lock = Lock()
    with pytest.raises(RuntimeError):
        lock.release()
    errors: list[BaseException] = []

    def release() -> None:
        try:
            lock.release()
        except RuntimeError as error:
            errors.append(error)

    with lock:
        thread = threading.Thread(target=release)
        thread.start()
        thread.join(5)
    assert len(errors) == 1
    assert taken_elsewhere(lock)


@pytest.mark.parametrize(
    ("blocking", "timeout"), [(False, 1.0), (True, -2.0)], ids=["timeout-without-wait", "negative"]
)
def test_its_arguments_are_checked_as_an_rlocks_are(blocking: bool, timeout: float) -> None:
    lock = Lock()
    with pytest.raises(ValueError, match="timeout"):
        lock.acquire(blocking, timeout)
    with pytest.raises(ValueError, match="timeout"):
        threading.RLock().acquire(blocking, timeout)
    assert taken_elsewhere(lock)  # nothing taken


def test_a_wait_for_it_times_out_or_is_not_made(held: tuple[Lock, threading.Event]) -> None:
    lock, go = held
    started = time.monotonic()
    assert not lock.acquire(timeout=0.2)
    assert 0.15 <= time.monotonic() - started < HOLD / 2
    assert not lock.acquire(blocking=False)
    go.set()
    assert lock.acquire(timeout=5)  # let go by its holder: taken
    lock.release()
    assert taken_elsewhere(lock)


def test_threads_taking_it_in_turn_lose_no_update() -> None:
    lock = Lock()
    counts = [0]
    barrier = threading.Barrier(THREADS)

    def work() -> None:
        barrier.wait()
        for _ in range(ROUNDS):
            with lock, lock:  # the second time, reentrant
                count = counts[0]
                time.sleep(0)  # let another thread run here, if the lock let it in
                counts[0] = count + 1

    previous = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=work) for _ in range(THREADS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
    finally:
        sys.setswitchinterval(previous)
    assert counts[0] == THREADS * ROUNDS
    assert taken_elsewhere(lock)  # free again, uncontended


def test_ctrl_c_stops_a_thread_waiting_for_a_governor() -> None:
    governor = Governor(max_turns(10))
    governor.handle(RunStarted())
    taken, go = threading.Event(), threading.Event()

    def holder() -> None:
        with governor.lock:
            taken.set()
            go.wait(HOLD)

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise Interrupted

    previous = signal.signal(signal.SIGINT, interrupt)
    thread = threading.Thread(target=holder)
    timer = threading.Timer(0.2, signal.pthread_kill, (threading.get_ident(), signal.SIGINT))
    thread.start()
    try:
        assert taken.wait(5)
        timer.start()
        started = time.monotonic()
        with pytest.raises(Interrupted):
            governor.handle(TurnStarting())
        assert time.monotonic() - started < HOLD / 2, "the wait ended only when the lock was free"
    finally:
        go.set()
        thread.join(5)
        timer.cancel()
        timer.join(5)
        signal.signal(signal.SIGINT, previous)  # once no signal can come from the timer
    assert isinstance(governor.handle(TurnStarting()), Continue)
    assert governor.usage.turns == 1  # the interrupted event was not counted


def test_a_condition_waits_on_it_as_on_an_rlock() -> None:
    # threading.Condition lets a reentrant lock go whole while it waits (``_release_save``)
    # and takes it back as it was: held twice here, and another thread takes it meanwhile.
    lock = Lock()
    # Its stubs name only the standard library's locks; it asks any of what Lock has.
    condition = threading.Condition(lock)  # type: ignore[arg-type]
    ready: list[bool] = []

    def notify() -> None:
        with condition:
            ready.append(True)
            condition.notify()

    with lock, condition:
        thread = threading.Thread(target=notify)
        thread.start()
        assert condition.wait_for(lambda: ready, timeout=5)
        assert not taken_elsewhere(lock)
    thread.join(5)
    assert taken_elsewhere(lock)
    with pytest.raises(RuntimeError):
        condition.wait(0.01)  # not held


@pytest.mark.parametrize("kind", [threading.RLock, Lock])
def test_a_lock_set_in_place_of_the_governors_own_is_the_one_each_event_takes(
    kind: type[object],
) -> None:
    governor = Governor(max_turns(100))
    lock: threading.RLock = kind()  # type: ignore[assignment]
    governor.lock = lock
    assert governor.lock is lock
    governor.handle(RunStarted("task"))
    taken, go, done = threading.Event(), threading.Event(), threading.Event()

    def holder() -> None:
        with lock:
            taken.set()
            go.wait(HOLD)

    def reporter() -> None:
        governor.handle(TurnStarting())
        done.set()

    holding = threading.Thread(target=holder)
    holding.start()
    assert taken.wait(5)
    reporting = threading.Thread(target=reporter)
    reporting.start()
    assert not done.wait(0.2), "the event was decided while another thread held the lock"
    go.set()
    assert done.wait(5)
    holding.join(5)
    reporting.join(5)
    assert governor.usage.turns == 1
    # Taken and let go once per event: free again.
    assert lock.acquire(blocking=False)
    lock.release()
