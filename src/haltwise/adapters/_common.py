"""What every framework adapter shares: the checks of what ``govern`` and its kin are given
(``checked_guard``, ``checked_limits``, ``saved_counts``), the result of a governed run, the
outcome of a synthesis pass (``synthesis_outcome``: one rule for every adapter) and the time
it may take (``synthesis_seconds``), and the one synthesis pass of a run whose hooks run in
several threads or tasks at once.

What does not live here: checks of a framework's own objects (its agent, its options), which
each adapter makes with its framework's types; checks of a ``Guard``'s own arguments (its
prompter, its synthesizer), which ``Guard`` makes.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from ..drivers.guard import Guard, answered
from ..engine.decisions import Decision
from ..engine.errors import InvalidValueError
from ..engine.events import ModelRequest
from ..engine.governor import Governor
from ..engine.limits import Limit, as_limit
from ..engine.outcome import Outcome, Status, Usage

__all__ = [
    "SYNTHESIS_SECONDS",
    "Governed",
    "Resume",
    "SynthesisPass",
    "answered",
    "checked_guard",
    "checked_limits",
    "saved_counts",
    "synthesis_outcome",
    "synthesis_seconds",
]

R = TypeVar("R")

#: The most the tools-free pass of a ``synthesize`` stop may take. It comes after the run has
#: stopped: once a time limit stopped it, the run has no time left to give the pass.
SYNTHESIS_SECONDS = 60.0


@dataclass(frozen=True)
class Governed(Generic[R]):
    """A framework run under haltwise: how it ended, and what the framework itself returned.

    ``outcome`` is the same in every framework: status, reason, message, usage, partial output,
    suggestions and checkpoint. ``result`` is the framework's own result object (a ``RunResult``,
    an ``AgentRunResult``, a LangGraph state...) when its run returned one, and None when
    haltwise stopped the run before the framework could build one.
    """

    outcome: Outcome
    result: R | None = None

    def __repr__(self) -> str:
        # Short: a framework's result can be large, and asyncio formats reprs on the hot path.
        outcome, kind = self.outcome, type(self.result).__name__
        return f"Governed({outcome.status}, {outcome.reason!r}, result={kind})"

    @property
    def output(self) -> str | None:
        """The final answer, or the partial (or synthesized) one when a limit stopped the run."""
        return self.outcome.partial_output

    @property
    def completed(self) -> bool:
        """Whether the agent finished on its own (no limit, cancel or error ended it)."""
        return self.outcome.status is Status.COMPLETED

    @property
    def usage(self) -> Usage:
        return self.outcome.usage


#: ``run(resume=...)``: True or a ``Governed`` (this guard's last run), a checkpoint reference,
#: or the data of ``governor.checkpoint()``.
Resume = bool | str | Mapping[str, Any] | Governed[Any] | None


# ------------------------------------------------------------------------------------------
# What govern and its kin are given, checked where they are given


def checked_guard(guard: object, argument: str) -> Guard:
    """``guard`` when it is a haltwise ``Guard``; else an ``InvalidValueError`` naming
    ``argument`` (``"govern(guard)"``, say), what it got and what it takes, raised at the call
    rather than deep inside the framework's run."""
    if not isinstance(guard, Guard):
        raise InvalidValueError(
            argument,
            guard,
            "a haltwise Guard, e.g. Guard(max_turns(10)) (a Governor goes in as "
            "Guard(governor=governor), limits as Guard(limits))",
        )
    return guard


def checked_limits(
    limits: Limit | Callable[[Usage], bool] | None, argument: str
) -> Limit | Callable[[Usage], bool] | None:
    """``limits`` when they are limits (a limit, a callable ``f(usage) -> bool``, or None);
    else an ``InvalidValueError`` naming ``argument``."""
    try:
        as_limit(limits)
    except InvalidValueError as error:
        raise InvalidValueError(argument, error.value, error.valid) from None
    return limits


def saved_counts(governor: Governor, resume: Resume) -> dict[str, Any] | str | None:
    """What to restore once a run has started, so that it keeps the counts it had: nothing for
    None or False, a checkpoint reference or data as given, else (True, a ``Governed``) this
    guard's last run as it stands."""
    if resume is None or resume is False:
        return None
    if isinstance(resume, str):
        return resume
    if isinstance(resume, Mapping):
        return dict(resume)
    if resume is True or isinstance(resume, Governed):
        return governor.checkpoint()
    raise InvalidValueError(
        "run(resume)",
        resume,
        "True or a Governed (this guard's last run), a checkpoint reference "
        "(outcome.checkpoint), the data of governor.checkpoint(), or None",
    )


def synthesis_seconds(time_left: float | None) -> float:
    """How long the tools-free pass of a ``synthesize`` stop may take: what the run has left,
    at most ``SYNTHESIS_SECONDS``; the whole ``SYNTHESIS_SECONDS`` once its time is up (a time
    limit that synthesizes asks for a pass after its deadline) or when it has no time limit."""
    if not time_left:
        return SYNTHESIS_SECONDS
    return min(time_left, SYNTHESIS_SECONDS)


def synthesis_outcome(governor: Governor, answer: str | None) -> Outcome:
    """The run's outcome once the tools-free pass of its ``synthesize`` stop has ended.

    An answer with text in it is the run's final answer (``Governor.synthesized``). No text
    (the model called a tool it no longer has, the pass failed or was cut off, it wrote only
    blanks) is no answer: the stop stands, with its status, reason and partial output, its
    usage and checkpoint counting the pass's own model call
    (``Governor.synthesis_unanswered``).
    """
    if answered(answer):
        assert answer is not None
        return governor.synthesized(answer)
    return governor.synthesis_unanswered()


class SynthesisPass:
    """The tools-free pass that writes the final answer of a run's ``synthesize`` stop, made
    once however many flows (threads, tasks: parallel branches, sub-agents called by parallel
    tool calls) meet the stop, as ``Guard`` does for its synthesizer.

    The first flow to ``claim`` it makes the pass: it claims it in the governor too
    (``Governor.claim_synthesis``), so that the governor refuses any other request made after
    the stop, and its own request is decided by ``request`` (``Governor.synthesis_request``).
    The other flows wait for ``done``, then end with the run's outcome: the synthesized answer,
    or the stop when the pass was refused, failed or raised. The writer calls ``release`` however
    its pass ends (``finally``), so that no flow waits for ever. One per run.
    """

    def __init__(self, governor: Governor) -> None:
        self.governor = governor
        #: Set once the pass has ended, answered or not; the flows that did not make it wait
        #: for it (a ``threading.Event``: sync hooks block on it, async ones poll it).
        self.done = threading.Event()
        self._claimed = False
        self._lock = threading.Lock()

    def claim(self) -> bool:
        """True for the one flow that makes the pass; False for the others (and for every
        flow once the pass was made): they wait for ``done``."""
        with self._lock:
            if self._claimed:
                return False
            self._claimed = True
        self.governor.claim_synthesis()
        return True

    def request(self, event: ModelRequest) -> Decision:
        """The governor's decision on the claimed pass's request: admitted once, when the
        budget left can pay for it (``Continue``, perhaps with a lower ``max_tokens``), else
        the ``Stop`` that ends the run with its partial output, saying why."""
        return self.governor.synthesis_request(event)

    def release(self) -> None:
        """The pass has ended: the flows waiting for it go on."""
        self.done.set()

    def __repr__(self) -> str:
        state = "done" if self.done.is_set() else "claimed" if self._claimed else "open"
        return f"SynthesisPass({state})"
