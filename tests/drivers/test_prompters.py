"""What a person types at a limit: never a crash, and an extension the limit can take.

The chat in a real terminal: ``tests/agent/test_chat_tmux.py``.
"""

from __future__ import annotations

import io
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from haltwise.drivers.prompters import console_prompter, extension, parse_answer
from haltwise.engine.decisions import Answer, Ask, Choice

REASONS = ("turn_limit", "tool_call_limit", "model_call_limit", "token_limit")
ALL_REASONS = (*REASONS, "cost_limit", "time_limit", "custom", None)


def _ask(reason: str) -> Ask:
    return Ask(question="Continue?", reason=reason, limit="a limit")


@pytest.mark.parametrize("reason", ALL_REASONS)
@pytest.mark.parametrize(
    "typed", ["1.0e400", "1.0e999", "inf", "-inf", "nan", "0", "0.0", "-3", "1e13", "abc", ""]
)
def test_no_limit_takes_an_infinite_zero_negative_or_huge_extension(
    reason: str | None, typed: str
) -> None:
    assert extension(typed, reason) is None


@pytest.mark.parametrize("reason", REASONS)
@pytest.mark.parametrize("typed", ["0.5", "1.5", "2.0", "1e3"])
def test_a_limit_that_counts_takes_only_a_whole_number(reason: str, typed: str) -> None:
    assert extension(typed, reason) is None
    assert parse_answer(f"e {typed}", _ask(reason)) is None
    assert parse_answer("e 10", _ask(reason)) == Answer(Choice.EXTEND, 10)
    assert parse_answer("+1_000", _ask(reason)) == Answer(Choice.EXTEND, 1000)


@pytest.mark.parametrize(
    ("reason", "typed", "amount"),
    [
        ("cost_limit", "0.5", 0.5),
        ("cost_limit", "$2", 2.0),
        ("time_limit", "0.5", 0.5),
        ("time_limit", "5m", 300.0),
        ("custom", "2.5", 2.5),
        (None, "2.5", 2.5),
        (None, "10", 10),
    ],
)
def test_dollars_and_seconds_may_be_fractional(
    reason: str | None, typed: str, amount: float
) -> None:
    assert extension(typed, reason) == amount


@given(st.text(), st.sampled_from(ALL_REASONS))
def test_no_text_makes_parsing_raise(typed: str, reason: str | None) -> None:
    for text in (typed, f"e {typed}", f"+{typed}"):
        answer = parse_answer(text, None if reason is None else _ask(reason))
        if answer is not None and answer.choice is Choice.EXTEND:
            assert answer.amount is not None and 0 < answer.amount <= 10**12
            assert math.isfinite(answer.amount)
            if reason in REASONS:
                assert type(answer.amount) is int


def test_the_console_asks_again_until_the_amount_fits_the_limit() -> None:
    typed = io.StringIO("e 1.0e400\ne 0.5\ne 3\n")
    said = io.StringIO()
    answer = console_prompter(typed, said)(_ask("turn_limit"))
    assert answer == Answer(Choice.EXTEND, 3)
    assert said.getvalue().count("extend N (a whole number from 1)") == 2
