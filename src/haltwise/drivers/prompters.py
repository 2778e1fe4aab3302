"""Prompters: how a driver puts an ``Ask`` to a human.

A prompter is any callable ``prompter(ask) -> Answer | Choice | bool | None`` (or an async one).
``None`` means no answer; the run then stops, as it does when there is no prompter at all.

What a person types is read here, by ``parse_answer``, for every prompter that reads text (the
console's, ``haltwise chat``'s, LangGraph's resume value): one rule for how much ``extend N`` may
add (``extension``).
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from decimal import Decimal, InvalidOperation
from typing import TextIO

from ..config import parse_cost, parse_duration, parse_positive_count
from ..engine.decisions import Answer, Ask, Choice
from ..engine.errors import InvalidValueError

__all__ = ["Prompter", "console_prompter", "extension", "extension_forms", "parse_answer"]

#: What a prompter may return: an answer, or None for no answer (maybe awaitable).
Reply = Answer | Choice | bool | None
Prompter = Callable[[Ask], "Reply | Awaitable[Reply]"]

_WORDS = {
    "y": Choice.CONTINUE,
    "yes": Choice.CONTINUE,
    "c": Choice.CONTINUE,
    "continue": Choice.CONTINUE,
    "w": Choice.WRAP_UP,
    "wrap": Choice.WRAP_UP,
    "wrap up": Choice.WRAP_UP,
    "wrap_up": Choice.WRAP_UP,
    "n": Choice.ABORT,
    "no": Choice.ABORT,
    "a": Choice.ABORT,
    "abort": Choice.ABORT,
}


#: Limits that count whole things (``Ask.reason``): a turn limit extended by 0.5 would read
#: "Turns: 2/1.5", "-0.5 turns left".
_COUNTED = frozenset({"turn_limit", "tool_call_limit", "model_call_limit", "token_limit"})
#: The most any extension may add, as the most a count may be (``config.parse_positive_count``).
_MOST = Decimal(10**12)

_FORMS = {
    "cost_limit": "an amount of dollars above 0, such as 0.50",
    "time_limit": "seconds above 0, or a duration such as 90s or 5m",
}


def extension(text: str, reason: str | None = None) -> int | float | None:
    """How much ``extend N`` adds to the limit whose reason code is ``reason``: a whole number
    from 1 for a limit that counts (turns, tool calls, model calls, tokens), as ``haltwise
    approve --extend`` takes; dollars and seconds may be fractional; never infinite, NaN or past
    what a limit may be. None when ``text`` is not such an amount (ask again)."""
    try:
        if reason in _COUNTED:
            return parse_positive_count("extend", text)
        if reason == "cost_limit":
            dollars = parse_cost("extend", text)
            return float(dollars) if dollars is not None and dollars > 0 else None
        if reason == "time_limit":
            return parse_duration("extend", text)
    except InvalidValueError:
        return None
    try:
        number = Decimal(text.strip())
    except InvalidOperation:
        return None
    if not number.is_finite() or not 0 < number <= _MOST:
        return None
    return float(number) if "." in text or "e" in text.lower() else int(number)


def extension_forms(reason: str | None = None) -> str:
    """What ``extension`` takes for a limit, to tell the person who typed something else."""
    if reason in _COUNTED:
        return "a whole number from 1"
    return _FORMS.get(reason or "", "a number above 0")


def parse_answer(text: str, ask: Ask | None = None) -> Answer | None:
    """An answer from what a person typed: ``y``, ``n``, ``wrap``, ``extend 10``, ``+10``, ...

    None when the text is not an answer, or not one to ``ask``: an amount to extend by that the
    limit cannot take (``extension``).
    """
    words = text.strip().lower()
    if words.startswith("+"):
        words = "extend " + words[1:]
    if words.startswith(("e ", "extend ")):  # "+" alone is "extend " and no amount
        amount = extension(words.partition(" ")[2], None if ask is None else ask.reason)
        return None if amount is None else Answer(Choice.EXTEND, amount)
    choice = _WORDS.get(words)
    return None if choice is None else Answer(choice)


def console_prompter(
    stdin: TextIO | None = None, stdout: TextIO | None = None
) -> Callable[[Ask], Answer | None]:
    """A prompter that asks on the terminal; end of input means no answer."""

    def prompt(ask: Ask) -> Answer | None:
        source = stdin or sys.stdin
        sink = stdout or sys.stdout
        while True:
            sink.write(f"{ask.question} [y]es / [n]o / extend N / [w]rap up: ")
            sink.flush()
            line = source.readline()
            if not line:
                return None
            answer = parse_answer(line, ask)
            if answer is not None and answer.choice in ask.choices:
                return answer
            sink.write(f"Please answer y, n, w, or extend N ({extension_forms(ask.reason)}).\n")

    return prompt
