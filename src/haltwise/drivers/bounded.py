"""Calls that may not outlive their time: ``call_within`` runs one on a thread of its own and
waits for it no longer than the time given, ``Overdue`` once that has passed.

Python cannot stop a thread, nor interrupt a call that blocks one (a prompter waiting for a
human, a framework's synchronous tool sleeping or stuck in C). What a driver can do is stop
waiting: the call goes on on its daemon thread, which does not keep the process alive, and what
it returns or raises then is dropped. The guard's prompters wait for a human this way up to an
``ask(timeout=...)``; the framework adapters run a synchronous run's tools this way up to the
run's deadline (``Governor.time_left()``).

What does not live here: async calls, which a task's cancellation interrupts (``AsyncRun``).
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["Overdue", "call_within"]

T = TypeVar("T")


class Overdue(TimeoutError):
    """A call given up on when its time ran out: it goes on on its thread, and what it
    returns or raises then is dropped."""


def call_within(
    seconds: float | None, function: Callable[..., T], *args: Any, name: str = "haltwise-call"
) -> T:
    """``function(*args)``, waited for no longer than ``seconds``: what it returns or raises,
    or ``Overdue`` once they have passed.

    With a time, it runs on a daemon thread named ``name``, in a copy of this thread's context
    (so that context variables, a framework's config among them, reach it). With None, it runs
    here, as a plain call.
    """
    if seconds is None:
        return function(*args)
    returned: list[T] = []
    raised: list[BaseException] = []
    context = contextvars.copy_context()

    def call() -> None:
        try:
            returned.append(context.run(function, *args))
        except BaseException as error:  # handed to the caller's thread below
            raised.append(error)

    thread = threading.Thread(target=call, name=name, daemon=True)
    thread.start()
    thread.join(max(seconds, 0.0))
    if raised:
        raise raised[0]
    if returned:
        return returned[0]
    raise Overdue(f"no answer within {seconds:.3g}s")
