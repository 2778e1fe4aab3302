"""What the Guard's thread tests share: a call that must finish in time, or fail the test
rather than hang it (``from finishing import finished``)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

#: Seconds a test waits for what takes a fraction of one before it fails.
WAITING = 10.0


def finished(target: Callable[[], T]) -> T:
    """``target()``, on a daemon thread that must finish within ``WAITING``."""
    results: list[T] = []
    failures: list[BaseException] = []

    def call() -> None:
        try:
            results.append(target())
        except BaseException as error:  # raised again in the test's thread
            failures.append(error)

    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    thread.join(WAITING)
    assert not thread.is_alive(), f"not finished within {WAITING}s: a thread or task is stuck"
    if failures:
        raise failures[0]
    return results[0]
