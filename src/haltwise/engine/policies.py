"""What happens when a limit trips: the policies, and the evidence a synthesizer receives.

- ``abort``: stop the run (the default).
- ``ask``: ask a human: continue, extend by N, wrap up, or abort. No prompter, or no answer
  within ``timeout`` seconds, means abort.
- ``synthesize``: stop, and write a final answer from the evidence gathered with tools removed.
- ``best_effort``: stop, and finish with warnings and the partial output.
- ``block``: refuse the tool call that would exceed, and go on (per-tool caps use it by default).

The governor only *names* the policy in its decision; drivers carry it out.
"""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from .errors import InvalidValueError

__all__ = [
    "POLICY_NAMES",
    "Evidence",
    "Policy",
    "PolicyName",
    "Synthesizer",
    "abort",
    "as_policy",
    "ask",
    "best_effort",
    "block",
    "synthesize",
]

PolicyName = Literal["abort", "ask", "synthesize", "best_effort", "block"]
POLICY_NAMES: tuple[PolicyName, ...] = ("abort", "ask", "synthesize", "best_effort", "block")
#: What a time limit or a wait for an answer may be at most: ``threading.TIMEOUT_MAX``, the
#: longest timeout a wait on a lock or a thread takes (some 292 years on Linux).
LONGEST_WAIT: Final = f"at most {threading.TIMEOUT_MAX:.0f} seconds in all (threading.TIMEOUT_MAX)"


@dataclass(frozen=True, slots=True)
class Evidence:
    """What a run gathered before it stopped: what a synthesizer answers from."""

    prompt: str
    #: ``(tool name, arguments, result)`` for the tool calls that ran, in order: the latest ones,
    #: as many as fit the driver's bound (``Guard`` keeps up to 200 results, 200,000 characters).
    tool_results: tuple[tuple[str, Any, str], ...] = ()
    #: The last text the model wrote.
    last_text: str | None = None
    #: Why the run stopped (the outcome's message), so the answer can say what is missing.
    stop_message: str = ""
    #: Whatever else the driver holds (the message list, for example).
    extra: dict[str, Any] = field(default_factory=dict)


#: A synthesizer turns the evidence into a final answer; it may be async. None means no answer
#: could be written (the run keeps its partial output).
Synthesizer = Callable[[Evidence], "str | Awaitable[str | None] | None"]


@dataclass(frozen=True, slots=True)
class Policy:
    """What to do when a limit trips."""

    name: PolicyName
    #: For ``ask``: seconds to wait for an answer.
    timeout: float | None = None
    #: For ``synthesize``: the callback; when ``None`` the driver's own synthesizer is used.
    synthesizer: Synthesizer | None = None

    def __repr__(self) -> str:
        if self.name == "ask" and self.timeout is not None:
            return f"ask(timeout={self.timeout:g})"
        if self.name == "synthesize" and self.synthesizer is not None:
            return f"synthesize({getattr(self.synthesizer, '__name__', 'callback')})"
        return repr(self.name)


def abort() -> Policy:
    return Policy("abort")


def ask(timeout: float | None = None) -> Policy:
    if timeout is not None and (
        isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0
    ):
        raise InvalidValueError("ask(timeout)", timeout, "a positive number of seconds, or None")
    if timeout is not None and timeout > threading.TIMEOUT_MAX:  # the prompter's thread waits it
        raise InvalidValueError("ask(timeout)", timeout, LONGEST_WAIT)
    return Policy("ask", timeout=timeout)


def synthesize(callback: Synthesizer | None = None) -> Policy:
    if callback is not None and not callable(callback):
        raise InvalidValueError("synthesize(callback)", callback, "a callable or None")
    return Policy("synthesize", synthesizer=callback)


def best_effort() -> Policy:
    return Policy("best_effort")


def block() -> Policy:
    return Policy("block")


_BY_NAME: dict[str, Policy] = {name: Policy(name) for name in POLICY_NAMES}


def as_policy(value: str | Policy, source: str = "on_limit") -> Policy:
    """A ``Policy`` from a policy or its name; anything else raises naming the valid names."""
    if isinstance(value, Policy):
        return value
    if isinstance(value, str):
        policy = _BY_NAME.get(value.strip().lower().replace("-", "_"))
        if policy is not None:
            return policy
    valid = ", ".join(repr(name) for name in POLICY_NAMES)
    raise InvalidValueError(source, value, f"one of {valid} (or a Policy object)")
