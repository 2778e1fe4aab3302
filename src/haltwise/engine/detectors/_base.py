"""The escalation ladder every stuck detector shares, and the window that judges novelty.

A detector that sees its pattern first *nudges* (a ``Warn`` that names exactly what repeated;
the event goes ahead). If the agent relapses (it calls one of the repeated actions again, or
the pattern simply goes on) the detector *refuses* the repeated call (a ``Block``, which the
driver returns to the model as the tool's error); a relapse after that *stops* the run (a
message, so the limit's policy applies: abort by default, with the detector's reason code).
Observed progress (a result with new information, a ``Progress`` event, a user message) and a
new user prompt reset the ladder.

With ``ladder=False`` a detector stops at once when it sees its pattern (the behaviour of the
exact-match checks that agents ship). In shadow mode nothing is enforced: the ladder is walked
silently and the governor records the trip where the run would have stopped.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ..decisions import Block, Warn
from ..errors import InvalidValueError
from ..events import Injected, Progress, ToolCall, ToolResult, TurnEnded
from ..limits import Context, EventType, Leaf, Scope
from ..policies import Policy
from ..state import Slot
from ._keys import (
    DEFAULT_IGNORED_FIELDS,
    ActionInfo,
    LineHashes,
    ResultInfo,
    analyze_call,
    analyze_result,
)

if TYPE_CHECKING:
    from .. import _pure as cython
else:
    try:
        import cython

        if not cython.compiled:
            raise ImportError  # Cython's own stand-ins: haltwise's are the same everywhere
    except ImportError:
        from .. import _pure as cython

__all__ = ["Detector", "LadderState", "Recent", "ToolDetector", "ToolState"]

#: The rungs of the ladder.
CLEAR, WARNED, BLOCKED = 0, 1, 2

Verdict = str | Warn | Block | None


#: The last judgement of novelty: (result, action, the window's signature and size, answer).
#: Every detector of a governor judges the same result against the same window, so it is
#: judged once.
_judged: tuple[ResultInfo, int, int, int, bool] | None = None

#: The notes given at the event being handled: (event, governor, the actions they named). Two
#: detectors that see the same repeated action at the same event (``repeats`` and
#: ``same_errors`` on one failing edit) give the model one note about it, not two; the second
#: still climbs its ladder. A tuple swapped in whole: concurrent governors cannot tear it, and
#: the governor's identity keeps one governor's notes from silencing another's.
_noted: tuple[object, object, frozenset[int]] | None = None


def _first_note(at: tuple[object, object] | None, actions: frozenset[int]) -> bool:
    """Whether a note about ``actions`` at the event ``at`` (event, governor) is the first one
    there to name any of them; records them either way."""
    global _noted
    if at is None or not actions:
        return True
    event, governor = at
    memo = _noted
    if memo is not None and memo[0] is event and memo[1] is governor:
        _noted = (event, governor, memo[2] | actions)
        return memo[2].isdisjoint(actions)
    _noted = (event, governor, actions)
    return True


class Recent:
    """The last ``size`` results, by reference: what counts as *already seen*.

    Lines are compared once their volatile details are masked (a timing, a pid, an address, a
    temp path is not news; a count of failures, a size, a line number, a version is). A result
    carries new information when at least one of its lines is new text (not merely the call's
    own arguments repeated back: "No matches found for 'x'"); when the same call ran within the
    window but never gave this result (9 failures, then 7; a listing whose sizes grew; a
    failing test gone from the list); or when at least half of its lines changed. Another call
    that shows lines already read with only their numbers moved (a file viewer's window
    shifted: "(149 more lines above)") is not news, nor the same edit made again (the file
    grows by the same line each time). A new action that succeeded quietly (no output, or one
    line) counts too: commands that change state (``sed -i``, ``mkdir``, ``cd``, an edit tool)
    say little; an ``echo`` of its own arguments does not. A line counts as seen when any of
    the last ``size`` results showed it, in whatever order or window (up to 256 lines of each
    are remembered, so a window shifted over lines already read is not news). Judging costs
    O(lines x size) set lookups, with at most 96 lines compared per result; memory is ``size``
    references, shared with every other detector that looks at the same results.
    """

    __slots__ = ("_items", "_keys", "_oldest", "_signature", "size")

    def __init__(self, size: int) -> None:
        self.size = size
        #: The results with the keys of their actions, in a ring: once it holds ``size``, each
        #: new one takes the place of the oldest, at ``_oldest``. Judging reads them in any order.
        self._items: list[tuple[int, ResultInfo]] = []
        self._oldest = 0
        self._keys: dict[int, int] = {}
        #: What the window holds, in brief: detectors that saw the same results agree on it.
        self._signature = 0

    def is_new(self, key: int, result: ResultInfo, edit: bool = False) -> bool:
        global _judged
        memo = _judged
        if memo is not None and memo[0] is result and memo[1] == key:
            # Read into C integers (compiled), then compared, rather than made into a tuple.
            signature = memo[2]
            size = memo[3]
            if signature == self._signature and size == len(self._items):
                answer: bool = memo[4]
                return answer
        answer = self._judge(key, result, edit)
        _judged = (result, key, self._signature, len(self._items), answer)
        return answer

    def _judge(self, key: int, result: ResultInfo, edit: bool) -> bool:
        items = self._items
        if not items:
            return True
        lines = result.lines
        # The same call gave a result it had not given within the window: 9 failures, then 7;
        # a listing whose sizes grew; a failing test gone from the list. Volatile details
        # (timings, pids, temp paths) were masked first, so what moved means something. Not for
        # an edit made again: what moved there (the file grew by the same line) moved because
        # of the edit itself.
        if (
            not edit
            and key in self._keys
            and all(info.lines != lines for old, info in items if old == key)
        ):
            return True
        if lines:
            # Each line looked up in each result's lines: cheaper than building their union.
            infos = _results(items)
            changed = _unseen_lines(lines, infos)
            if changed:
                if _new_text(lines, infos):
                    return True  # a line of new text
                if 2 * changed >= _line_count(lines):
                    return True
        # Nothing new to read. A new action that succeeded quietly ("File updated", or no output
        # at all) may have changed state; an echo of its own arguments did not.
        return (
            result.error is None
            and not result.echo_only
            and _line_count(lines) <= 1
            and key not in self._keys
        )

    def push(self, key: int, result: ResultInfo) -> None:
        self._keys[key] = self._keys.get(key, 0) + 1
        self._signature += _mixed(result, key)
        items = self._items
        if len(items) < self.size:
            items.append((key, result))
            return
        oldest = self._oldest
        old, info = items[oldest]
        items[oldest] = (key, result)
        self._oldest = oldest + 1 if oldest + 1 < len(items) else 0
        self._signature -= _mixed(info, old)
        count = self._keys[old] - 1
        if count:
            self._keys[old] = count
        else:
            del self._keys[old]

    def __len__(self) -> int:
        return len(self._items)


if not cython.compiled:
    # Compiled, ``_base.pxd`` mixes the result's address and the key as C integers, and reads
    # the packed line hashes and the results' tables of them (``_keys.pxd``) in C.

    def _mixed(result: object, key: int) -> int:
        """What a result (by its identity) and the key of its action add to a window's
        signature. Compiled, a signature is a C integer that wraps: the result's address and
        the key are 64-bit integers, and so is their ``^``."""
        return id(result) ^ key

    def _line_count(lines: LineHashes) -> int:
        """How many lines a result's line hashes are of."""
        return len(lines)

    def _results(items: Iterable[tuple[int, Any]]) -> Iterable[tuple[int, Any]]:
        """What ``_unseen_lines`` and ``_new_text`` read the window's results from: its items
        themselves (compiled, a list of the results, made once for both)."""
        return items

    def _unseen_lines(lines: Any, infos: Iterable[tuple[int, Any]]) -> int:
        """How many of ``lines`` none of the results of ``infos`` remembers as they are."""
        exacts = [info.exact for _, info in infos]
        changed = 0
        for line, _ in lines:
            if not _seen(line, exacts):
                changed += 1
        return changed

    def _new_text(lines: Any, infos: Iterable[tuple[int, Any]]) -> bool:
        """Whether a line of ``lines`` is new text: none of the results of ``infos`` remembers
        it, even with its numbers masked."""
        masks = [info.masked for _, info in infos]
        for _, masked in lines:  # noqa: SIM110 (a loop: see _seen)
            if not _seen(masked, masks):
                return True
        return False

    def _seen(line: int, sets: list[frozenset[int]]) -> bool:
        """Whether any of ``sets`` holds ``line``."""
        # A loop, not any() over a generator: interpreted, the generator costs 7% of a call.
        for seen in sets:  # noqa: SIM110
            if line in seen:
                return True
        return False


class LadderState:
    """Where a detector stands on its ladder in one run."""

    __slots__ = ("at", "blocked", "flagged", "level", "onset", "what")

    def __init__(self) -> None:
        #: ``CLEAR``, ``WARNED`` (nudged) or ``BLOCKED`` (a repeated call was refused).
        self.level = CLEAR
        #: The actions whose next call is a relapse (hashes of canonical action keys).
        self.flagged: frozenset[int] = frozenset()
        #: What repeated, in words, for the messages.
        self.what = ""
        #: The turn at which the pattern began, or None while there is none.
        self.onset: int | None = None
        #: Whether a repeated call was refused.
        self.blocked = False
        #: While an event is being judged: the event and the governor (see ``_first_note``).
        self.at: tuple[object, object] | None = None

    def clear(self) -> None:
        self.level = CLEAR
        self.blocked = False
        self.flagged = frozenset()
        self.what = ""
        self.onset = None


class Detector(Leaf):
    """A stuck detector: a limit with its own pattern and the shared ladder."""

    __slots__ = ("composite", "ladder")

    unit = "steps"

    def __init__(
        self,
        args: str,
        *,
        ladder: bool,
        scope: Scope,
        on_limit: str | Policy,
        shadow: bool,
        name: str,
    ) -> None:
        super().__init__(
            args, scope=scope, warn_at=None, on_limit=on_limit, shadow=shadow, name=name
        )
        self.ladder = bool(ladder)
        #: The composite that made this detector (``stuck()``), shown in its place in a repr.
        self.composite: Any = None

    # The Leaf protocol: a detector has no cap and counts the rungs it climbed.

    def new_state(self) -> LadderState:
        return LadderState()

    def cap(self) -> None:
        return None

    def metric(self, slot: Slot, ctx: Context) -> int:
        state = slot.state
        return state.level if isinstance(state, LadderState) else 0

    def over(self, ctx: Context) -> bool:
        state = ctx.slot(self).state
        return isinstance(state, LadderState) and state.level > CLEAR

    def restart(self, slot: Slot, ctx: Context) -> None:
        slot.new_round()
        slot.state = self.new_state()

    def extend(self, amount: int | float, ctx: Context) -> None:
        # "Extend" means: tolerate this pattern once more; the thresholds stay as written.
        for leaf in self.leaves():
            leaf.restart(ctx.slot(leaf), ctx)

    def suggestions(self) -> tuple[str, ...]:
        return (
            "Look at the repeated step: the agent was not learning anything new from it",
            "Give the agent a hint or a different tool, or split the task",
        )

    # The ladder

    def _turn(self, slot: Slot) -> int:
        return slot.tally.turns

    def _detected(
        self,
        state: LadderState,
        slot: Slot,
        what: str,
        flagged: Iterable[int] = (),
        onset: int | None = None,
    ) -> Verdict:
        """The pattern is seen (again): climb one rung.

        A note names the repeated actions; when another detector has already named one of them
        at this event, this one climbs its rung without a second note (one note per action per
        event)."""
        named = frozenset(flagged)
        slot.asleep = False  # a flagged call may be refused from now on (``pre``)
        if state.level == CLEAR:
            state.what = what
            state.flagged = named
            state.onset = onset if onset is not None else self._turn(slot)
            if not self.ladder:
                return self._stop_message(state, first=True)
            state.level = WARNED
            if self.shadow or not _first_note(state.at, named):
                return None
            return Warn(self._nudge(what), repr(self))
        state.flagged = state.flagged | named
        if state.level == WARNED:
            # It went on by another route than a flagged call: the last note before a stop.
            state.level = BLOCKED
            if self.shadow or not _first_note(state.at, named):
                return None
            return Warn(f"Still repeating: {what}. The next repetition stops the run.", repr(self))
        return self._stop_message(state)

    def _relapse(self, state: LadderState, event: ToolCall, key: int) -> Verdict:
        """A flagged action is called again: refuse it, or stop."""
        if state.level == CLEAR or key not in state.flagged:
            return None
        if state.level == WARNED:
            state.level = BLOCKED
            state.blocked = True
            if self.shadow:
                return None
            return Block(event, self._refusal(state.what), repr(self), retryable=False)
        return self._stop_message(state)

    def _nudge(self, what: str) -> str:
        return f"You seem to be stuck: {what}. That is not working; change your approach."

    def _refusal(self, what: str) -> str:
        return (
            f"Refused: {what}. Repeating it will not give a different result; "
            "try a different approach."
        )

    def _stop_message(self, state: LadderState, *, first: bool = False) -> str:
        since = f" since turn {state.onset}" if state.onset else ""
        refused = "a refused call" if state.blocked else "a last warning"
        after = "" if first else f"; it went on after a warning and {refused}"
        return f"Stuck{since}: {state.what}{after} ({self!r})"

    def _progress(self, state: LadderState) -> None:
        state.clear()


class ToolState(LadderState):
    """A tool detector's state: the ladder, the calls awaiting results, the recent results."""

    __slots__ = ("pending", "recent", "refused")

    def __init__(self, window: int) -> None:
        super().__init__()
        #: Admitted calls awaiting their results, by call id (in order).
        self.pending: dict[str, ActionInfo] = {}
        #: Ids of refused calls, whose results (if a driver reports one) are not the tool's.
        self.refused: set[str] = set()
        self.recent = Recent(window)


class ToolDetector(Detector):
    """A detector over tool calls and their results. Subclasses implement ``step``."""

    __slots__ = ("ignored", "polling_n", "polling_tools", "window")

    #: Whether a result with new information clears the ladder (it does for every loop
    #: detector; not for a budget on a kind of progress, such as ``paging``).
    news_clears = True

    pre_events: tuple[EventType, ...] = (ToolCall,)
    post_events: tuple[EventType, ...] = (ToolCall, ToolResult, TurnEnded, Progress, Injected)

    def __init__(
        self,
        args: str,
        *,
        window: int,
        polling_tools: frozenset[str],
        polling_n: int | None,
        ignored: frozenset[str],
        **kw: Any,
    ) -> None:
        super().__init__(args, **kw)
        self.window = window
        self.polling_tools = polling_tools
        self.polling_n = polling_n
        self.ignored = ignored

    def new_state(self) -> ToolState:
        return ToolState(self.window)

    @cython.locals(slot=Slot, state=ToolState)
    def pre(self, event: Any, slot: Slot | None, ctx: Context) -> Verdict:
        assert slot is not None
        state = slot.state
        if state.level == CLEAR:
            # Nothing to refuse until the pattern is seen: the checks before a call leave this
            # one out until then (``_detected`` wakes it).
            slot.asleep = True
            return None
        info = analyze_call(event, self.ignored)
        verdict = self._relapse(state, event, info.key)
        if isinstance(verdict, Block) and event.call_id:
            state.refused.add(event.call_id)
        return verdict

    # Typed (compiled): their fields are read as C struct members, their windows called without
    # a lookup.
    @cython.locals(slot=Slot, state=ToolState, call=ToolCall, action=ActionInfo, result=ResultInfo)
    def post(self, event: Any, slot: Slot | None, ctx: Context) -> Verdict:
        assert slot is not None
        state = slot.state
        kind = type(event)
        if kind is ToolCall:
            pending = state.pending
            call = event
            pending[call.call_id] = analyze_call(event, self.ignored)
            if len(pending) > 64:
                del pending[next(iter(pending))]
            return None
        if kind is ToolResult:
            action = _take_pending(state, event)
            if action is None:
                return None
            result = analyze_result(event, action)
            new = state.recent.is_new(action.key, result, action.edit)
            state.recent.push(action.key, result)
            if new and state.level != CLEAR and self.news_clears:
                self._progress(state)
            state.at = (event, ctx)
            verdict = self.step(state, slot, action, result, new)
            state.at = None
            return verdict
        if kind is TurnEnded:
            state.pending.clear()
            state.refused.clear()
            state.at = (event, ctx)
            verdict = self.turn_ended(state, slot)
            state.at = None
            return verdict
        # Progress, Injected: observed progress, or new input from the user.
        self._progress(state)
        self.reset(state)
        return None

    def threshold(self, n: int, slot: Slot, name: str) -> int:
        """``n``, or the polling threshold for a polling tool (three times ``n`` by default)."""
        if name in self.polling_tools:
            return self.polling_n if self.polling_n is not None else 3 * n
        return n

    # For subclasses

    def step(
        self, state: Any, slot: Slot, action: ActionInfo, result: ResultInfo, new: bool
    ) -> Verdict:
        raise NotImplementedError

    def turn_ended(self, state: Any, slot: Slot) -> Verdict:
        return None

    def reset(self, state: Any) -> None:
        """Forget the pattern being counted (progress was reported)."""


def _take_pending(state: ToolState, event: ToolResult) -> ActionInfo | None:
    """The admitted call ``event`` answers, taken from those awaiting results; None for the
    result of a refused call, or of a call this detector never saw."""
    call_id = event.call_id  # typed (compiled): a C struct member
    refused = state.refused
    if refused and call_id in refused:
        refused.discard(call_id)
        return None
    pending = state.pending
    action = pending.pop(call_id, None)
    if action is not None:
        return action
    # No id to match: the oldest call of that tool (drivers without call ids run in order).
    for pending_id, info in pending.items():
        if info.name == event.name:
            del pending[pending_id]
            return info
    return None


# --------------------------------------------------------------------------------------------
# Arguments


def check_int(value: object, name: str, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InvalidValueError(name, value, f"an integer of at least {minimum}")
    return value


def check_tools(value: object, name: str) -> frozenset[str]:
    if isinstance(value, str):
        value = (value,)
    tools: frozenset[object] | None = None
    if isinstance(value, Iterable):
        tools = frozenset(value)
    if tools is None or not all(isinstance(tool, str) and tool for tool in tools):
        raise InvalidValueError(name, value, "a set of tool names, e.g. {'tail_log'}")
    return frozenset(str(tool) for tool in tools)


def check_fields(value: object, name: str) -> frozenset[str]:
    if value is None:
        return DEFAULT_IGNORED_FIELDS
    fields = check_tools(value, name)
    return frozenset(field.lower() for field in fields)


def options(**given: tuple[Any, Any]) -> str:
    """``, name=value`` for each option that differs from its default, in the order given."""
    parts = []
    for name, (value, default) in given.items():
        if value != default:
            if isinstance(value, frozenset):
                shown = "{" + ", ".join(repr(item) for item in sorted(value)) + "}"
            else:
                shown = repr(value)
            parts.append(f", {name}={shown}")
    return "".join(parts)
