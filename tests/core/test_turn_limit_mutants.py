"""A mutation check of test_turn_limit.py: each mutant is a small deliberate bug in the engine,
and that file's checks (its row tests and both state machines) must catch every one.

A check catches a mutant by failing an assertion (the mutants themselves assert nothing).
Anything else it raises (a mistake in a mutant, a machine Hypothesis rejects) is not a catch:
it propagates and fails the test here, so a broken mutant cannot pass for a caught one.

The mutants are bugs in the general handlers and limits, so the handlers written for the limits
(``engine/hotpath.py``) are turned off while they are checked; test_fast_path.py requires those
to decide as the general ones do.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator

import pytest
import test_turn_limit
from hypothesis import Phase, Verbosity, settings
from hypothesis.stateful import RuleBasedStateMachine, run_state_machine_as_test

from haltwise import (
    Answer,
    Ask,
    Choice,
    Decision,
    Event,
    Governor,
    Injected,
    Limit,
    RunStarted,
    Stop,
    TurnStarting,
)
from haltwise.engine import governor as governor_module
from haltwise.engine.limits import Context, _MaxTurns
from haltwise.engine.state import Slot


def _hunt(machine: type[RuleBasedStateMachine]) -> Callable[[], None]:
    """The machine with the suite's own settings, made quiet (a caught mutant prints nothing)
    and derandomized (a mutant caught once is caught on every run). The first failure is
    enough, so nothing is shrunk."""
    hunting = settings(
        machine.TestCase.settings,
        database=None,
        derandomize=True,
        phases=[Phase.generate],
        report_multiple_bugs=False,
        verbosity=Verbosity.quiet,
    )

    def run() -> None:
        run_state_machine_as_test(machine, settings=hunting)

    return run


#: The row tests first: they take microseconds, and most mutants are caught there.
CHECKS: dict[str, Callable[[], None]] = {
    **{
        name: check
        for name, check in vars(test_turn_limit).items()
        if name.startswith("test_") and inspect.isfunction(check)
    },
    "TurnLimitMachine": _hunt(test_turn_limit.TurnLimitMachine),
    "TurnLimitWithoutUiMachine": _hunt(test_turn_limit.TurnLimitWithoutUiMachine),
}


def failing_checks() -> Iterator[str]:
    """The names of the checks that fail, lazily: a mutant needs only the first."""
    for name, check in CHECKS.items():
        try:
            check()
        except (AssertionError, pytest.fail.Exception):
            yield name


# The mutants. Each wraps or replaces one engine function, captured here before any patching.

_as_answer = governor_module._as_answer
_set_limit = Governor.set_limit
_on_turn_starting = Governor._on_turn_starting
_on_run_started = Governor._on_run_started
_on_other = Governor._on_other
_stop_after_ask = Governor._stop_after_ask


def no_answer_continues(answer: Answer | Choice | bool | None) -> Answer | None:
    """Bug: no answer (no UI, or the prompter timed out) is taken as "continue"."""
    return Answer(Choice.CONTINUE) if answer is None else _as_answer(answer)


def unlimited_trips_at_25(self: Governor, event: TurnStarting) -> Decision:
    """Bug: an unlimited turn limit still stops the run after the spec's default of 25 turns."""
    used, cap = self.turns()
    if cap is None and used >= 25:
        return self.stop("turn_limit", "Turn limit reached: 25 of 25 turns used this round")
    return _on_turn_starting(self, event)


def n_to_m_restarts_the_count(self: Governor, limit: Limit) -> None:
    """Bug: changing the limit from N to M restarts the count, as unlimited -> N does."""
    _set_limit(self, limit)
    for leaf in self.limits.leaves():
        leaf.restart(self.slot(leaf), self)


def injected_restarts_the_count(self: Governor, event: Event) -> Decision:
    """Bug: a mid-loop user message restarts the count, as a new prompt does."""
    if isinstance(event, Injected):
        for leaf in self.limits.leaves():
            leaf.restart(self.slot(leaf), self)
    return _on_other(self, event)


def boundary_past_the_limit(
    self: _MaxTurns, event: object, slot: Slot | None, ctx: Context
) -> str | None:
    """Bug: the boundary fires at ``>`` instead of ``>=``, so N+1 turns run."""
    if slot is None or self.maximum is None:
        return None
    used, cap = slot.tally.turns - slot.baseline, self.maximum + slot.extra
    return self._would_exceed(used, cap) if used > cap else None


def boundary_only_at_the_limit(
    self: _MaxTurns, event: object, slot: Slot | None, ctx: Context
) -> str | None:
    """Bug: the seed's ``transitions_to``: it fires only at ``==``, so a lowered limit is lost."""
    if slot is None or self.maximum is None:
        return None
    used, cap = slot.tally.turns - slot.baseline, self.maximum + slot.extra
    return self._would_exceed(used, cap) if used == cap else None


def extend_ignored(self: Limit, amount: int | float, ctx: Context) -> None:
    """Bug: "extend by N" leaves the limit where it was."""


def continue_keeps_the_count(self: Limit, ctx: Context) -> None:
    """Bug: "continue" lets the waiting turn run but keeps the round's count."""


def new_prompt_keeps_the_count(self: Governor, event: RunStarted) -> Decision:
    """Bug: a new prompt carries the previous prompt's turns over."""
    turns = self.usage.turns
    decision = _on_run_started(self, event)
    self._run.turns = turns
    return decision


def unlimited_to_n_keeps_the_count(self: _MaxTurns) -> bool:
    """Bug: unlimited counts as enforced, so unlimited -> N keeps the count (no LimitReEnabled)."""
    return True


def declining_reported_as_no_answer(
    self: Governor, ask: Ask, limit: Limit, answer: Answer | None, ctx: Context
) -> Stop:
    """Bug: declining is reported as the limit running out, not as ``declined``."""
    return _stop_after_ask(self, ask, limit, None, ctx)


def stop_at_the_question_not_terminal(
    self: Governor, ask: Ask, limit: Limit, answer: Answer | None, ctx: Context
) -> Stop:
    """Bug: a run stopped at the question is not terminal: the next turn runs."""
    stop = _stop_after_ask(self, ask, limit, answer, ctx)
    self._stopped = None
    self._refresh()
    return stop


def wrap_up_continues(answer: Answer | Choice | bool | None) -> Answer | None:
    """Bug: "wrap up" is taken as "continue", so the run goes on."""
    reply = _as_answer(answer)
    if reply is not None and reply.choice is Choice.WRAP_UP:
        return Answer(Choice.CONTINUE)
    return reply


#: (where, what, the mutant that replaces it)
MUTANTS: list[tuple[object, str, object]] = [
    (governor_module, "_as_answer", no_answer_continues),
    (Governor, "_on_turn_starting", unlimited_trips_at_25),
    (Governor, "set_limit", n_to_m_restarts_the_count),
    (Governor, "_on_other", injected_restarts_the_count),
    (_MaxTurns, "pre", boundary_past_the_limit),
    (_MaxTurns, "pre", boundary_only_at_the_limit),
    (_MaxTurns, "extend", extend_ignored),
    (_MaxTurns, "new_round", continue_keeps_the_count),
    (Governor, "_on_run_started", new_prompt_keeps_the_count),
    (_MaxTurns, "enforced", property(unlimited_to_n_keeps_the_count)),
    (Governor, "_stop_after_ask", declining_reported_as_no_answer),
    (Governor, "_stop_after_ask", stop_at_the_question_not_terminal),
    (governor_module, "_as_answer", wrap_up_continues),
]


def _name(mutant: object) -> str:
    function = mutant.fget if isinstance(mutant, property) else mutant
    return str(getattr(function, "__name__", mutant))


def test_every_check_passes_without_a_mutant() -> None:
    assert list(failing_checks()) == []


@pytest.mark.parametrize(
    ("where", "what", "mutant"),
    [pytest.param(*row, id=_name(row[2])) for row in MUTANTS],
)
def test_the_checks_catch(
    monkeypatch: pytest.MonkeyPatch, where: object, what: str, mutant: object
) -> None:
    monkeypatch.setattr(governor_module, "compile_handlers", lambda governor: {})
    monkeypatch.setattr(where, what, mutant)
    assert next(failing_checks(), None), f"no turn-limit check caught it: {inspect.getdoc(mutant)}"
