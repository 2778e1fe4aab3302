"""The fast path's handlers for a governor's limits (``engine/hotpath.py``; for an LLM call,
``engine/dispatch.py``'s in the compiled build, written ones in the pure build) decide as the
general ones do.

``test_the_written_handlers_decide_as_the_general_ones_do`` drives random limit sets and random
runs (requests with and without ``max_tokens``, paired or not, unanswered responses, costs
given, unpriced models, asks answered every way, soft thresholds, shadow limits, limits changed
mid-run, runs restored from checkpoints) through two governors, one of them never writing
handlers, and requires the same decisions, errors, usage, standings and checkpoints after every
step.

``test_the_compiled_build_decides_as_the_pure_one`` drives the same kind of random runs through
the compiled build (the Cython extensions of ``haltwise/_compiled.py``) and, in a subprocess,
the pure one (``HALTWISE_PURE=1``), and requires the same decisions, errors, counts and
outcomes after every step.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import subprocess
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from haltwise import (
    Answer,
    Ask,
    Choice,
    Decision,
    Event,
    Governor,
    HaltwiseError,
    Limit,
    ModelRequest,
    ModelResponse,
    Prices,
    RunEnded,
    RunStarted,
    Stop,
    ToolCall,
    ToolResult,
    TurnEnded,
    TurnStarting,
    _compiled,
    any_of,
    max_cost,
    max_model_calls,
    max_tokens,
    max_tool_calls,
    max_turns,
    timeout,
)
from haltwise.engine.dispatch import COMPILED
from haltwise.engine.hotpath import source
from haltwise.testing import FakeClock


class _General(Governor):
    """A governor that never writes handlers: every event goes through the general ones."""

    def _use(self, tables: Any) -> None:
        super()._use(tables)
        self._dispatch.use(self._handlers)


_PRICES = {
    "m": {"input": "1.25", "output": "10", "cache_read": "0.125", "cache_write": "2"},
    # Dearer per token than a C long long holds in engine units: the compiled handlers' C
    # arithmetic hands it to the pricer.
    "dear": {"input": "5000000", "output": "9000000"},
}

_LIMITS: list[Limit] = [
    max_turns(3),
    max_turns(2, on_limit="ask"),
    max_turns(4, scope="session"),
    max_model_calls(3),
    max_model_calls(5, on_limit="ask"),
    max_tool_calls(3),
    max_tool_calls(1, tool="a", on_limit="block"),
    max_tool_calls(2, tool="b", on_limit="synthesize"),
    max_tokens(400),
    max_tokens(output=60, on_limit="ask"),
    max_tokens(input=150),
    max_tokens(600, scope="session"),
    max_tokens(300, warn_at=0.5),
    max_cost("0.002"),
    max_cost("0.001", on_limit="ask"),
    max_cost("0.004", scope="session"),
    max_cost("0.0015", shadow=True),
    timeout(seconds=30),
    max_turns(2, warn_at=0.5),
    # Past what the compiled handlers' C integers hold: the general handlers decide.
    max_tokens(2**130),
    max_cost("1e30"),
]

_EVENTS: list[Event] = [
    TurnStarting(),
    ModelRequest("m", max_tokens=10),
    ModelRequest("m", max_tokens=80),
    ModelRequest("m", max_tokens=50, input_tokens=40, request_id="r1"),
    ModelRequest("m"),
    ModelRequest("m", max_tokens=70, adjustable=False),
    ModelRequest("unpriced", max_tokens=10),
    ModelResponse("m", 40, 12),
    ModelResponse("m", 90, 30, cache_read_tokens=64, cache_write_tokens=10),
    ModelResponse("m", 30, 8, request_id="r1", text="done"),
    ModelResponse("m", 20, 5, cost=Decimal("0.0003")),
    ModelResponse("m", answered=False),
    ModelResponse("unpriced", 10, 2),
    ModelRequest("dear", max_tokens=5),
    ModelResponse("dear", 3, 1),
    # Counts past a C long long, and a cost past 2^120 engine units.
    ModelRequest("m", max_tokens=2**63),
    ModelResponse("m", 2**64, 5),
    ModelResponse("m", 10, 2, cost=Decimal("1e30")),
    ToolCall("a"),
    ToolCall("b"),
    ToolCall("c"),
    ToolResult("a", "ok"),
    TurnEnded(),
    RunEnded(),
    RunStarted("again"),
]

_ANSWERS: list[Answer | Choice | None] = [
    Choice.CONTINUE,
    Choice.ABORT,
    Answer(Choice.EXTEND, 2),
    Choice.WRAP_UP,
    None,
]

#: A step: (event index, seconds that pass, answer index, index of a limit to set first or -1,
#: whether the governor is first restored from its own checkpoint).
_Step = tuple[int, float, int, int, bool]


def _summary(outcome: Decision | BaseException) -> tuple[Any, ...]:
    if isinstance(outcome, BaseException):
        return ("raised", type(outcome).__name__, str(outcome))
    if isinstance(outcome, Stop):
        result = outcome.outcome
        return ("stop", result.status, result.reason, result.message, result.usage)
    if isinstance(outcome, Ask):
        return ("ask", outcome.question, outcome.limit)
    return (repr(outcome),)


def _step(governor: Governor, clock: FakeClock, step: _Step) -> tuple[Any, ...]:
    index, seconds, answer, new_limit, restore = step
    clock.advance(seconds)
    if restore:
        governor.restore(governor.checkpoint())
    try:
        if new_limit >= 0:
            governor.set_limit(_LIMITS[new_limit])
        pending = governor.pending
        if pending is not None:
            decision = governor.resolve(pending, _ANSWERS[answer])
        else:
            decision = governor.handle(_EVENTS[index])
    except HaltwiseError as error:
        return _summary(error)
    return _summary(decision)


def _state(governor: Governor) -> tuple[Any, ...]:
    return (
        governor.usage,
        governor.session_usage,
        [repr(status) for status in governor.standing()],
        governor.checkpoint(),
        [repr(trip) for trip in governor.shadow_trips],
    )


@settings(max_examples=400, deadline=None)
@given(
    chosen=st.lists(st.sampled_from(range(len(_LIMITS))), min_size=1, max_size=5, unique=True),
    steps=st.lists(
        st.tuples(
            st.sampled_from(range(len(_EVENTS))),
            st.sampled_from([0.0, 1.0, 20.0]),
            st.sampled_from(range(len(_ANSWERS))),
            st.sampled_from([-1] * 12 + list(range(len(_LIMITS)))),
            st.sampled_from([False] * 9 + [True]),
        ),
        max_size=60,
    ),
)
def test_the_written_handlers_decide_as_the_general_ones_do(
    chosen: list[int], steps: list[_Step]
) -> None:
    limits = any_of(*(_LIMITS[index] for index in chosen))
    clocks = FakeClock(), FakeClock()
    ids = iter(range(10**6)), iter(range(10**6))
    governors = (
        Governor(limits, clock=clocks[0], pricer=Prices(_PRICES), new_id=lambda: str(next(ids[0]))),
        _General(limits, clock=clocks[1], pricer=Prices(_PRICES), new_id=lambda: str(next(ids[1]))),
    )
    for governor in governors:
        governor.handle(RunStarted("task"))
    for step in steps:
        fast, general = (
            _step(governor, clock, step) for governor, clock in zip(governors, clocks, strict=True)
        )
        assert fast == general, step
        assert _state(governors[0]) == _state(governors[1]), step


def test_handlers_are_written_for_the_common_limits_once_a_run_starts() -> None:
    governor = Governor(max_turns(25) | max_tool_calls(50) | max_tokens(200_000) | max_cost("5"))
    hot = governor._dispatch.hot
    assert hot is governor._handlers  # nothing written for a governor never run
    governor.handle(RunStarted("task"))
    written = source(governor)
    for name in ("on_turn_starting", "on_tool_call"):
        assert f"def {name}(event):" in written
    assert "if run.turns - slot0.baseline >= 25 + slot0.extra:" in written
    hot = governor._dispatch.hot
    assert hot[TurnStarting] is not governor._handlers[TurnStarting]
    if COMPILED:
        # An LLM call's two events are the dispatch's own handlers, given the limits' numbers.
        assert "def on_model_request" not in written
        assert hot[ModelRequest] == governor._dispatch.on_model_request
        assert hot[ModelResponse] == governor._dispatch.on_model_response
        before = governor._dispatch.before_checks
        assert before is not None
        assert [check.maximum for check in before] == [200_000, 5 * 10**18]
    else:
        # Interpreted, written ones are quicker: the limits' numbers are in their source.
        for name in ("on_model_request", "on_model_response"):
            assert f"def {name}(event):" in written
        assert "free = 200000 + slot1.extra - (" in written
        assert governor._dispatch.before_checks is None


def test_no_handler_is_written_where_a_check_cannot_be_inlined() -> None:
    governor = Governor(max_turns(2, warn_at=0.5) | max_tool_calls(5))
    governor.handle(RunStarted("task"))
    written = source(governor)
    assert "def on_turn_starting" not in written  # its note comes from the general path
    assert "def on_tool_call(event):" in written
    phased = Governor(max_turns(3))
    phased.handle(RunStarted("task"))
    phased.enter_phase("plan", max_tool_calls(1))
    assert source(phased) == ""
    assert phased._dispatch.hot is phased._handlers


#: Random runs compared between the builds, and steps in each.
_CASES = 150
_STEPS = 60


def _random_cases(seed: int) -> list[tuple[list[int], list[_Step]]]:
    chooser = random.Random(seed)
    cases = []
    for _ in range(_CASES):
        chosen = chooser.sample(range(len(_LIMITS)), chooser.randint(1, 5))
        steps: list[_Step] = [
            (
                chooser.randrange(len(_EVENTS)),
                chooser.choice([0.0, 1.0, 20.0]),
                chooser.randrange(len(_ANSWERS)),
                chooser.choice([-1] * 12 + list(range(len(_LIMITS)))),
                chooser.random() < 0.1,
            )
            for _ in range(chooser.randint(0, _STEPS))
        ]
        cases.append((chosen, steps))
    return cases


def traces(seed: int) -> list[list[str]]:
    """For each random case, the repr of every step's result and of the governor's state after
    it: what the two builds must agree on."""
    results = []
    for chosen, steps in _random_cases(seed):
        clock = FakeClock()
        governor = Governor(
            any_of(*(_LIMITS[index] for index in chosen)),
            clock=clock,
            pricer=Prices(_PRICES),
            new_id=map(str, itertools.count()).__next__,
        )
        governor.handle(RunStarted("task"))
        trace = []
        for step in steps:
            trace.append(repr(_step(governor, clock, step)))
            trace.append(repr(_state(governor)))
        results.append(trace)
    return results


@pytest.mark.skipif(_compiled.BUILD != "compiled", reason="the compiled build is not in force")
def test_the_compiled_build_decides_as_the_pure_one() -> None:
    seed = random.randrange(2**32)
    compiled = traces(seed)
    here = Path(__file__).resolve().parent
    script = (
        "import json, sys; sys.path.insert(0, sys.argv[1]); "
        "from haltwise import _compiled; assert _compiled.BUILD == 'pure', _compiled.REASON; "
        "import test_fast_path; print(json.dumps(test_fast_path.traces(int(sys.argv[2]))))"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(here), str(seed)],
        env={**os.environ, "HALTWISE_PURE": "1"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    pure = json.loads(done.stdout)
    for index, (mine, theirs) in enumerate(zip(compiled, pure, strict=True)):
        for step, (a, b) in enumerate(zip(mine, theirs, strict=True)):
            assert a == b, f"seed {seed}, case {index}, line {step}: {_random_cases(seed)[index]}"
