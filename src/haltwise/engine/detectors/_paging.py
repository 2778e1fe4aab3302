"""A budget on paging: the same action over and over, each time with a new result.

Every other detector treats a result with new information as progress, and so does this one:
scrolling through a file, paging through search hits, polling a log that grows are not loops.
``paging`` is not a loop detector that contradicts that. It is a *budget on one kind of
progress*, as the polling tools' own thresholds are: progress bought one page at a time can
go on far longer than it is worth, and an agent that pages 40 times in a row through a file is
better told to search it. It counts consecutive calls of the same action (the same canonical
key) whatever their results, and a result with new information does not clear it; another
action does, as do a ``Progress`` event and a user message.

Measured on 1,543 recorded runs (``benchmarks/bench_detectors.py``): solved runs never made
the same call more than 3 times in a row with a new result each time, while the longest such
stretch in the whole corpus was 13 (``sympy__sympy-17139``, scrolling through ``fu.py``, which
the corpus counts as progress). Added to ``stuck()``, a budget of 5 to 10 cuts no more solved
runs and stops 1 or 2 more of the runs that spent their whole budget, but only by cutting
stretches like that one; from 14 up it stops nothing ``stuck()`` does not already stop. So the
default, 15, sits above every paging stretch recorded, and ``stuck()`` leaves it out unless
asked (``stuck(paging=15)``): it guards against runaway paging, and the measurement gives no
reason to tighten it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..limits import Limit, Scope
from ..policies import Policy
from ..state import Slot
from ._base import CLEAR, ToolDetector, Verdict, check_int
from ._keys import ActionInfo, ResultInfo
from ._tools import _DEFAULT_WINDOW, _common, _StreakState

__all__ = ["paging"]


class _Paging(ToolDetector):
    __slots__ = ("n",)
    factory = "paging"
    reason = "stuck.paging"
    news_clears = False

    def __init__(self, n: int, args: str, **kw: Any) -> None:
        self.n = n
        super().__init__(args, **kw)

    def new_state(self) -> _StreakState:
        return _StreakState(self.window)

    def step(
        self, state: _StreakState, slot: Slot, action: ActionInfo, result: ResultInfo, new: bool
    ) -> Verdict:
        if action.key != state.last_key:
            # Another action: the agent moved on.
            if state.level != CLEAR:
                state.clear()
            state.last_key = action.key
            state.streak = 1
            state.onset = slot.tally.turns
            return None
        state.streak += 1
        if state.streak < self.threshold(self.n, slot, action.name):
            return None
        what = f"{action.preview!r} ran {state.streak} times in a row"
        return self._detected(state, slot, what, (action.key,), state.onset)

    def reset(self, state: _StreakState) -> None:
        state.last_key = None
        state.streak = 0

    def _nudge(self, what: str) -> str:
        return (
            f"{what}, a new page each time: paging has a budget. Search for what you need, "
            "or work with what you have found."
        )

    def _refusal(self, what: str) -> str:
        return (
            f"Refused: {what}, and paging has a budget. Search for what you need instead, "
            "or work with what you have found."
        )

    def suggestions(self) -> tuple[str, ...]:
        return (
            "The agent paged through output one call at a time: give it a search tool, or "
            "a larger page",
            "Raise the budget (paging(n)) if long paging is expected, or declare the tool "
            "as polling",
        )


def paging(
    n: int = 15,
    *,
    window: int = _DEFAULT_WINDOW,
    polling_tools: Iterable[str] = (),
    polling_n: int | None = None,
    ignore_fields: Iterable[str] | None = None,
    ladder: bool = True,
    scope: Scope = "run",
    on_limit: str | Policy = "abort",
    shadow: bool = False,
) -> Limit:
    """The same action ``n`` times in a row, whatever its results (``stuck.paging``): a budget
    on paging, scrolling or polling one call at a time, not a loop detector (see the module's
    notes for why, and for how ``n`` was measured). Tools in ``polling_tools`` may repeat
    ``polling_n`` times instead (three times ``n`` by default)."""
    check_int(n, "paging(n)", 2)
    shown, kw = _common(
        "paging", window, polling_tools, polling_n, ignore_fields, ladder, scope, on_limit, shadow
    )
    return _Paging(n, f"{n!r}{shown}", **kw)
