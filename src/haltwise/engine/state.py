"""The governor's live, mutable counters: one ``Tally`` per scope and one ``Slot`` per limit.

These are internal: limits read them, the governor writes them. Users see immutable snapshots
(``Usage``, ``LimitStatus``) instead.

Compiled (``state.pxd``), a tally's counts are C long longs and its dollars (and those held by
the requests in flight) a C integer of 128 bits, so that the dispatch adds to them without
making a Python int for every sum. Both builds keep them in range alike: an event carries
counts of at most ``MAX_COUNT`` (``events.check``) and a call costs at most ``MAX_CALL_COST``
(``events.check`` for a cost given, the governor for a cost priced); a total that has passed
``TALLY_ROOM`` tokens or ``COST_ROOM`` dollars takes no more (``room_for``, before a response
or a request's reservation is counted); and a checkpoint's totals are read only when they are
at most those.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from .errors import InvalidValueError
from .events import MAX_CALL_DOLLARS, MAX_COUNT
from .ledger import Budget
from .outcome import Usage
from .pricing import UNITS_PER_USD, dollars, units

__all__ = [
    "COST_ROOM",
    "MAX_CALL_COST",
    "MAX_COST",
    "MAX_IN_FLIGHT",
    "MAX_TALLY",
    "TALLY_ROOM",
    "Hold",
    "InFlight",
    "Reservation",
    "Slot",
    "Tally",
    "budget_from_list",
    "budget_to_list",
    "room_for",
]

#: Requests in flight held at once; past this, the oldest counts as sent and never answered.
MAX_IN_FLIGHT = 256
#: The largest count a tally holds: a C long long's, compiled.
MAX_TALLY = 2**63 - 1
#: A token total at most this has room for one more response and for every request in flight
#: counted at what it reserved, each adding at most ``MAX_COUNT`` to a total.
TALLY_ROOM = MAX_TALLY - (MAX_IN_FLIGHT + 1) * MAX_COUNT
#: The most one model call may cost, in engine units (10^-18 USD).
MAX_CALL_COST = MAX_CALL_DOLLARS * UNITS_PER_USD
#: The largest dollar total a tally holds, in engine units: a C __int128's, compiled.
MAX_COST = 2**127 - 1
#: A dollar total at most this has room for one more call and for every request in flight
#: counted at what it reserved, each costing at most ``MAX_CALL_COST``.
COST_ROOM = MAX_COST - (MAX_IN_FLIGHT + 1) * MAX_CALL_COST


class Tally:
    """Running totals for one scope (a run, or the whole session). O(1) to update."""

    __slots__ = (
        "cache_read_tokens",
        "cache_write_tokens",
        "cost",
        "cost_known",
        "in_flight",
        "input_tokens",
        "last_input_tokens",
        "model_calls",
        "output_tokens",
        "started_at",
        "tool_calls",
        "tool_calls_by_name",
        "turns",
    )

    def __init__(self, in_flight: InFlight) -> None:
        #: The requests in flight, shared by the run's and the session's tallies: the requests
        #: of a run are settled before the next run starts, so both always hold the same ones.
        self.in_flight = in_flight
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
        #: Dollars of the priced calls, in engine units (10^-18 USD); ``cost_known`` is False
        #: once any call had no price.
        self.cost = 0
        self.cost_known = True
        #: The monotonic time the scope started, or None before it has.
        self.started_at: float | None = None

    def reset(self, now: float) -> None:
        self.__init__(self.in_flight)  # type: ignore[misc]
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
            cost=dollars(self.cost) if self.cost_known else None,
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
            "cost": str(dollars(self.cost)),
            "cost_known": self.cost_known,
            "elapsed": self.elapsed(now),
        }

    @staticmethod
    def read(data: dict[str, Any], now: float) -> dict[str, Any]:
        """The attributes a checkpoint's counts (``to_dict``) restore, every one checked before
        any tally changes (``load``); KeyError, TypeError or ValueError on anything else."""
        prompts = _counted(data["input_tokens"], TALLY_ROOM)
        read = _counted(data["cache_read_tokens"], TALLY_ROOM)
        written = _counted(data["cache_write_tokens"], TALLY_ROOM)
        if read + written > prompts:
            raise ValueError("more cached tokens than input tokens")
        return {
            # Events are counted one at a time: no run reaches MAX_COUNT of them.
            "turns": _counted(data["turns"], MAX_COUNT),
            "model_calls": _counted(data["model_calls"], MAX_COUNT),
            "tool_calls": _counted(data["tool_calls"], MAX_COUNT),
            "tool_calls_by_name": {
                str(k): _counted(v, MAX_COUNT) for k, v in data["tool_calls_by_name"].items()
            },
            "input_tokens": prompts,
            "output_tokens": _counted(data["output_tokens"], TALLY_ROOM),
            "cache_read_tokens": read,
            "cache_write_tokens": written,
            "last_input_tokens": _counted(data["last_input_tokens"], MAX_COUNT),
            "cost": _counted(units(Decimal(data["cost"])), COST_ROOM),
            "cost_known": bool(data["cost_known"]),
            "started_at": now - float(data["elapsed"]),
        }

    def load(self, values: dict[str, Any]) -> None:
        """Take the counts ``read`` from a checkpoint."""
        for name, value in values.items():
            setattr(self, name, value)


def room_for(run: Tally, session: Tally) -> None:
    """Raise ``InvalidValueError`` when a token total of ``run`` or ``session`` has passed
    ``TALLY_ROOM``, or a dollar total ``COST_ROOM``: only counts no provider reports, and
    prices no provider charges, get there."""
    for tally in (run, session):
        if tally.input_tokens > TALLY_ROOM or tally.output_tokens > TALLY_ROOM:
            raise InvalidValueError(
                "the token totals",
                (tally.input_tokens, tally.output_tokens),
                f"totals of at most {TALLY_ROOM:,} tokens, so that any response can be "
                "counted: such totals come only from token counts no provider reports",
            )
        if tally.cost > COST_ROOM:
            raise InvalidValueError(
                "the dollar total",
                dollars(tally.cost),
                f"a total of at most ${dollars(COST_ROOM):,.0f}, so that any call can be "
                "counted: such totals come only from prices no provider charges",
            )


def _counted(value: Any, most: int) -> int:
    """A checkpoint's count (or dollars, in engine units): an int from 0 to ``most``
    (ValueError otherwise)."""
    count = int(value)
    if not 0 <= count <= most:
        raise ValueError(f"a count of {count:,} is not from 0 to {most:,}")
    return count


#: What a request holds of one shared budget: (budget, grant id, amount, the shared limit that
#: reserved it, or None for a request restored from a checkpoint).
Hold = tuple[Budget, str, int, Any]
#: One model request in flight: (request_id, model, prompt tokens, max_tokens or 0, worst-case
#: cost in engine units when a cost limit priced it, its shared-budget holds). A tuple: one is
#: made for every request.
Reservation = tuple[str, str, int, int, "int | None", "tuple[Hold, ...]"]


class InFlight:
    """The model requests sent and not yet answered, oldest first, and what they hold of the
    budgets until their answers arrive. Limits count what is held as spent."""

    __slots__ = ("cost", "input_tokens", "output_tokens", "requests")

    def __init__(self) -> None:
        self.requests: list[Reservation] = []
        #: The sums of the requests' prompts, ``max_tokens`` and worst-case costs (in units).
        self.input_tokens = 0
        self.output_tokens = 0
        self.cost = 0

    def clear(self) -> None:
        """Forget every request (a checkpoint's are restored in their place). The list is kept:
        the governor's hot path holds it."""
        self.requests.clear()
        self.input_tokens = self.output_tokens = self.cost = 0

    def hold(self, reservation: Reservation) -> None:
        self.requests.append(reservation)
        self.input_tokens += reservation[2]
        self.output_tokens += reservation[3]
        cost = reservation[4]
        if cost is not None:
            self.cost += cost

    def take(self, index: int) -> Reservation:
        """Take a request out (answered, or counted as never answered): what it held is free."""
        reservation = self.requests.pop(index)
        self.input_tokens -= reservation[2]
        self.output_tokens -= reservation[3]
        cost = reservation[4]
        if cost is not None:
            self.cost -= cost
        return reservation

    def index(self, request_id: str) -> int:
        """The position of the request a response answers: the one with its id, else the
        oldest."""
        if request_id:
            for position, reservation in enumerate(self.requests):
                if reservation[0] == request_id:
                    return position
        return 0

    def to_list(self) -> list[list[Any]]:
        return [
            [
                request_id,
                model,
                prompt,
                output,
                None if cost is None else str(dollars(cost)),
                [[*budget_to_list(budget), grant, amount] for budget, grant, amount, _ in holds],
            ]
            for request_id, model, prompt, output, cost, holds in self.requests
        ]

    @staticmethod
    def from_list(data: list[Any]) -> list[Reservation]:
        """Reservations from ``to_list``; raises ValueError or TypeError on anything else."""
        if len(data) > MAX_IN_FLIGHT:
            raise ValueError(f"{len(data)} requests in flight, more than {MAX_IN_FLIGHT}")
        reservations: list[Reservation] = []
        for request_id, model, prompt, output, cost, *rest in data:
            holds = tuple(
                (budget_from_list(item[:4]), str(item[4]), int(item[5]), None)
                for item in (rest[0] if rest else [])
            )
            reservations.append(
                (
                    str(request_id),
                    str(model),
                    _counted(prompt, MAX_COUNT),
                    _counted(output, MAX_COUNT),
                    None if cost is None else _counted(units(Decimal(cost)), MAX_CALL_COST),
                    holds,
                )
            )
        return reservations


def budget_to_list(budget: Budget) -> list[Any]:
    return [budget.key, budget.metric, budget.window, budget.resets_at]


def budget_from_list(data: list[Any]) -> Budget:
    key, metric, window, resets_at = data
    resets = None if resets_at is None else float(resets_at)
    return Budget(str(key), str(metric), str(window), resets)


class Slot:
    """One limit's own state inside one governor: where its current round began, and more."""

    __slots__ = ("asleep", "baseline", "extra", "soft", "state", "tally", "tripped", "warned")

    def __init__(self, tally: Tally, soft: bool) -> None:
        #: The tally this limit reads (the run's or the session's).
        self.tally = tally
        #: Whether the limit gives a note before it trips (it has a ``warn_at``): read after
        #: every event it checks, so kept here rather than looked up on the limit.
        self.soft = soft
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
        #: Set by a limit whose ``pre`` has nothing to say until the limit sets it back (a stuck
        #: detector not on its ladder): the checks before an event leave it out until then.
        self.asleep = False

    def new_round(self, baseline: Any = 0) -> None:
        self.baseline = baseline
        self.extra = 0
        self.warned = False
        self.tripped = False
