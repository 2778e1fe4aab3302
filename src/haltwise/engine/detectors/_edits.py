"""Detectors of work that changes files but gets nowhere: edits with no effect, edits that
oscillate, and the same error coming back round a cycle of attempts.

Loops of the same call are ``_tools.py``'s; these catch the agent that *does* vary its calls (it
edits, then checks; edits again, checks again) while what it checks does not move. An edit is a
call that writes files (``_keys.is_edit``: an editing tool, an editor's writing sub-command, a
shell line such as ``sed -i``). Each holds O(window) state per run and does O(window) work per
event.

=========================  ======================  ==============================================
factory                    reason                  trips on
=========================  ======================  ==============================================
``no_effect(k)``           ``stuck.no_effect``     the same check returning the same result after
                                                   each of k rounds of edits
``oscillation(n)``         ``stuck.oscillation``   n edits made again after another edit came
                                                   between (a change undone and redone)
``recurring_errors(n)``    ``stuck.recurring``     the same tool failing the same way n times
                                                   within the window, other calls between
=========================  ======================  ==============================================
"""

from __future__ import annotations

from collections import deque
from typing import Any

from ..limits import Limit, Scope
from ..policies import Policy
from ..state import Slot
from ._base import ToolDetector, ToolState, Verdict, check_int
from ._keys import ActionInfo, LineHashes, ResultInfo
from ._tools import _DEFAULT_WINDOW, _common, _times

__all__ = ["no_effect", "oscillation", "recurring_errors"]


# --------------------------------------------------------------------------------------------
# no effect: the same check, the same result, after each round of edits


class _NoEffectState(ToolState):
    __slots__ = ("checks", "edited")

    def __init__(self, window: int) -> None:
        super().__init__(window)
        #: Per check (action key): its last result's lines and how many rounds of edits in a
        #: row left that result as it was. Bounded by the window (oldest check dropped).
        self.checks: dict[int, tuple[LineHashes, int]] = {}
        #: The checks that ran before the latest edit (an edit has come since their last run).
        self.edited: set[int] = set()


class _NoEffect(ToolDetector):
    __slots__ = ("k",)
    factory = "no_effect"
    reason = "stuck.no_effect"
    #: An edit's result is news by itself; only the check's result moving is progress here.
    news_clears = False

    def __init__(self, k: int, args: str, **kw: Any) -> None:
        self.k = k
        super().__init__(args, **kw)

    def new_state(self) -> _NoEffectState:
        return _NoEffectState(self.window)

    def step(
        self, state: _NoEffectState, slot: Slot, action: ActionInfo, result: ResultInfo, new: bool
    ) -> Verdict:
        checks = state.checks
        if action.edit:
            state.edited.update(checks)
            return None
        key = action.key
        before = checks.pop(key, None)
        edited = key in state.edited
        state.edited.discard(key)
        rounds = 0
        if before is not None and before[0] == result.lines:
            rounds = before[1] + 1 if edited else before[1]
        elif before is not None and key in state.flagged:
            self._progress(state)  # the check flagged moved at last
        checks[key] = (result.lines, rounds)
        if len(checks) > self.window:
            oldest = next(iter(checks))
            del checks[oldest]
            state.edited.discard(oldest)
        if rounds < self.threshold(self.k, slot, action.name):
            return None
        what = (
            f"{action.preview!r} gave the same result after {rounds} rounds of edits "
            f"({result.preview!r}): the edits are not changing what it checks"
        )
        return self._detected(state, slot, what, (key,))

    def reset(self, state: _NoEffectState) -> None:
        state.checks.clear()
        state.edited.clear()


# --------------------------------------------------------------------------------------------
# oscillation: an edit made again after another edit came between


class _OscillationState(ToolState):
    __slots__ = ("edits", "returns")

    def __init__(self, window: int) -> None:
        super().__init__(window)
        #: The last ``window`` edits that succeeded (action keys), oldest first.
        self.edits: deque[int] = deque()
        #: For each of them: whether it was made again after another edit came between.
        self.returns: deque[bool] = deque()


class _Oscillation(ToolDetector):
    __slots__ = ("n",)
    #: Each attempt brings news (a new edit, a new message); the pattern is across attempts.
    news_clears = False
    factory = "oscillation"
    reason = "stuck.oscillation"

    def __init__(self, n: int, args: str, **kw: Any) -> None:
        self.n = n
        super().__init__(args, **kw)

    def new_state(self) -> _OscillationState:
        return _OscillationState(self.window)

    def step(
        self,
        state: _OscillationState,
        slot: Slot,
        action: ActionInfo,
        result: ResultInfo,
        new: bool,
    ) -> Verdict:
        # A failed edit changed nothing.
        if not action.edit or result.error is not None:
            return None
        edits = state.edits
        key = action.key
        # Made again after another edit, not merely twice in a row (that is ``repeats``'s).
        back = bool(edits) and edits[-1] != key and key in edits
        edits.append(key)
        state.returns.append(back)
        if len(edits) > self.window:
            edits.popleft()
            state.returns.popleft()
        if not back:
            return None
        count = sum(state.returns)
        if count < self.threshold(self.n, slot, action.name):
            return None
        what = (
            f"edits were made again after another edit came between, {_times(count)} "
            f"(last: {action.preview!r}): a change undone and redone"
        )
        return self._detected(state, slot, what, (action.key,))

    def reset(self, state: _OscillationState) -> None:
        state.edits.clear()
        state.returns.clear()


# --------------------------------------------------------------------------------------------
# recurring errors: the same failure coming back round a cycle of attempts


class _RecurringState(ToolState):
    __slots__ = ("counts", "steps")

    def __init__(self, window: int) -> None:
        super().__init__(window)
        #: The last ``window`` steps: the failure each brought (tool, error class), or None.
        self.steps: deque[tuple[str, str] | None] = deque()
        #: Failures per (tool, error class) within the window.
        self.counts: dict[tuple[str, str], int] = {}


class _RecurringErrors(ToolDetector):
    __slots__ = ("n",)
    #: Each attempt brings news (a new edit, a new message); the pattern is across attempts.
    news_clears = False
    factory = "recurring_errors"
    reason = "stuck.recurring"

    def __init__(self, n: int, args: str, **kw: Any) -> None:
        self.n = n
        super().__init__(args, **kw)

    def new_state(self) -> _RecurringState:
        return _RecurringState(self.window)

    def step(
        self, state: _RecurringState, slot: Slot, action: ActionInfo, result: ResultInfo, new: bool
    ) -> Verdict:
        failure = None if result.error is None else (action.name, result.error)
        steps, counts = state.steps, state.counts
        steps.append(failure)
        if failure is not None:
            counts[failure] = counts.get(failure, 0) + 1
        if len(steps) > self.window:
            old = steps.popleft()
            if old is not None:
                left = counts[old] - 1
                if left:
                    counts[old] = left
                else:
                    del counts[old]
        if failure is None:
            return None
        times = counts[failure]
        if times < self.threshold(self.n, slot, action.name):
            return None
        what = (
            f"{action.name} failed with {result.error!r} {_times(times)} within the last "
            f"{self.window} calls, whatever was tried between (last: {action.preview!r})"
        )
        return self._detected(state, slot, what, (action.key,))

    def reset(self, state: _RecurringState) -> None:
        state.steps.clear()
        state.counts.clear()


# --------------------------------------------------------------------------------------------
# Factories


def no_effect(
    k: int = 3,
    *,
    window: int = _DEFAULT_WINDOW,
    ignore_fields: Any = None,
    ladder: bool = True,
    scope: Scope = "run",
    on_limit: str | Policy = "abort",
    shadow: bool = False,
) -> Limit:
    """The same check (a call that does not edit: ``pytest``, ``python reproduce.py``) gives
    the same result after each of ``k`` rounds of edits in a row (``stuck.no_effect``): the
    edits are not changing what it checks. A round is one or more edits between two runs of
    the check; a run of the check with no edit before it neither counts nor breaks the count;
    a different result starts it again."""
    check_int(k, "no_effect(k)")
    shown, kw = _common(
        "no_effect", window, (), None, ignore_fields, ladder, scope, on_limit, shadow
    )
    return _NoEffect(k, f"{k!r}{shown}", **kw)


def oscillation(
    n: int = 2,
    *,
    window: int = _DEFAULT_WINDOW,
    ignore_fields: Any = None,
    ladder: bool = True,
    scope: Scope = "run",
    on_limit: str | Policy = "abort",
    shadow: bool = False,
) -> Limit:
    """``n`` edits, within the last ``window`` edits that succeeded, each the same call as an
    earlier edit with another edit between them (``stuck.oscillation``): A, B, A is a change
    undone and redone; A, A is a repeat (``repeats``)."""
    check_int(n, "oscillation(n)")
    shown, kw = _common(
        "oscillation", window, (), None, ignore_fields, ladder, scope, on_limit, shadow
    )
    return _Oscillation(n, f"{n!r}{shown}", **kw)


def recurring_errors(
    n: int = 4,
    *,
    window: int = _DEFAULT_WINDOW,
    ignore_fields: Any = None,
    ladder: bool = True,
    scope: Scope = "run",
    on_limit: str | Policy = "abort",
    shadow: bool = False,
) -> Limit:
    """The same tool failing with the same error class ``n`` times within the last ``window``
    calls, whatever came between (``stuck.recurring``): the error recurs round a cycle of
    attempts (edit, run, the same failure; another edit, the same failure again)."""
    check_int(n, "recurring_errors(n)", 2)
    shown, kw = _common(
        "recurring_errors", window, (), None, ignore_fields, ladder, scope, on_limit, shadow
    )
    return _RecurringErrors(n, f"{n!r}{shown}", **kw)
