"""Reference rules: the loop checks that agents ship today, as haltwise limits, for comparison.

These are *anchors* for ``bench_detectors.py``, not product defaults. Each compares exact
strings, stops at once (no nudge, no refusal first), and is written from the published checks:

- OpenHands ``StuckDetector`` (``openhands/controller/stuck.py``): the last 4 actions identical
  and the last 4 observations identical; the last 3 actions identical with 3 error
  observations; the last 3 agent messages identical with no observation between them; an
  A-B-A-B-A-B pattern of actions and observations over the last 6 steps. Checked after each
  observation, so the run stops before the next model call. Its code compares command outputs
  by command and exit code only (``_eq_no_pid``), while its documentation speaks of identical
  observations; both readings are here (``compare="content"`` and ``compare="exit_code"``).
- Gemini CLI's tool-call loop check (``loopDetectionService.ts``): the same tool name and
  arguments 5 times in a row (``TOOL_CALL_LOOP_THRESHOLD = 5``), checked when the call is
  requested, so the fifth call does not run.

An "error observation" is a result with an error class by haltwise's own reading
(``haltwise.engine.detectors.error_class``), so that both sides see the same errors.
"""

from __future__ import annotations

import json
from collections import deque
from typing import Any

from haltwise.engine.detectors import error_class
from haltwise.engine.events import ToolCall, ToolResult, TurnEnded, TurnStarting
from haltwise.engine.limits import Context, Leaf, Limit
from haltwise.engine.state import Slot

__all__ = ["gemini_tool_loop", "openhands_stuck"]


def _raw_action(event: ToolCall) -> str:
    """The call as the agent wrote it: name and arguments, unsorted and unnormalized."""
    arguments = event.arguments
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return f"{event.name}\x00{text}"


class _Anchor(Leaf):
    __slots__ = ()
    reason = "anchor"

    def cap(self) -> None:
        return None

    def metric(self, slot: Slot, ctx: Context) -> int:
        return 0

    def over(self, ctx: Context) -> bool:
        return False


class _OpenHandsState:
    __slots__ = ("called", "messages", "pending", "steps", "stuck")

    def __init__(self) -> None:
        #: The last 6 (action, observation, is_error) steps.
        self.steps: deque[tuple[str, Any, bool]] = deque(maxlen=6)
        #: Agent messages since the last observation.
        self.messages: list[str] = []
        self.pending: dict[str, str] = {}
        self.called = False
        self.stuck: str | None = None


class _OpenHands(_Anchor):
    __slots__ = ("compare",)
    factory = "openhands_stuck"
    reason = "anchor.openhands"
    pre_events = (TurnStarting,)
    post_events = (ToolCall, ToolResult, TurnEnded)

    def __init__(self, compare: str) -> None:
        self.compare = compare
        super().__init__(
            f"compare={compare!r}",
            scope="run",
            warn_at=None,
            on_limit="abort",
            shadow=False,
            name="openhands_stuck",
        )

    def new_state(self) -> _OpenHandsState:
        return _OpenHandsState()

    def pre(self, event: Any, slot: Slot | None, ctx: Context) -> str | None:
        assert slot is not None
        state: _OpenHandsState = slot.state
        return state.stuck

    def post(self, event: Any, slot: Slot | None, ctx: Context) -> str | None:
        assert slot is not None
        state: _OpenHandsState = slot.state
        if isinstance(event, ToolCall):
            state.pending[event.call_id] = _raw_action(event)
            state.called = True
            return None
        if isinstance(event, ToolResult):
            action = state.pending.pop(event.call_id, f"{event.name}\x00?")
            content = event.content
            observation: Any = (
                (action, event.exit_code)
                if self.compare == "exit_code"
                else (content, event.exit_code)
            )
            failed = error_class(content, is_error=event.is_error, exit_code=event.exit_code)
            state.steps.append((action, observation, failed is not None))
            state.messages.clear()
            state.stuck = self._check(state)
            return None
        if isinstance(event, TurnEnded):
            called, state.called = state.called, False
            if not called and event.text is not None:
                state.messages.append(event.text)
                last = state.messages[-3:]
                if len(last) == 3 and last[0] == last[1] == last[2]:
                    state.stuck = "the same message 3 times with no observation"
        return None

    @staticmethod
    def _check(state: _OpenHandsState) -> str | None:
        steps = list(state.steps)
        if len(steps) >= 4:
            last = steps[-4:]
            if all(step[0] == last[0][0] and step[1] == last[0][1] for step in last):
                return "4 identical action-observation pairs"
        if len(steps) >= 3:
            last = steps[-3:]
            if all(step[0] == last[0][0] and step[2] for step in last):
                return "3 identical actions with errors"
        if len(steps) == 6:
            a, b = steps[-6], steps[-5]
            if all(
                steps[i][0] == (a if i % 2 == 0 else b)[0]
                and steps[i][1] == (a if i % 2 == 0 else b)[1]
                for i in range(6)
            ):
                return "an A-B pattern over 6 steps"
        return None


class _GeminiState:
    __slots__ = ("count", "last")

    def __init__(self) -> None:
        self.last: str | None = None
        self.count = 0


class _Gemini(_Anchor):
    __slots__ = ("threshold",)
    factory = "gemini_tool_loop"
    reason = "anchor.gemini"
    pre_events = (ToolCall,)

    def __init__(self, threshold: int) -> None:
        self.threshold = threshold
        super().__init__(
            f"{threshold!r}",
            scope="run",
            warn_at=None,
            on_limit="abort",
            shadow=False,
            name="gemini_tool_loop",
        )

    def new_state(self) -> _GeminiState:
        return _GeminiState()

    def pre(self, event: Any, slot: Slot | None, ctx: Context) -> str | None:
        assert slot is not None
        state: _GeminiState = slot.state
        key = _raw_action(event)
        state.count = state.count + 1 if key == state.last else 1
        state.last = key
        if state.count >= self.threshold:
            return f"the same tool call {state.count} times in a row"
        return None


def openhands_stuck(compare: str = "content") -> Limit:
    """OpenHands' StuckDetector; ``compare="exit_code"`` compares outputs as its code does."""
    if compare not in ("content", "exit_code"):
        raise ValueError("compare must be 'content' or 'exit_code'")
    return _OpenHands(compare)


def gemini_tool_loop(threshold: int = 5) -> Limit:
    """Gemini CLI's tool-call loop check: the same name and arguments ``threshold`` times."""
    return _Gemini(threshold)
