"""A manually driven clock for deterministic tests of time-based limits.

:class:`FakeClock` stands in for ``time.monotonic`` (call it to read the time) and for
``time.sleep`` / ``asyncio.sleep`` (its :meth:`~FakeClock.sleep` and
:meth:`~FakeClock.asleep` move time forward instead of waiting), so deadlines, timeouts and
retry backoff can be tested instantly.
"""

from __future__ import annotations

import asyncio
import math
import threading

__all__ = ["FakeClock"]


def _check_seconds(what: str, seconds: float) -> float:
    if isinstance(seconds, bool) or not isinstance(seconds, int | float):
        raise TypeError(f"{what} takes a number of seconds, got {type(seconds).__name__}")
    if math.isnan(seconds) or math.isinf(seconds):
        raise ValueError(f"{what} takes a finite number of seconds, got {seconds!r}")
    if seconds < 0:
        raise ValueError(
            f"{what} takes a non-negative number of seconds, got {seconds!r}: "
            "a monotonic clock cannot go backwards"
        )
    return float(seconds)


class FakeClock:
    """A monotonic clock that only moves when told to.

    ``clock()`` returns the current time in seconds, so an instance can be passed wherever
    ``time.monotonic`` is expected. Time starts at ``start`` and moves forward only through
    :meth:`advance`, :meth:`sleep` and :meth:`asleep`. The durations passed to
    :meth:`sleep` and :meth:`asleep` are recorded in :attr:`sleeps`. Thread-safe.
    """

    __slots__ = ("_lock", "_now", "_sleeps")

    def __init__(self, start: float = 0.0) -> None:
        if isinstance(start, bool) or not isinstance(start, int | float):
            raise TypeError(f"start must be a number of seconds, got {type(start).__name__}")
        if not math.isfinite(start):
            raise ValueError(f"start must be finite, got {start!r}")
        self._lock = threading.Lock()
        self._now = float(start)
        self._sleeps: list[float] = []

    def __call__(self) -> float:
        """The current time, like ``time.monotonic()``."""
        with self._lock:
            return self._now

    @property
    def now(self) -> float:
        """The current time in seconds."""
        return self()

    @property
    def sleeps(self) -> tuple[float, ...]:
        """Durations passed to :meth:`sleep` and :meth:`asleep`, in call order."""
        with self._lock:
            return tuple(self._sleeps)

    def advance(self, seconds: float) -> float:
        """Move time forward by ``seconds`` (``>= 0``) and return the new time."""
        step = _check_seconds("FakeClock.advance()", seconds)
        with self._lock:
            self._now += step
            return self._now

    def sleep(self, seconds: float) -> None:
        """A ``time.sleep`` replacement: advances the clock and returns at once."""
        step = _check_seconds("FakeClock.sleep()", seconds)
        with self._lock:
            self._sleeps.append(step)
            self._now += step

    async def asleep(self, seconds: float) -> None:
        """An ``asyncio.sleep`` replacement: advances the clock, then yields to the loop once."""
        self.sleep(seconds)
        await asyncio.sleep(0)

    def __repr__(self) -> str:
        return f"FakeClock(now={self.now!r})"
