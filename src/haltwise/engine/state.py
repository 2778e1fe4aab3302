"""The governor's live, mutable counters: one ``Tally`` per scope and one ``Slot`` per limit.

These are internal: limits read them, the governor writes them. Users see immutable snapshots
(``Usage``, ``LimitStatus``) instead.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from .outcome import Usage

__all__ = ["Reservation", "Slot", "Tally"]

_ZERO = Decimal(0)


class Tally:
    """Running totals for one scope (a run, or the whole session). O(1) to update."""

    __slots__ = (
        "cache_read_tokens",
        "cache_write_tokens",
        "cost",
        "cost_known",
        "input_tokens",
        "last_input_tokens",
        "model_calls",
        "output_tokens",
        "reserved_cost",
        "reserved_input",
        "reserved_output",
        "started_at",
        "tool_calls",
        "tool_calls_by_name",
        "turns",
    )

    def __init__(self) -> None:
        #: Turns admitted.
        self.turns = 0
        #: Model calls admitted.
        self.model_calls = 0
        #: Tool calls admitted, in all and per tool name.
        self.tool_calls = 0
        self.tool_calls_by_name: dict[str, int] = {}
        #: Tokens reported by model responses.
        self.input_tokens = 0
        self.output_tokens = 0
        self.cache_read_tokens = 0
        self.cache_write_tokens = 0
        #: The prompt size of the last response: the estimate for the next request's prompt.
        self.last_input_tokens = 0
        #: Dollars of the priced calls; ``cost_known`` is False once any call had no price.
        self.cost = _ZERO
        self.cost_known = True
        #: What the requests still in flight reserved: their prompts, their ``max_tokens`` and
        #: their worst-case dollars. Limits count them as spent until the answers arrive.
        self.reserved_input = 0
        self.reserved_output = 0
        self.reserved_cost = _ZERO
        #: The monotonic time the scope started, or None before it has.
        self.started_at: float | None = None

    def reset(self, now: float) -> None:
        self.__init__()  # type: ignore[misc]
        self.started_at = now

    def elapsed(self, now: float) -> float:
        return 0.0 if self.started_at is None else now - self.started_at

    def snapshot(self, now: float) -> Usage:
        return Usage(
            turns=self.turns,
            model_calls=self.model_calls,
            tool_calls=self.tool_calls,
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
            cache_read_tokens=self.cache_read_tokens,
            cache_write_tokens=self.cache_write_tokens,
            cost=self.cost if self.cost_known else None,
            elapsed=self.elapsed(now),
        )

    def to_dict(self, now: float) -> dict[str, Any]:
        return {
            "turns": self.turns,
            "model_calls": self.model_calls,
            "tool_calls": self.tool_calls,
            "tool_calls_by_name": dict(self.tool_calls_by_name),
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cache_read_tokens": self.cache_read_tokens,
            "cache_write_tokens": self.cache_write_tokens,
            "last_input_tokens": self.last_input_tokens,
            "cost": str(self.cost),
            "cost_known": self.cost_known,
            "elapsed": self.elapsed(now),
        }

    def load(self, data: dict[str, Any], now: float) -> None:
        self.turns = int(data["turns"])
        self.model_calls = int(data["model_calls"])
        self.tool_calls = int(data["tool_calls"])
        self.tool_calls_by_name = {str(k): int(v) for k, v in data["tool_calls_by_name"].items()}
        self.input_tokens = int(data["input_tokens"])
        self.output_tokens = int(data["output_tokens"])
        self.cache_read_tokens = int(data["cache_read_tokens"])
        self.cache_write_tokens = int(data["cache_write_tokens"])
        self.last_input_tokens = int(data["last_input_tokens"])
        self.cost = Decimal(data["cost"])
        self.cost_known = bool(data["cost_known"])
        self.started_at = now - float(data["elapsed"])


class Reservation:
    """What one model request in flight holds of the budgets until its answer arrives."""

    __slots__ = ("cost", "input_tokens", "model", "output_tokens", "request_id")

    def __init__(
        self,
        request_id: str,
        model: str,
        input_tokens: int,
        output_tokens: int,
        cost: Decimal | None,
    ) -> None:
        self.request_id = request_id
        self.model = model
        #: The prompt's size (as the driver said, or the last response's).
        self.input_tokens = input_tokens
        #: The request's ``max_tokens`` (0 when it had none).
        self.output_tokens = output_tokens
        #: The worst-case dollars, when a cost limit priced it.
        self.cost = cost

    def hold(self, run: Tally, session: Tally, sign: int) -> None:
        """Add this reservation to the tallies' reserved amounts (``sign=-1``: take it off)."""
        prompt = sign * self.input_tokens
        output = sign * self.output_tokens
        run.reserved_input += prompt
        run.reserved_output += output
        session.reserved_input += prompt
        session.reserved_output += output
        if self.cost is not None:
            cost = self.cost if sign > 0 else -self.cost
            run.reserved_cost += cost
            session.reserved_cost += cost

    def to_list(self) -> list[Any]:
        cost = None if self.cost is None else str(self.cost)
        return [self.request_id, self.model, self.input_tokens, self.output_tokens, cost]

    @classmethod
    def from_list(cls, data: list[Any]) -> Reservation:
        request_id, model, input_tokens, output_tokens, cost = data
        return cls(
            str(request_id),
            str(model),
            int(input_tokens),
            int(output_tokens),
            None if cost is None else Decimal(cost),
        )


class Slot:
    """One limit's own state inside one governor: where its current round began, and more."""

    __slots__ = ("baseline", "extra", "state", "tally", "tripped", "warned")

    def __init__(self, tally: Tally) -> None:
        #: The tally this limit reads (the run's or the session's).
        self.tally = tally
        #: The metric's value when the current round began ("continue" moves it).
        self.baseline: Any = 0
        #: What "extend by N" has added to the limit this round.
        self.extra: Any = 0
        #: Whether the soft threshold's note was given this round.
        self.warned = False
        #: Whether a shadow-mode limit has recorded its trip this round.
        self.tripped = False
        #: Anything else the limit keeps (elapsed time, a detector's window).
        self.state: Any = None

    def new_round(self, baseline: Any = 0) -> None:
        self.baseline = baseline
        self.extra = 0
        self.warned = False
        self.tripped = False
