"""Prompters: how a driver puts an ``Ask`` to a human.

A prompter is any callable ``prompter(ask) -> Answer | Choice | bool | None`` (or an async one).
``None`` means no answer; the run then stops, as it does when there is no prompter at all.
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from typing import TextIO

from ..engine.decisions import Answer, Ask, Choice

__all__ = ["Prompter", "console_prompter", "parse_answer"]

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


def parse_answer(text: str) -> Answer | None:
    """An answer from what a person typed: ``y``, ``n``, ``wrap``, ``extend 10``, ``+10``, ...

    None when the text is not an answer.
    """
    words = text.strip().lower()
    if words.startswith("+"):
        words = "extend " + words[1:]
    if words.startswith(("e ", "extend ")):
        amount = words.split(maxsplit=1)[1]
        try:
            number = float(amount) if "." in amount else int(amount)
        except ValueError:
            return None
        return Answer(Choice.EXTEND, number) if number > 0 else None
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
            answer = parse_answer(line)
            if answer is not None and answer.choice in ask.choices:
                return answer
            sink.write("Please answer y, n, w, or extend N (a positive number).\n")

    return prompt
