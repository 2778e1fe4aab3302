"""The governor checks every event where it comes in (``events.check``): a field of the wrong
kind gets one ``InvalidValueError`` naming the event, the field and what it should hold, from
``Governor.handle`` itself, and nothing is counted from the event (the checkpoint is unchanged).
A checkpoint is checked whole before it is restored. Both builds run these tests
(``scripts/test.sh``).
"""

from __future__ import annotations

import math
import re
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from haltwise import (
    Answer,
    Ask,
    Choice,
    ConfigurationError,
    Continue,
    Decision,
    Governor,
    Injected,
    InvalidValueError,
    ModelRequest,
    ModelResponse,
    Progress,
    RunEnded,
    RunStarted,
    ToolCall,
    ToolResult,
    TurnEnded,
    TurnStarting,
    UnpricedModelError,
    max_cost,
    max_tokens,
    max_tool_calls,
    max_turns,
    stuck,
    timeout,
)
from haltwise.engine.events import MAX_CALL_DOLLARS, MAX_COUNT, check
from haltwise.engine.pricing import UNITS_PER_USD, dollars, units
from haltwise.engine.state import COST_ROOM, MAX_COST, MAX_TALLY, TALLY_ROOM
from haltwise.pricing import Prices
from haltwise.testing import FakeClock

LIMITS = (
    max_turns(20)
    | max_tool_calls(50)
    | max_tokens(1_000_000)
    | max_cost("50.00")
    | timeout(minutes=30)
    | stuck()
)


def governed() -> Governor:
    """A governor in the middle of a turn, with one request in flight."""
    governor = Governor(LIMITS, clock=FakeClock())
    for event in (
        RunStarted("fix the bug"),
        TurnStarting(),
        ModelRequest("gpt-4o", max_tokens=500, input_tokens=1_000),
    ):
        governor.handle(event)
    return governor


@pytest.mark.parametrize(
    ("event", "message"),
    [
        (
            ModelResponse("gpt-4o", input_tokens="5"),  # type: ignore[arg-type]
            "ModelResponse.input_tokens='5' is not valid: expected a count, an int from 0 to 2^53",
        ),
        (ModelResponse("gpt-4o", output_tokens=-3), "ModelResponse.output_tokens=-3"),
        (ModelResponse("gpt-4o", output_tokens=2.5), "ModelResponse.output_tokens=2.5"),  # type: ignore[arg-type]
        (ModelResponse("gpt-4o", input_tokens=True), "(not a bool)"),
        (ModelResponse("gpt-4o", output_tokens=2**53), "output_tokens=9007199254740992 is not"),
        (
            ModelResponse("gpt-4o", input_tokens=10, cache_read_tokens=8, cache_write_tokens=4),
            "cache_write_tokens=4 is not valid: expected at most input_tokens less "
            "cache_read_tokens",
        ),
        (
            ModelResponse("gpt-4o", cost=0.5),  # type: ignore[arg-type]
            "ModelResponse.cost=0.5 is not valid: expected None or a Decimal of dollars from 0",
        ),
        (
            ModelResponse("gpt-4o", cost=Decimal("1E+17") + Decimal("0.01")),
            "ModelResponse.cost=Decimal('100000000000000000.01') is not valid",
        ),
        (ModelResponse("gpt-4o", cost=Decimal("-0.01")), "ModelResponse.cost=Decimal('-0.01')"),
        (ModelResponse("gpt-4o", cost=Decimal("Infinity")), "ModelResponse.cost=Decimal('I"),
        (ModelResponse(None), "ModelResponse.model=None is not valid: expected a str"),  # type: ignore[arg-type]
        (ModelResponse("gpt-4o", text=b"hi"), "ModelResponse.text=b'hi'"),  # type: ignore[arg-type]
        (ModelResponse("gpt-4o", answered=None), "ModelResponse.answered=None"),  # type: ignore[arg-type]
        (ModelRequest("gpt-4o", max_tokens="100"), "ModelRequest.max_tokens='100'"),  # type: ignore[arg-type]
        (ModelRequest("gpt-4o", input_tokens=-1), "ModelRequest.input_tokens=-1"),
        (ModelRequest("gpt-4o", request_id=7), "ModelRequest.request_id=7"),  # type: ignore[arg-type]
        (ToolCall(None), "ToolCall.name=None is not valid: expected a str"),  # type: ignore[arg-type]
        (ToolCall("search", 5), "ToolCall.arguments=5 is not valid: expected a mapping"),  # type: ignore[arg-type]
        (ToolCall("search", call_id=None), "ToolCall.call_id=None"),  # type: ignore[arg-type]
        (ToolResult("search", None), "ToolResult.content=None is not valid: expected a str"),  # type: ignore[arg-type]
        (ToolResult("search", {"hits": 3}), "ToolResult.content={'hits': 3}"),  # type: ignore[arg-type]
        (ToolResult("search", "", exit_code="1"), "ToolResult.exit_code='1'"),  # type: ignore[arg-type]
        (ToolResult("search", "", is_error=1), "ToolResult.is_error=1"),  # type: ignore[arg-type]
        (TurnEnded(5), "TurnEnded.text=5"),  # type: ignore[arg-type]
        (Injected(None), "Injected.text=None"),  # type: ignore[arg-type]
        (Progress("tests", "3"), "Progress.value='3' is not valid: expected None or a finite"),  # type: ignore[arg-type]
        (Progress("tests", math.nan), "Progress.value=nan"),
        (ModelResponse("m", input_tokens=3, cache_read_tokens=5), "cache_read_tokens=5 is not"),
        (RunEnded(output=3), "RunEnded.output=3"),  # type: ignore[arg-type]
        ("hello", "Governor.handle(event)='hello' is not valid: expected one of the events"),
    ],
)
def test_a_bad_field_is_named_and_nothing_is_counted(event: Any, message: str) -> None:
    governor = governed()
    before = governor.checkpoint()
    with pytest.raises(InvalidValueError) as raised:
        governor.handle(event)
    assert message in str(raised.value)
    assert governor.checkpoint() == before
    # The run goes on, and its request is answered and counted as usual.
    assert governor.handle(ModelResponse("gpt-4o", input_tokens=1_000, output_tokens=20))
    usage = governor.usage
    assert (usage.model_calls, usage.input_tokens, usage.output_tokens) == (1, 1_000, 20)


def test_a_bad_run_start_leaves_the_run_as_it_was() -> None:
    governor = governed()
    before = governor.checkpoint()
    with pytest.raises(InvalidValueError, match=r"RunStarted\.run_id=5 "):
        governor.handle(RunStarted("again", run_id=5))  # type: ignore[arg-type]
    assert governor.checkpoint() == before


def test_good_events_of_every_kind_pass() -> None:
    class Name(str):
        pass

    for event in (
        RunStarted(),
        RunStarted("prompt", run_id="r1"),
        TurnStarting(),
        ModelRequest(),
        ModelRequest("gpt-4o", max_tokens=0, input_tokens=MAX_COUNT, adjustable=False),
        ModelResponse(),
        ModelResponse("m", 10, 5, 4, 6, Decimal("0.01"), "text", 2, "r", answered=False),
        ModelResponse("m", cost=Decimal("-0")),
        ToolCall(Name("search"), {"q": 1}),
        ToolCall("search", '{"q": 1}', "c1"),
        ToolResult("search", "out", "c1", is_error=True, exit_code=-9),
        TurnEnded(),
        TurnEnded("done"),
        Injected("more"),
        Progress("tests", 3),
        Progress("tests", 2.5, "note"),
        Progress("tests", 10**400),
        Progress(),
        RunEnded(),
        RunEnded("answer"),
    ):
        check(event)


class _Count(int):
    """A subclass of int: a count all the same, though not one the plain tests take."""


# Counts at each edge of MAX_COUNT, of the C integers and of their signs.
_EDGES: list[object] = [
    0,
    1,
    MAX_COUNT - 1,
    MAX_COUNT,
    MAX_COUNT + 1,
    2**62,
    2**63 - 1,
    2**63,
    2**64 + 3,
    2**200,
    -1,
    -(2**63),
    -(2**63) - 1,
    -(2**64),
    True,
    False,
    _Count(5),
]


def _a_count(value: object) -> bool:
    return isinstance(value, int) and type(value) is not bool and 0 <= value <= MAX_COUNT


@pytest.mark.parametrize("value", _EDGES, ids=repr)
@pytest.mark.parametrize(
    "field",
    ["input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "tool_calls"],
)
def test_a_response_count_at_each_edge_passes_only_when_it_is_one(
    field: str, value: object
) -> None:
    # A prompt of MAX_COUNT tokens, any of them cached: a cache count is refused only when it
    # is no count.
    fields: dict[str, object] = {"input_tokens": MAX_COUNT, field: value}
    event = ModelResponse("gpt-4o", **fields)  # type: ignore[arg-type]
    if _a_count(value):
        check(event)
    else:
        with pytest.raises(InvalidValueError, match=f"ModelResponse.{field}="):
            check(event)


@pytest.mark.parametrize("value", [*_EDGES, None], ids=repr)
@pytest.mark.parametrize("field", ["max_tokens", "input_tokens"])
def test_a_request_count_at_each_edge_passes_only_when_it_is_one(field: str, value: object) -> None:
    event = ModelRequest("gpt-4o", **{field: value})  # type: ignore[arg-type]
    if value is None or _a_count(value):
        check(event)
    else:
        with pytest.raises(InvalidValueError, match=f"ModelRequest.{field}="):
            check(event)


def test_cached_tokens_past_the_prompt_are_refused_at_each_edge() -> None:
    for prompt, read, written in [
        (MAX_COUNT, MAX_COUNT, 1),
        (MAX_COUNT, 1, MAX_COUNT),
        (10, 6, 5),
        (0, 1, 0),
        (MAX_COUNT - 1, MAX_COUNT, 0),
    ]:
        event = ModelResponse("m", prompt, 0, read, written)
        with pytest.raises(InvalidValueError, match="cache_"):
            check(event)
    check(ModelResponse("m", MAX_COUNT, 0, MAX_COUNT - 1, 1))
    check(ModelResponse("m", 10, 0, 5, 5))


# Values of every kind a driver might put in any field by mistake, and good ones.
_ANY = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.decimals(allow_nan=True, allow_infinity=True),
    st.text(max_size=30),
    st.binary(max_size=10),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=3),
)
_SMALL = st.integers(min_value=0, max_value=5_000)
_EVENTS = st.one_of(
    st.builds(
        ModelRequest,
        model=st.one_of(st.just("gpt-4o"), _ANY),
        max_tokens=st.one_of(st.none(), _SMALL, _ANY),
        input_tokens=st.one_of(st.none(), _SMALL, _ANY),
        request_id=st.one_of(st.just(""), _ANY),
    ),
    st.builds(
        ModelResponse,
        model=st.one_of(st.just("gpt-4o"), st.just("no-such-model"), _ANY),
        input_tokens=st.one_of(_SMALL, _ANY),
        output_tokens=st.one_of(_SMALL, _ANY),
        cache_read_tokens=st.one_of(st.just(0), _SMALL, _ANY),
        cost=st.one_of(st.none(), st.decimals(min_value=0, max_value=1, places=6), _ANY),
        text=st.one_of(st.none(), _ANY),
        answered=st.one_of(st.just(True), _ANY),
    ),
    st.builds(
        ToolCall,
        name=st.one_of(st.sampled_from(["search", "edit"]), _ANY),
        arguments=st.one_of(st.just('{"q": 1}'), _ANY),
    ),
    st.builds(
        ToolResult,
        name=st.one_of(st.sampled_from(["search", "edit"]), _ANY),
        content=st.one_of(st.text(max_size=200), _ANY),
        exit_code=st.one_of(st.none(), st.integers(-300, 300), _ANY),
    ),
    st.builds(TurnEnded, text=_ANY),
    st.builds(Progress, metric=st.one_of(st.just("tests"), _ANY), value=_ANY),
    st.just(TurnStarting()),
    _ANY,
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_EVENTS, min_size=1, max_size=12))
def test_any_field_of_any_kind_is_decided_or_refused_by_name(events: list[Any]) -> None:
    """Hostile fields never raise from inside the governor, and a refused event counts
    nothing."""
    governor = governed()
    for event in events:
        before = governor.checkpoint()
        refused: InvalidValueError | None = None
        try:
            decision = governor.handle(event)
        except InvalidValueError as error:
            refused = error
        except UnpricedModelError:
            assert event.model != "gpt-4o"  # counted; then the cost limit says it has no price
            continue
        if refused is None:
            assert isinstance(decision, Decision)
        else:
            assert refused.source.split(".")[0] in (type(event).__name__, "Governor")
            assert governor.checkpoint() == before


def test_a_long_value_is_cut_in_the_message() -> None:
    with pytest.raises(InvalidValueError) as raised:
        check(ToolResult("read", b"x" * 1_000_000))  # type: ignore[arg-type]
    message = str(raised.value)
    assert message.startswith("ToolResult.content=b'xxx")
    assert re.search(r"x\.\.\.x+' \(1,000,003 characters\) is not valid: expected a str", message)
    assert len(message) < 300
    assert raised.value.value == b"x" * 1_000_000  # the value itself is kept whole


@pytest.mark.parametrize("limits", [max_tokens(MAX_TALLY), max_turns(5)])
def test_totals_stop_taking_counts_short_of_a_c_integer(limits: Any) -> None:
    """The compiled build keeps the totals in C long longs; both builds refuse, by name and
    counting nothing, a response that could take a total past them. Only counts no provider
    reports get there: here, a checkpoint's."""
    governor = Governor(limits, clock=FakeClock())
    governor.handle(RunStarted("task"))
    data = governor.checkpoint()
    for scope in ("run", "session"):
        data[scope]["input_tokens"] = TALLY_ROOM
    governor.restore(data)
    assert isinstance(governor.handle(ModelResponse("m", input_tokens=MAX_COUNT)), Continue)
    assert governor.usage.input_tokens == TALLY_ROOM + MAX_COUNT <= MAX_TALLY
    before = governor.checkpoint()
    with pytest.raises(InvalidValueError, match=r"the token totals=\(.* so that any response"):
        governor.handle(ModelResponse("m", input_tokens=1))
    assert governor.checkpoint() == before
    data[scope]["input_tokens"] = TALLY_ROOM + 1
    with pytest.raises(ConfigurationError, match="not a haltwise checkpoint"):
        governor.restore(data)


def test_requests_left_in_flight_are_not_counted_past_the_room_of_the_totals() -> None:
    """A new run counts the requests the last one left in flight at what they reserved. With a
    total past TALLY_ROOM, it refuses to, by name and counting nothing; the compiled build's
    totals would pass a C long long's range from there (they did, raising OverflowError, until
    the settling looked first)."""
    governor = Governor(max_turns(10), clock=FakeClock())
    governor.handle(RunStarted("task"))
    data = governor.checkpoint()
    data["session"]["input_tokens"] = TALLY_ROOM - MAX_COUNT
    governor.restore(data)
    assert isinstance(governor.handle(ModelResponse("m", input_tokens=MAX_COUNT)), Continue)
    assert governor.session_usage.input_tokens == TALLY_ROOM
    held = [ModelRequest("m", max_tokens=1, input_tokens=MAX_COUNT) for _ in range(255)]
    for request in held:
        assert isinstance(governor.handle(request), Continue)
    # At TALLY_ROOM, the totals have room for every request in flight.
    assert isinstance(governor.handle(RunStarted("again")), Continue)
    assert governor.session_usage.input_tokens == TALLY_ROOM + 255 * MAX_COUNT <= MAX_TALLY
    for request in held:
        assert isinstance(governor.handle(request), Continue)
    before = governor.checkpoint()
    with pytest.raises(InvalidValueError, match=r"the token totals=\("):
        governor.handle(RunStarted("again"))
    assert governor.checkpoint() == before


@pytest.mark.parametrize("limits", [max_cost("1e18"), max_turns(5)])
def test_dollar_totals_stop_taking_costs_short_of_a_c_integer(limits: Any) -> None:
    """The compiled build keeps the dollars in C integers of 128 bits; both builds refuse, by
    name and counting nothing, a response that could take a total past them. Only prices no
    provider charges get there: here, a checkpoint's."""
    governor = Governor(limits, clock=FakeClock())
    governor.handle(RunStarted("task"))
    data = governor.checkpoint()
    room = COST_ROOM // UNITS_PER_USD  # in whole dollars, as a checkpoint writes them exactly
    for scope in ("run", "session"):
        data[scope]["cost"] = str(room)
    governor.restore(data)
    decision = governor.handle(ModelResponse("m", cost=Decimal(MAX_CALL_DOLLARS)))
    assert isinstance(decision, Continue) or limits.reason == "cost_limit"
    assert governor.usage.cost == room + MAX_CALL_DOLLARS
    assert COST_ROOM < (room + MAX_CALL_DOLLARS) * UNITS_PER_USD <= MAX_COST
    before = governor.checkpoint()
    with pytest.raises(InvalidValueError, match=r"the dollar total=.* so that any call can be"):
        governor.handle(ModelResponse("m", cost=Decimal("0.01")))
    assert governor.checkpoint() == before
    data["run"]["cost"] = str(room + 1)
    with pytest.raises(ConfigurationError, match="not a haltwise checkpoint"):
        governor.restore(data)


@pytest.mark.parametrize(
    "amount", [1, 10**18 - 1, 123456789012345678901234567890123, COST_ROOM, MAX_COST]
)
def test_dollars_and_units_convert_exactly_however_large_the_total(amount: int) -> None:
    """A checkpoint writes a total in dollars and reads it back in units: exactly, past the 28
    digits of decimal's default context (a total past $10^10, to the 10^-18, was rounded)."""
    assert units(dollars(amount)) == amount
    assert units(dollars(-amount)) == -amount
    governor = Governor(max_turns(5), clock=FakeClock())
    governor.handle(RunStarted("task"))
    data = governor.checkpoint()
    data["session"]["cost"] = str(dollars(min(amount, COST_ROOM)))
    governor.restore(data)
    assert governor.checkpoint()["session"]["cost"] == str(dollars(min(amount, COST_ROOM)))
    assert governor._session.cost == min(amount, COST_ROOM)


_DEAR = Prices({"dear": {"input": "1e15", "output": "1e15"}})  # $10^9 a token


@pytest.mark.parametrize("limits", [max_cost("1e18"), max_turns(5)])
def test_a_call_priced_past_the_most_one_may_cost_is_refused_by_name(limits: Any) -> None:
    """A pricer's cost of more than MAX_CALL_DOLLARS for one call is refused where the call is
    counted, with nothing counted from it: the totals have room for calls of at most that."""
    governor = Governor(limits, clock=FakeClock(), pricer=_DEAR)
    governor.handle(RunStarted("task"))
    message = r"the price of a call to 'dear'=.* expected a cost from \$0 to \$100,000,000,000"
    # Unanswered, a response counts its request at what it reserved, priced now when no cost
    # limit priced it before it was sent.
    for answered in (True, False) if limits.reason != "cost_limit" else (True,):
        governor.handle(ModelRequest("dear", max_tokens=10, input_tokens=10))
        assert isinstance(governor.handle(ModelResponse("dear", 10, 10)), Continue)
        if limits.reason == "cost_limit":
            # Its worst case is priced before it is sent.
            with pytest.raises(InvalidValueError, match=message):
                governor.handle(ModelRequest("dear", max_tokens=2 * 10**8))
        else:
            governor.handle(ModelRequest("dear", max_tokens=2 * 10**8, input_tokens=10))
        before = governor.checkpoint()
        with pytest.raises(InvalidValueError, match=message):
            governor.handle(ModelResponse("dear", 2 * 10**8, 10, answered=answered))
        assert governor.checkpoint() == before
        if limits.reason != "cost_limit":
            # Still in flight: a new run would count it at what it reserved, and cannot.
            with pytest.raises(InvalidValueError, match=message):
                governor.handle(RunStarted("again"))
            assert governor.checkpoint() == before
            assert isinstance(governor.handle(ModelResponse("dear", 10, 10)), Continue)
    assert governor.usage.model_calls == (1 if limits.reason == "cost_limit" else 4)


def _checkpoint_paths(data: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in a checkpoint's JSON that holds a value."""
    if isinstance(data, dict):
        return [p for key, value in data.items() for p in _checkpoint_paths(value, (*path, key))]
    if isinstance(data, list):
        return [p for i, value in enumerate(data) for p in _checkpoint_paths(value, (*path, i))]
    return [path]


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_a_checkpoint_with_any_value_anywhere_restores_whole_or_not_at_all(data: Any) -> None:
    """A value of any kind in any place of a checkpoint either restores or is refused as no
    checkpoint, and a refused one leaves the governor exactly as it was."""
    source = governed()
    source.handle(ModelResponse("gpt-4o", input_tokens=1_000, output_tokens=20))
    source.handle(ToolCall("search", {"q": 1}))
    source.handle(ModelRequest("gpt-4o", max_tokens=300))
    saved = source.checkpoint()
    path = data.draw(st.sampled_from(_checkpoint_paths(saved)))
    place = saved
    for key in path[:-1]:
        place = place[key]
    place[path[-1]] = data.draw(_ANY)
    governor = governed()
    governor.handle(ModelResponse("gpt-4o", input_tokens=7, output_tokens=3))
    before = governor.checkpoint()
    refused: ConfigurationError | None = None
    try:
        governor.restore(saved)
    except ConfigurationError as error:
        refused = error
    if refused is not None:
        assert "not a haltwise checkpoint" in str(refused)
        assert governor.checkpoint() == before


@pytest.mark.parametrize("answer", ["yes", 5, object()])
def test_a_bad_answer_leaves_the_question_open(answer: object) -> None:
    governor = Governor(max_cost("0.001", on_limit="ask"), clock=FakeClock())
    governor.handle(RunStarted("task"))
    governor.handle(ModelRequest("gpt-4o"))
    ask = governor.handle(ModelResponse("gpt-4o", input_tokens=100_000, output_tokens=10))
    assert isinstance(ask, Ask)
    with pytest.raises(InvalidValueError, match="answer="):
        governor.resolve(ask, answer)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="still unanswered"):
        governor.handle(TurnStarting())
    assert isinstance(governor.resolve(ask, Answer(Choice.EXTEND, amount=1)), Continue)


def test_an_answer_cannot_extend_a_limit_without_end() -> None:
    with pytest.raises(InvalidValueError, match="a positive finite number to extend by"):
        Answer(Choice.EXTEND, amount=math.inf)
