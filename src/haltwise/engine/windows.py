"""Budget windows: which calendar hour, day, week or month a shared budget is counting.

A shared limit (``max_cost("20", key="team-a", per="day")``) spends the budget of the window it
is in; when the window ends the budget starts again from zero, because a new window is a new
budget. Windows are calendar periods in UTC unless a time zone is given: an hour, a day, an
ISO week (from Monday) or a month. Pure functions of a wall-clock time; stdlib only.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone, tzinfo
from typing import Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from .errors import InvalidValueError

__all__ = ["PERIODS", "Period", "check_period", "check_zone", "window"]

Period = Literal["hour", "day", "week", "month"]
#: The periods a shared budget may have; None is "forever".
PERIODS: tuple[str, ...] = ("hour", "day", "week", "month")


def check_period(per: object, name: str) -> Period | None:
    if per is None or per in PERIODS:
        return per  # type: ignore[return-value]
    raise InvalidValueError(f"{name}(per)", per, 'None (forever), "hour", "day", "week" or "month"')


def check_zone(tz: object, name: str) -> tzinfo:
    """``tz`` as a time zone: None is UTC; else an IANA name such as "Europe/Paris"."""
    if tz is None:
        return timezone.utc
    if isinstance(tz, str) and tz.strip():
        try:
            return ZoneInfo(tz.strip())
        except (ZoneInfoNotFoundError, ValueError):
            pass
    raise InvalidValueError(f"{name}(tz)", tz, 'an IANA time zone name such as "Europe/Paris"')


def window(per: Period | None, zone: tzinfo, at: float) -> tuple[str, float | None]:
    """The window containing wall-clock time ``at`` (epoch seconds): its label, such as
    ``"2026-11-23"``, and when it ends (epoch seconds; None for a budget with no period).

    Days, weeks and months end at the zone's local midnight, whatever daylight saving does
    (aware datetimes in Python add days on the wall clock)."""
    if per is None:
        return "forever", None
    local = datetime.fromtimestamp(at, zone)
    if per == "hour":
        start = local.replace(minute=0, second=0, microsecond=0)
        return start.strftime("%Y-%m-%dT%H"), start.timestamp() + 3600
    day = local.replace(hour=0, minute=0, second=0, microsecond=0, fold=0)
    if per == "day":
        return day.strftime("%Y-%m-%d"), (day + timedelta(days=1)).timestamp()
    if per == "week":
        start = day - timedelta(days=day.weekday())
        year, week, _ = start.isocalendar()
        return f"{year}-W{week:02d}", (start + timedelta(days=7)).timestamp()
    start = day.replace(day=1)
    following = (start + timedelta(days=32)).replace(day=1)
    return start.strftime("%Y-%m"), following.timestamp()
