"""Shared limits: a count or cost limit with ``key=`` spends a budget in the ledger that every
governor naming the same key (and the same ledger) spends too.

``max_cost("20", key="team-a", per="day")`` is checked by the ledger in one atomic step, so no
number of processes can spend more than $20 of team-a's day between them. ``per`` is the
calendar window the budget counts in (None: forever; "hour", "day", "week", "month"), in UTC
unless ``tz`` names a zone. Money is counted in the ledger in nano-dollars: a reservation or a
charge is rounded up and a limit down, so rounding can never let a budget overspend.
"""

from __future__ import annotations

from datetime import tzinfo

from .errors import InvalidValueError
from .ledger import Budget
from .windows import Period, check_period, check_zone, window

__all__ = ["NANO", "Share", "nano_ceil", "nano_floor"]

#: Engine money units (10^-18 USD) per ledger money unit (10^-9 USD).
NANO = 10**9


def nano_ceil(amount: int) -> int:
    """Engine units as nano-dollars, rounded up (what is spent or held)."""
    return -(-amount // NANO)


def nano_floor(amount: int) -> int:
    """Engine units as nano-dollars, rounded down (a limit)."""
    return amount // NANO


class Share:
    """Where a shared limit counts: the budget ``key`` in the ledger, per calendar window."""

    __slots__ = ("key", "per", "tz", "zone")

    def __init__(self, key: object, per: object, tz: object, name: str) -> None:
        if (
            not isinstance(key, str)
            or not key.strip()
            or len(key) > 200
            or any(ord(char) < 32 for char in key)
        ):
            raise InvalidValueError(
                f"{name}(key)", key, "a budget name such as 'team-a' (printable, at most 200 chars)"
            )
        self.key = key
        self.per: Period | None = check_period(per, name)
        self.tz = tz if isinstance(tz, str) else None
        self.zone: tzinfo = check_zone(tz, name)

    def budget(self, metric: str, at: float) -> Budget:
        """The budget this limit spends at wall-clock time ``at``."""
        label, resets_at = window(self.per, self.zone, at)
        return Budget(self.key, metric, label, resets_at)

    def args(self) -> str:
        """The keyword arguments, as the user wrote them (for the limit's ``repr``)."""
        text = f", key={self.key!r}"
        if self.per is not None:
            text += f", per={self.per!r}"
        if self.tz is not None:
            text += f", tz={self.tz!r}"
        return text

    def __repr__(self) -> str:
        return f"Share({self.args().removeprefix(', ')})"
