"""Detectors over tool calls: repeats, the same error, cycles, scattered duplicates, no progress.

Each compares canonical action keys and judges results by whether they carried new information
(see ``_base.Recent``), so a loop whose arguments drift in their ids and timestamps is still a
loop, and paging through a file or polling a log that grows is progress, not a loop. Each holds
O(window) state per run and does O(window) work per event, whatever the history's length.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ..decisions import Block
from ..events import ToolCall
from ..limits import Context, Limit, Scope
from ..policies import Policy
from ..state import Slot
from ._base import CLEAR, ToolDetector, ToolState, Verdict, check_fields, check_int, check_tools
from ._base import options as _options
from ._keys import DEFAULT_IGNORED_FIELDS, ActionInfo, ResultInfo

if TYPE_CHECKING:
    from .. import _pure as cython
else:
    try:
        import cython

        if not cython.compiled:
            raise ImportError  # Cython's own stand-ins: haltwise's are the same everywhere
    except ImportError:
        from .. import _pure as cython

__all__ = ["cycles", "no_progress", "repeats", "same_errors", "scattered"]

_DEFAULT_WINDOW = 20


def _times(count: int) -> str:
    return "twice" if count == 2 else f"{count} times"


# --------------------------------------------------------------------------------------------
# repeat: the same action with the same result, N times in a row


class _StreakState(ToolState):
    """How many times in a row the last action came (repeats and paging count streaks)."""

    __slots__ = ("last_key", "streak")

    def __init__(self, window: int) -> None:
        super().__init__(window)
        self.last_key: int | None = None
        self.streak = 0


class _Repeats(ToolDetector):
    __slots__ = ("n",)
    factory = "repeats"
    reason = "stuck.repeat"

    def __init__(self, n: int, args: str, **kw: Any) -> None:
        self.n = n
        super().__init__(args, **kw)

    def new_state(self) -> _StreakState:
        return _StreakState(self.window)

    @cython.locals(state=_StreakState, action=ActionInfo)
    def step(
        self, state: _StreakState, slot: Slot, action: ActionInfo, result: ResultInfo, new: bool
    ) -> Verdict:
        if not new and action.key == state.last_key:
            state.streak += 1
        else:
            state.last_key = action.key
            state.streak = 1
            if state.level == CLEAR:
                state.onset = slot.tally.turns
            return None
        if state.streak < self.threshold(self.n, slot, action.name):
            return None
        what = (
            f"{action.preview!r} ran {_times(state.streak)} in a row with the same result "
            f"({result.preview!r})"
        )
        return self._detected(state, slot, what, (action.key,), state.onset)

    def reset(self, state: _StreakState) -> None:
        state.last_key = None
        state.streak = 0


# --------------------------------------------------------------------------------------------
# same error: the same action failing the same way, N times in a row


class _SameErrorState(ToolState):
    __slots__ = ("last", "streak", "tool", "tool_streak")

    def __init__(self, window: int) -> None:
        super().__init__(window)
        #: The last failure (action, error class) and how many times in a row it came.
        self.last: tuple[int, str] | None = None
        self.streak = 0
        #: The same for the tool alone, whatever its arguments (tool name, error class).
        self.tool: tuple[str, str] | None = None
        self.tool_streak = 0


class _SameErrors(ToolDetector):
    __slots__ = ("n", "tool_n")
    factory = "same_errors"
    reason = "stuck.same_error"

    def __init__(self, n: int, tool_n: int | None, args: str, **kw: Any) -> None:
        self.n = n
        self.tool_n = tool_n
        super().__init__(args, **kw)

    def new_state(self) -> _SameErrorState:
        return _SameErrorState(self.window)

    @cython.locals(state=_SameErrorState, action=ActionInfo, result=ResultInfo)
    def step(
        self, state: _SameErrorState, slot: Slot, action: ActionInfo, result: ResultInfo, new: bool
    ) -> Verdict:
        error = result.error
        if error is None:
            if state.last is not None or state.tool is not None:
                self.reset(state)
            return None
        current = (action.key, error)
        if current == state.last:
            state.streak += 1
        else:
            state.last = current
            state.streak = 1
        tool = (action.name, error)
        if tool == state.tool:
            state.tool_streak += 1
        else:
            state.tool = tool
            state.tool_streak = 1
            if state.level == CLEAR:
                state.onset = slot.tally.turns
        if state.streak >= self.threshold(self.n, slot, action.name):
            what = f"{action.preview!r} failed {_times(state.streak)} in a row with {error!r}"
            return self._detected(state, slot, what, (action.key,), state.onset)
        if self.tool_n is not None and state.tool_streak >= self.threshold(
            self.tool_n, slot, action.name
        ):
            what = (
                f"{action.name} failed {_times(state.tool_streak)} in a row with "
                f"{error!r}, whatever its arguments (last: {action.preview!r})"
            )
            return self._detected(state, slot, what, (action.key,), state.onset)
        return None

    def reset(self, state: _SameErrorState) -> None:
        state.last = state.tool = None
        state.streak = state.tool_streak = 0


# --------------------------------------------------------------------------------------------
# cycle: the last steps repeat with a period of 1..8, at least 3 times, learning nothing new


class _CycleState(ToolState):
    __slots__ = ("actions", "matches", "since_new")

    def __init__(self, window: int, max_period: int) -> None:
        super().__init__(window)
        #: The last ``max_period`` actions, the last one last.
        self.actions: list[ActionInfo] = []
        #: For each period p: how many steps in a row equalled the step p before.
        self.matches = [0] * (max_period + 1)
        #: Steps since the last result with new information.
        self.since_new = 0


class _Cycles(ToolDetector):
    __slots__ = ("max_period", "min_period", "repetitions")
    factory = "cycles"
    reason = "stuck.cycle"

    def __init__(
        self, min_period: int, max_period: int, repetitions: int, args: str, **kw: Any
    ) -> None:
        self.min_period = min_period
        self.max_period = max_period
        self.repetitions = repetitions
        super().__init__(args, **kw)

    def new_state(self) -> _CycleState:
        return _CycleState(self.window, self.max_period)

    @cython.locals(
        state=_CycleState,
        action=ActionInfo,
        earlier=ActionInfo,
        count=cython.int,
        top=cython.int,
        bottom=cython.int,
        period=cython.int,
        repetitions=cython.int,
    )
    def step(
        self, state: _CycleState, slot: Slot, action: ActionInfo, result: ResultInfo, new: bool
    ) -> Verdict:
        actions = state.actions
        matches = state.matches
        count = len(actions)
        top = self.max_period
        key = action.key
        for period in range(1, top + 1):
            earlier = actions[count - period] if period <= count else None
            if earlier is not None and earlier.key == key:
                matches[period] += 1
            else:
                matches[period] = 0
        actions.append(action)
        if count == top:
            del actions[0]
        state.since_new = 0 if new else state.since_new + 1
        repetitions = self.repetitions
        bottom = self.min_period
        if state.since_new < (repetitions - 1) * bottom:
            return None  # too few steps without news for the shortest cycle, so for any
        for period in range(bottom, top + 1):
            repeated = (repetitions - 1) * period
            if matches[period] < repeated or state.since_new < repeated:
                continue
            cycle = actions[-period:]
            if period > 1 and len({step.key for step in cycle}) == 1:
                continue  # one action over and over: a repeat, not a cycle
            shown = " → ".join(repr(step.preview) for step in cycle)
            what = (
                f"the same {period} calls ({shown}) came round "
                f"{_times(matches[period] // period + 1)} with no new result"
            )
            onset = slot.tally.turns - matches[period] - period + 1
            return self._detected(state, slot, what, (step.key for step in cycle), onset)
        return None

    def reset(self, state: _CycleState) -> None:
        state.actions = []
        state.matches = [0] * (self.max_period + 1)
        state.since_new = 0


# --------------------------------------------------------------------------------------------
# scattered duplicates: the same action and result N times within a window


class _ScatteredState(ToolState):
    __slots__ = ("counts", "steps")

    def __init__(self, window: int) -> None:
        super().__init__(window)
        #: The last ``window`` steps: an action and whether its result was a duplicate.
        self.steps: deque[tuple[int, bool]] = deque()
        #: Duplicates per action within the window.
        self.counts: dict[int, int] = {}


class _Scattered(ToolDetector):
    __slots__ = ("n",)
    factory = "scattered"
    reason = "stuck.scattered"

    def __init__(self, n: int, args: str, **kw: Any) -> None:
        self.n = n
        super().__init__(args, **kw)

    def new_state(self) -> _ScatteredState:
        return _ScatteredState(self.window)

    @cython.locals(state=_ScatteredState, action=ActionInfo)
    def step(
        self, state: _ScatteredState, slot: Slot, action: ActionInfo, result: ResultInfo, new: bool
    ) -> Verdict:
        key = action.key
        duplicate = not new
        steps = state.steps
        steps.append((key, duplicate))
        counts = state.counts
        if duplicate:
            counts[key] = counts.get(key, 0) + 1
        if len(steps) > self.window:
            old, was_duplicate = steps.popleft()
            if was_duplicate:
                left = counts[old] - 1
                if left:
                    counts[old] = left
                else:
                    del counts[old]
        times = counts.get(key, 0) + 1
        if not duplicate or times < self.threshold(self.n, slot, action.name):
            return None
        what = (
            f"{action.preview!r} ran {times} times within the last {self.window} calls, "
            f"with the same result ({result.preview!r})"
        )
        return self._detected(state, slot, what, (key,))

    def reset(self, state: _ScatteredState) -> None:
        state.steps.clear()
        state.counts.clear()


# --------------------------------------------------------------------------------------------
# no progress: K turns with no new information while spending


class _NoProgressState(ToolState):
    __slots__ = ("acted", "keys", "moved", "only_polling", "streak")

    def __init__(self, window: int) -> None:
        super().__init__(window)
        #: Turns in a row without progress.
        self.streak = 0
        #: Whether the current turn called a tool (or tried to: a refused call counts), brought
        #: progress, and only polled.
        self.acted = False
        self.moved = False
        self.only_polling = True
        #: The actions of the current stretch (bounded by the window): repeating one relapses.
        self.keys: dict[int, None] = {}


class _NoProgress(ToolDetector):
    __slots__ = ("k",)
    factory = "no_progress"
    reason = "stuck.no_progress"

    def __init__(self, k: int, args: str, **kw: Any) -> None:
        self.k = k
        super().__init__(args, **kw)

    def new_state(self) -> _NoProgressState:
        return _NoProgressState(self.window)

    def pre(self, event: Any, slot: Slot | None, ctx: Context) -> Verdict:
        verdict = ToolDetector.pre(self, event, slot, ctx)
        if isinstance(verdict, Block):
            # Trying a flagged call again is acting, without progress.
            assert slot is not None
            self._acted(slot.state, event)
        return verdict

    def post(self, event: Any, slot: Slot | None, ctx: Context) -> Verdict:
        if type(event) is ToolCall:
            assert slot is not None
            self._acted(slot.state, event)
        return ToolDetector.post(self, event, slot, ctx)

    @cython.locals(state=_NoProgressState)
    def _acted(self, state: _NoProgressState, call: ToolCall) -> None:
        state.acted = True
        if state.only_polling and call.name not in self.polling_tools:
            state.only_polling = False

    @cython.locals(state=_NoProgressState, action=ActionInfo)
    def step(
        self,
        state: _NoProgressState,
        slot: Slot,
        action: ActionInfo,
        result: ResultInfo,
        new: bool,
    ) -> Verdict:
        key = action.key
        if new:
            state.moved = True
        if state.only_polling and action.name not in self.polling_tools:
            state.only_polling = False
        keys = state.keys
        keys.pop(key, None)
        keys[key] = None
        if len(keys) > self.window:
            del keys[next(iter(keys))]
        return None

    def turn_ended(self, state: _NoProgressState, slot: Slot) -> Verdict:
        acted, moved, polled = state.acted, state.moved, state.only_polling
        state.acted = state.moved = False
        state.only_polling = True
        if not acted:
            # A turn with no tool call brought no result to judge: it neither counts nor resets
            # (turns of talk, format errors, are ``monologue``'s to count).
            return None
        if moved:
            state.streak = 0
            state.keys.clear()
            return None
        if polled and self.polling_tools:
            return None  # a turn that only waited on a polling tool is not counted
        state.streak += 1
        if state.streak == 1 and state.level == CLEAR:
            state.onset = slot.tally.turns
        if state.streak < self.k:
            return None
        what = f"{state.streak} turns in a row brought no new result"
        return self._detected(state, slot, what, state.keys, state.onset)

    def reset(self, state: _NoProgressState) -> None:
        state.streak = 0
        state.acted = state.moved = False
        state.keys.clear()


# --------------------------------------------------------------------------------------------
# Factories


def _common(
    name: str,
    window: int,
    polling_tools: Iterable[str],
    polling_n: int | None,
    ignore_fields: Iterable[str] | None,
    ladder: bool,
    scope: Scope,
    on_limit: str | Policy,
    shadow: bool,
) -> tuple[str, dict[str, Any]]:
    tools = check_tools(polling_tools, f"{name}(polling_tools)")
    if polling_n is not None:
        check_int(polling_n, f"{name}(polling_n)")
    ignored = check_fields(ignore_fields, f"{name}(ignore_fields)")
    check_int(window, f"{name}(window)", 2)
    shown = _options(
        window=(window, _DEFAULT_WINDOW),
        polling_tools=(tools, frozenset()),
        polling_n=(polling_n, None),
        ignore_fields=(ignored, DEFAULT_IGNORED_FIELDS),
        ladder=(bool(ladder), True),
        scope=(scope, "run"),
        on_limit=(on_limit, "abort"),
        shadow=(bool(shadow), False),
    )
    kw = {
        "window": window,
        "polling_tools": tools,
        "polling_n": polling_n,
        "ignored": ignored,
        "ladder": ladder,
        "scope": scope,
        "on_limit": on_limit,
        "shadow": shadow,
        "name": name,
    }
    return shown, kw


def repeats(
    n: int = 3,
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
    """The same action with the same result ``n`` times in a row (``stuck.repeat``).

    "The same result" means one with no new information: a result that only moved its numbers
    (a file viewer's line count) is the same; a page of a file not seen before is not. Tools
    in ``polling_tools`` may repeat ``polling_n`` times instead.
    """
    check_int(n, "repeats(n)", 2)
    shown, kw = _common(
        "repeats", window, polling_tools, polling_n, ignore_fields, ladder, scope, on_limit, shadow
    )
    return _Repeats(n, f"{n!r}{shown}", **kw)


def same_errors(
    n: int = 3,
    *,
    tool_n: int | None = None,
    window: int = _DEFAULT_WINDOW,
    polling_tools: Iterable[str] = (),
    polling_n: int | None = None,
    ignore_fields: Iterable[str] | None = None,
    ladder: bool = True,
    scope: Scope = "run",
    on_limit: str | Policy = "abort",
    shadow: bool = False,
) -> Limit:
    """The same action failing with the same error class ``n`` times in a row
    (``stuck.same_error``), however its messages vary; with ``tool_n``, also the same tool
    failing the same way ``tool_n`` times in a row whatever its arguments (arguments that
    drift: ``javac A.java``, ``javac B.java``, each "command not found")."""
    check_int(n, "same_errors(n)", 2)
    if tool_n is not None:
        check_int(tool_n, "same_errors(tool_n)", 2)
    shown, kw = _common(
        "same_errors",
        window,
        polling_tools,
        polling_n,
        ignore_fields,
        ladder,
        scope,
        on_limit,
        shadow,
    )
    tool = _options(tool_n=(tool_n, None))
    return _SameErrors(n, tool_n, f"{n!r}{tool}{shown}", **kw)


def cycles(
    repetitions: int = 3,
    *,
    min_period: int = 2,
    max_period: int = 8,
    window: int = _DEFAULT_WINDOW,
    polling_tools: Iterable[str] = (),
    polling_n: int | None = None,
    ignore_fields: Iterable[str] | None = None,
    ladder: bool = True,
    scope: Scope = "run",
    on_limit: str | Policy = "abort",
    shadow: bool = False,
) -> Limit:
    """The last steps repeat with a period between ``min_period`` and ``max_period``, at least
    ``repetitions`` times, with no new result in the repeated part (``stuck.cycle``): A-B-A-B-A-B,
    or a round of seven searches made three times over."""
    check_int(repetitions, "cycles(repetitions)", 2)
    check_int(min_period, "cycles(min_period)", 1)
    check_int(max_period, "cycles(max_period)", min_period)
    shown, kw = _common(
        "cycles", window, polling_tools, polling_n, ignore_fields, ladder, scope, on_limit, shadow
    )
    periods = _options(min_period=(min_period, 2), max_period=(max_period, 8))
    return _Cycles(min_period, max_period, repetitions, f"{repetitions!r}{periods}{shown}", **kw)


def scattered(
    n: int = 4,
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
    """The same action with the same result ``n`` times within the last ``window`` calls, not
    necessarily in a row (``stuck.scattered``)."""
    check_int(n, "scattered(n)", 2)
    shown, kw = _common(
        "scattered",
        window,
        polling_tools,
        polling_n,
        ignore_fields,
        ladder,
        scope,
        on_limit,
        shadow,
    )
    return _Scattered(n, f"{n!r}{shown}", **kw)


def no_progress(
    k: int = 12,
    *,
    window: int = _DEFAULT_WINDOW,
    polling_tools: Iterable[str] = (),
    ignore_fields: Iterable[str] | None = None,
    ladder: bool = True,
    scope: Scope = "run",
    on_limit: str | Policy = "abort",
    shadow: bool = False,
) -> Limit:
    """``k`` turns in a row with no new information (``stuck.no_progress``): no result that had
    not been seen in the last ``window`` results, no silent state change, no ``Progress`` event
    and no user message. Only turns that called a tool are counted: turns that only called
    ``polling_tools`` are not, nor turns with no tool call at all, which bring no result to
    judge (``monologue`` counts those; they neither count here nor break the count)."""
    check_int(k, "no_progress(k)")
    shown, kw = _common(
        "no_progress",
        window,
        polling_tools,
        None,
        ignore_fields,
        ladder,
        scope,
        on_limit,
        shadow,
    )
    return _NoProgress(k, f"{k!r}{shown}", **kw)
