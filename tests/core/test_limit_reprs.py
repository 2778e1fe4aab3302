"""Every limit's ``repr`` is Python that builds it again, and combinations take limits only."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import haltwise
from haltwise import (
    UNLIMITED,
    ConfigurationError,
    Governor,
    Limit,
    RunStarted,
    Stop,
    TurnStarting,
    all_of,
    any_of,
    cycles,
    max_cost,
    max_model_calls,
    max_tokens,
    max_tool_calls,
    max_turns,
    no_effect,
    oscillation,
    paging,
    policies,
    recurring_errors,
    repeats,
    stuck,
    timeout,
)
from haltwise.engine.limits import Unlimited
from haltwise.engine.policies import Policy
from haltwise.testing import FakeClock

#: What ``from haltwise import *`` gives: the names a repr may use.
NAMES = {name: getattr(haltwise, name) for name in haltwise.__all__}


def rebuilt(limit: Limit) -> Limit:
    built: Limit = eval(repr(limit), dict(NAMES))
    return built


def assert_round_trips(limit: Limit) -> None:
    again = rebuilt(limit)
    assert again == limit
    assert repr(again) == repr(limit)
    # Not only the text: each part holds the same values.
    pairs = list(zip(again.leaves(), limit.leaves(), strict=True))
    for new, old in pairs:
        assert type(new) is type(old)
        assert (new.cap(), new.policy, new.scope, new.warn_at, new.shadow) == (
            old.cap(),
            old.policy,
            old.scope,
            old.warn_at,
            old.shadow,
        )


# --------------------------------------------------------------------------------------------
# The cases that were wrong


@pytest.mark.parametrize(
    ("limit", "written"),
    [
        (timeout(hours=1, minutes=30), "timeout(hours=1, minutes=30)"),
        (timeout(minutes=30, hours=1), "timeout(hours=1, minutes=30)"),
        (timeout(90, minutes=1), "timeout(minutes=1, seconds=90)"),
        (timeout(seconds=5), "timeout(5)"),
        (max_tokens(input=5, output=6), "max_tokens(input=5, output=6)"),
        (max_tokens(output=6, input=5), "max_tokens(input=5, output=6)"),
        (
            max_tokens(7, input=5, output=6, scope="session"),
            "max_tokens(total=7, input=5, output=6, scope='session')",
        ),
        (max_tokens(output=6), "max_tokens(output=6)"),
        (
            max_tokens(input=5, output=6) | max_turns(3),
            "max_tokens(input=5, output=6) | max_turns(3)",
        ),
        (
            max_tokens(input=5, output=6) & max_turns(3),
            "max_tokens(input=5, output=6) & max_turns(3)",
        ),
        (all_of(), "all_of()"),
        (any_of(), "any_of()"),
        (
            all_of(max_turns(1), max_turns(2), on_limit="ask"),
            "all_of(max_turns(1), max_turns(2), on_limit='ask')",
        ),
        (all_of(max_turns(1), on_limit="ask"), "all_of(max_turns(1), on_limit='ask')"),
        (
            all_of(all_of(max_turns(1), max_turns(2), on_limit="ask"), max_turns(3)),
            "all_of(max_turns(1), max_turns(2), on_limit='ask') & max_turns(3)",
        ),
        (
            max_turns(3, on_limit=policies.ask(timeout=30)),
            "max_turns(3, on_limit=policies.ask(timeout=30))",
        ),
        (max_turns(3, on_limit=policies.abort()), "max_turns(3)"),
        (stuck() & max_turns(3), "stuck() & max_turns(3)"),
        ((stuck() | max_cost(1)) & max_turns(3), "(stuck() | max_cost('1')) & max_turns(3)"),
    ],
    ids=repr,
)
def test_a_repr_reads_as_written_and_builds_the_limit_again(limit: Limit, written: str) -> None:
    assert repr(limit) == written
    assert_round_trips(limit)


def test_the_policy_of_all_of_is_kept_and_tells_groups_apart() -> None:
    asking = all_of(max_turns(1), max_turns(2), on_limit="ask")
    assert asking.policy == policies.ask()
    assert asking != all_of(max_turns(1), max_turns(2))
    # A single limit under all_of keeps the policy it was given.
    assert all_of(max_turns(1), on_limit="ask").policy == policies.ask()
    assert all_of(max_turns(1)) == max_turns(1)


def test_a_call_that_made_several_limits_shows_as_their_parts_once_some_are_gone() -> None:
    tokens = max_tokens(input=5, output=6)
    output_only = any_of(*(leaf for leaf in tokens.leaves() if leaf.unit == "output tokens"))
    assert repr(output_only) == "max_tokens(output=6)"
    governor = Governor(max_tokens(input=5, output=6) | max_turns(3))
    governor.set_limit(max_tokens(input=9))
    assert repr(governor.limits) == "max_tokens(input=9) | max_tokens(output=6) | max_turns(3)"
    assert_round_trips(governor.limits)


def test_a_call_that_made_several_limits_equals_the_or_of_them() -> None:
    assert max_tokens(input=5, output=6) == max_tokens(input=5) | max_tokens(output=6)
    assert hash(max_tokens(input=5, output=6)) == hash(max_tokens(input=5) | max_tokens(output=6))


# --------------------------------------------------------------------------------------------
# The property, over every factory and both combinators

counts: st.SearchStrategy[int | Unlimited | str] = st.integers(
    min_value=0, max_value=10**9
) | st.sampled_from([UNLIMITED, "unlimited"])
chosen_policies: st.SearchStrategy[str | Policy] = st.sampled_from(
    ["abort", "ask", "synthesize", "best_effort", "block", "Best-Effort"]
) | st.builds(
    policies.ask,
    timeout=st.floats(min_value=0.001, max_value=86_400) | st.integers(1, 86_400),
)
options: st.SearchStrategy[dict[str, Any]] = st.fixed_dictionaries(
    {},
    optional={
        "scope": st.sampled_from(["run", "session"]),
        "warn_at": st.floats(min_value=0.01, max_value=0.99),
        "on_limit": chosen_policies,
        "shadow": st.booleans(),
    },
)
shared = st.fixed_dictionaries(
    {"key": st.sampled_from(["team-a", 'o\'brien "quoted"'])},
    optional={"per": st.sampled_from(["hour", "day", "week", "month"])},
)


@st.composite
def budget_options(draw: st.DrawFn) -> dict[str, Any]:
    """Options for a limit that can share its budget (``key=``), never in shadow mode then."""
    chosen = draw(options)
    if not chosen.get("shadow") and draw(st.booleans()):
        chosen |= draw(shared)
    return chosen


@st.composite
def token_limits(draw: st.DrawFn) -> Limit:
    kinds = draw(st.sets(st.sampled_from(["total", "input", "output"]), min_size=1))
    given: dict[str, Any] = {kind: draw(counts) for kind in kinds}
    return max_tokens(**given, **draw(budget_options()))


@st.composite
def time_limits(draw: st.DrawFn) -> Limit:
    units = draw(st.sets(st.sampled_from(["hours", "minutes", "seconds"]), min_size=1))
    amounts = st.integers(1, 1000) | st.floats(min_value=0.001, max_value=1000)
    given: dict[str, Any] = {unit: draw(amounts) for unit in units}
    return timeout(**given, **draw(options))


amounts = (
    st.decimals(min_value=0, max_value=10**6, places=4)
    | st.integers(0, 10**6)
    | st.floats(min_value=0, max_value=10**6)
    | st.sampled_from(["1.50", "0.01", "2"])
)
detectors = (
    st.builds(repeats, st.integers(2, 9))
    | st.builds(cycles, st.integers(2, 9))
    | st.builds(paging, st.integers(2, 30))
    | st.builds(no_effect, st.integers(1, 9))
    | st.builds(oscillation, st.integers(1, 9))
    | st.builds(recurring_errors, st.integers(2, 9))
    | st.builds(stuck, repeat=st.integers(2, 9) | st.none(), scope=st.sampled_from(["run"]))
)


@st.composite
def leaves(draw: st.DrawFn) -> Limit:
    kind = draw(st.sampled_from(["turns", "model", "tool", "tokens", "cost", "time", "stuck"]))
    if kind == "turns":
        return max_turns(draw(counts), **draw(budget_options()))
    if kind == "model":
        return max_model_calls(draw(counts), **draw(budget_options()))
    if kind == "tool":
        tool = draw(st.none() | st.sampled_from(["search", "edit"]))
        return max_tool_calls(draw(counts), tool=tool, **draw(budget_options()))
    if kind == "tokens":
        return draw(token_limits())
    if kind == "cost":
        amount: str | Decimal | int | float = draw(amounts)
        return max_cost(amount, **draw(budget_options()))
    if kind == "time":
        return draw(time_limits())
    limit: Limit = draw(detectors)
    return limit


limits = st.recursive(
    leaves(),
    lambda parts: (
        st.tuples(parts, parts).map(lambda pair: pair[0] | pair[1])
        | st.tuples(parts, parts).map(lambda pair: pair[0] & pair[1])
        | st.lists(parts, max_size=3).map(lambda some: any_of(*some))
        | st.builds(
            lambda some, policy: all_of(*some, on_limit=policy),
            st.lists(parts, max_size=3),
            chosen_policies,
        )
    ),
    max_leaves=6,
)


@given(limits)
def test_every_repr_builds_an_equal_limit(limit: Limit) -> None:
    assert_round_trips(limit)


# --------------------------------------------------------------------------------------------
# Combining with what is not a limit


@pytest.mark.parametrize(
    ("combine", "written"),
    [
        (lambda: max_turns(2) & None, "max_turns(2) & None"),  # type: ignore[operator]
        (lambda: max_turns(2) | None, "max_turns(2) | None"),  # type: ignore[operator]
        (lambda: None & max_turns(2), "None & max_turns(2)"),  # type: ignore[operator]
        (lambda: None | max_turns(2), "None | max_turns(2)"),  # type: ignore[operator]
        (lambda: max_turns(2) | 5, "max_turns(2) | 5"),  # type: ignore[operator]
        (lambda: "2.00" & max_cost(1), "'2.00' & max_cost('1')"),  # type: ignore[operator]
        (lambda: any_of(max_turns(2), None), "any_of(max_turns(2), None)"),  # type: ignore[arg-type]
        (lambda: all_of(None, max_turns(2)), "all_of(None, max_turns(2))"),  # type: ignore[arg-type]
    ],
    ids=lambda value: value if isinstance(value, str) else "",
)
def test_combining_with_what_is_not_a_limit_is_refused(combine: Any, written: str) -> None:
    with pytest.raises(ConfigurationError) as refused:
        combine()
    message = str(refused.value)
    assert message.startswith(f"{written}: ")
    assert "is not a limit" in message
    assert "leave it out" in message


def test_a_callable_still_combines_on_either_side() -> None:
    def two_turns(usage: haltwise.Usage) -> bool:
        return usage.turns >= 2

    for limit in (max_turns(5) | two_turns, two_turns | max_turns(5)):
        governor = Governor(limit, clock=FakeClock())
        governor.handle(RunStarted())
        decisions = [governor.handle(TurnStarting()) for _ in range(3)]
        assert isinstance(decisions[2], Stop)
