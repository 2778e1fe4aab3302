"""Every exception haltwise raises, under one root.

::

    HaltwiseError
    ├── ConfigurationError          misuse: bad limits, env values, config files, unpriced models
    │   ├── InvalidValueError       one bad value, naming its source and the valid forms
    │   ├── UnpricedModelError      a cost limit is set but a model has no known price
    │   └── QuestionOpen            an event came while a question to the human is unanswered
    ├── LedgerError                 the ledger could not be reached or answered wrongly
    │   └── LedgerBusy              another process's write held the ledger longer than a call waits
    └── HaltError                   a run was stopped; carries its Outcome
        ├── LimitExceeded           a limit tripped
        │   ├── TurnLimitExceeded
        │   ├── ModelCallLimitExceeded
        │   ├── ToolCallLimitExceeded
        │   ├── TokenLimitExceeded
        │   ├── CostLimitExceeded
        │   ├── TimeLimitExceeded
        │   └── StuckError
        ├── RunDeclined             a human chose to abort at a limit
        └── RunCancelled            ``cancel()`` was called, or a kill flag was set

``HaltError`` derives from ``Exception`` so that ordinary handlers see it; a driver may instead
raise ``HaltSignal`` (a ``BaseException``), which a broad ``except Exception`` cannot swallow.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .decisions import Ask
    from .outcome import Outcome

__all__ = [
    "ConfigurationError",
    "CostLimitExceeded",
    "HaltError",
    "HaltSignal",
    "HaltwiseError",
    "InvalidValueError",
    "LedgerBusy",
    "LedgerError",
    "LimitExceeded",
    "ModelCallLimitExceeded",
    "QuestionOpen",
    "RunCancelled",
    "RunDeclined",
    "StuckError",
    "TimeLimitExceeded",
    "TokenLimitExceeded",
    "ToolCallLimitExceeded",
    "TurnLimitExceeded",
    "UnpricedModelError",
    "error_for",
]


class HaltwiseError(Exception):
    """The root of every exception haltwise raises."""


class ConfigurationError(HaltwiseError, ValueError):
    """haltwise was set up wrongly; the message says what was wrong and how to fix it."""


class InvalidValueError(ConfigurationError):
    """One value from one source (an argument, an environment variable, a file) is invalid."""

    def __init__(self, source: str, value: object, valid: str) -> None:
        #: Where the value came from: ``"HALTWISE_MAX_TURNS"``, ``"haltwise.toml: max_cost"``.
        self.source = source
        #: The value as it was given.
        self.value = value
        #: The forms that would have been accepted.
        self.valid = valid
        super().__init__(f"{source}={_shown(value)} is not valid: expected {valid}")


def _shown(value: object) -> str:
    """``value``'s repr, its middle cut when it is long (a tool's whole output, say)."""
    shown = repr(value)
    if len(shown) <= _SHOWN:
        return shown
    return f"{shown[: _SHOWN - 40]}...{shown[-30:]} ({len(shown):,} characters)"


#: The longest repr an error message shows whole.
_SHOWN = 200


class UnpricedModelError(ConfigurationError):
    """A cost limit is set, but the model has no known price, so the limit cannot be kept."""

    def __init__(self, model: str, how_to_fix: str) -> None:
        self.model = model
        super().__init__(
            f"cannot enforce a cost limit: no price is known for model {model!r}. {how_to_fix}"
        )


class QuestionOpen(ConfigurationError):
    """An event came while the governor's question to the human (``ask``) is unanswered.

    A driver that reports events from several threads or tasks catches it: the thread that
    holds the ``Ask`` is asking it, and the others wait for its answer, then report their
    events again. In a single thread it is misuse: the answer must go to ``resolve()`` first.
    """

    def __init__(self, ask: Ask) -> None:
        #: The open question.
        self.ask = ask
        super().__init__(
            f"{ask.question!r} is still unanswered: pass the answer to Governor.resolve() "
            "before sending more events"
        )


class LedgerError(HaltwiseError):
    """The ledger (shared budgets, checkpoints) failed; retrying may succeed."""

    retryable = True


class LedgerBusy(LedgerError):
    """Another process held the ledger's write lock for longer than the call would wait: the
    call changed nothing, and the same call may be made again (the dashboard answers it 503,
    not 409: nothing was refused). A ``LedgerError`` like any other to a run."""


class HaltError(HaltwiseError):
    """A run was stopped. ``outcome`` says why, with its usage, partial output and checkpoint."""

    #: Whether the model provider was called for the request that tripped (post-checks).
    provider_called: bool = False
    #: Whether retrying the same request, unchanged, can succeed.
    retryable: bool = False

    def __init__(self, outcome: Outcome, *, provider_called: bool = False) -> None:
        self.outcome = outcome
        self.provider_called = provider_called
        super().__init__(outcome.message)


class LimitExceeded(HaltError):
    """A limit tripped; the subclass names which kind."""


class TurnLimitExceeded(LimitExceeded):
    """The turn limit was reached."""


class ModelCallLimitExceeded(LimitExceeded):
    """The model-call limit was reached."""


class ToolCallLimitExceeded(LimitExceeded):
    """The tool-call budget was spent."""


class TokenLimitExceeded(LimitExceeded):
    """A token limit (input, output or total) was reached."""


class CostLimitExceeded(LimitExceeded):
    """The cost limit was reached."""


class TimeLimitExceeded(LimitExceeded):
    """The time limit was reached."""


class StuckError(LimitExceeded):
    """The agent was stuck (repeating itself, cycling, making no progress)."""


class RunDeclined(HaltError):
    """A human chose to stop at a limit."""


class RunCancelled(HaltError):
    """The run was cancelled from outside."""


class HaltSignal(BaseException):
    """An opt-in stop signal that ``except Exception`` cannot swallow; wraps a HaltError."""

    def __init__(self, error: HaltError) -> None:
        self.error = error
        self.outcome = error.outcome
        super().__init__(str(error))


_BY_REASON: dict[str, type[HaltError]] = {
    "turn_limit": TurnLimitExceeded,
    "model_call_limit": ModelCallLimitExceeded,
    "tool_call_limit": ToolCallLimitExceeded,
    "token_limit": TokenLimitExceeded,
    "cost_limit": CostLimitExceeded,
    "time_limit": TimeLimitExceeded,
    "declined": RunDeclined,
    "cancelled": RunCancelled,
    "killed": RunCancelled,
}


def error_for(outcome: Outcome, *, provider_called: bool = False) -> HaltError:
    """The typed exception for a stopped run's outcome."""
    if outcome.reason.startswith("stuck."):
        cls: type[HaltError] = StuckError
    else:
        cls = _BY_REASON.get(outcome.reason, LimitExceeded)
    return cls(outcome, provider_called=provider_called)
