"""What every framework adapter shares: the result of a governed run, the outcome of a
synthesis pass (``synthesis_outcome``: one rule for every adapter), and the one synthesis pass
of a run whose hooks run in several threads or tasks at once."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Generic, TypeVar

from ..engine.decisions import Decision
from ..engine.events import ModelRequest
from ..engine.governor import Governor
from ..engine.outcome import Outcome, Status, Usage

__all__ = ["Governed", "SynthesisPass", "answered", "synthesis_outcome"]

R = TypeVar("R")


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


def answered(text: str | None) -> bool:
    """Whether a synthesis pass wrote an answer: some text, not only blanks (a pass that called
    a tool instead has none)."""
    return text is not None and bool(text.strip())


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
