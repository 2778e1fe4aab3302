"""What the governor answers to each event, and what a human may answer to an ``Ask``.

A driver carries out a decision: ``Continue`` (go on), ``Warn`` (go on, and put the note in
front of the model), ``Block`` (do not run this tool call; return the reason to the model as a
tool error), ``Ask`` (put the question to a human, then pass the answer to
``Governor.resolve``), ``Stop`` (end the run with the outcome; when ``synthesize`` is set, first
write a final answer from the evidence with tools removed).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any

from .events import ToolCall
from .outcome import Outcome

if TYPE_CHECKING:
    from .events import Event

__all__ = [
    "CONTINUE",
    "Answer",
    "Ask",
    "Block",
    "Choice",
    "Continue",
    "Decision",
    "Stop",
    "Warn",
    "joined",
]


@dataclass(frozen=True, slots=True)
class Continue:
    """Go on.

    For a ``ModelRequest``, ``max_tokens`` (when set) is the most the request may produce
    without passing a token limit: send it with that ``max_tokens``.
    """

    max_tokens: int | None = None

    def __repr__(self) -> str:
        return "CONTINUE" if self.max_tokens is None else f"Continue(max_tokens={self.max_tokens})"


#: The one ``Continue``: the governor returns it without allocating.
CONTINUE = Continue()


@dataclass(frozen=True, slots=True)
class Warn:
    """Go on, and show ``message`` to the model (a soft threshold was crossed)."""

    message: str
    #: The limit that warned, as its ``repr``.
    limit: str = ""
    #: As for ``Continue``: the ``max_tokens`` to send a ``ModelRequest`` with, when lowered.
    max_tokens: int | None = None


def joined(first: Warn, second: Warn) -> Warn:
    """Two notes given at one event, as one: both messages, both limits."""
    return Warn(f"{first.message} {second.message}", f"{first.limit} | {second.limit}")


@dataclass(frozen=True, slots=True)
class Block:
    """Refuse this tool call; give ``reason`` back to the model as the tool's error."""

    call: ToolCall
    reason: str
    limit: str = ""
    #: Whether a later call of the same tool may be admitted.
    retryable: bool = False


class Choice(str, Enum):
    """What a human may choose at a limit."""

    #: Start a new round: the limit's count resets and the run goes on.
    CONTINUE = "continue"
    #: Raise the limit by an amount (turns, calls, tokens, dollars, seconds).
    EXTEND = "extend"
    #: Stop, and write the best answer from what was gathered, with tools removed.
    WRAP_UP = "wrap_up"
    #: Stop now.
    ABORT = "abort"

    def __str__(self) -> str:
        return self.value


ALL_CHOICES = (Choice.CONTINUE, Choice.EXTEND, Choice.WRAP_UP, Choice.ABORT)


@dataclass(frozen=True, slots=True)
class Answer:
    """A human's answer to an ``Ask``."""

    choice: Choice
    #: For ``EXTEND``: by how much.
    amount: int | float | None = None

    def __post_init__(self) -> None:
        from .errors import InvalidValueError

        if self.choice is Choice.EXTEND:
            if (
                isinstance(self.amount, bool)
                or not isinstance(self.amount, int | float)
                or not self.amount > 0
                or self.amount == math.inf  # extended by that much, a limit would be none
            ):
                raise InvalidValueError(
                    "Answer.amount", self.amount, "a positive finite number to extend by"
                )
        elif self.amount is not None:
            raise InvalidValueError("Answer.amount", self.amount, f"None with {self.choice}")


@dataclass(frozen=True, slots=True, eq=False)
class Ask:
    """Put ``question`` to a human; pass the answer (or ``None``) to ``Governor.resolve``."""

    #: For example ``"You've used 25 turns. Continue?"``.
    question: str
    #: The limit's reason code (``turn_limit``, ...).
    reason: str
    limit: str
    choices: tuple[Choice, ...] = ALL_CHOICES
    #: Seconds to wait for an answer; no answer in time means abort.
    timeout: float | None = None
    #: The event that is waiting for the answer.
    event: Event | None = None
    #: Which governor asked (a child's ask may come from its parent).
    owner: Any = field(default=None, repr=False)


@dataclass(frozen=True, slots=True)
class Stop:
    """End the run with ``outcome``."""

    outcome: Outcome
    #: Write a final answer from the evidence first (tools removed), then call
    #: ``Governor.synthesized(text)`` for the final outcome, or, when the pass wrote no
    #: answer, ``Governor.synthesis_unanswered()``.
    synthesize: bool = False
    #: Whether the model provider was already called for the event that stopped the run.
    provider_called: bool = False
    #: The limit policy's own synthesizer, if it has one (else the driver's is used).
    synthesizer: Any = field(default=None, repr=False)


Decision = Continue | Warn | Block | Ask | Stop
