"""Bounded loops around agents (AUREUS): attempts, refinement, convergence, cost gates.

Every loop here is bounded, notices when it stops making progress, and ends in the engine's
``Outcome`` with a reason, next steps and a checkpoint it can ``resume`` from:

- ``attempts(n)``: a retry in which each attempt sees what went before;
- ``refine(n)``: build, then test, review and fix with decaying strictness; the best effort at
  the end, with warnings, rather than a failure;
- ``simplify(n)``: simplification passes that stop at diminishing returns;
- ``cost_gate(low, high)``: proceed, ask a human, or reject, with at most 3 cheaper
  alternatives;
- ``convergence()``: the "stuck" detector over a loop's history; ``max_plan_size(20)``: a cap
  on plans; ``session_limits()``: the global circuit breakers as core limits.

This package is not part of the pure engine (it runs callbacks), and decides no limit itself:
session-wide limits and cancellation are a ``Governor``'s. A loop is that governor's agent: each
pass is a turn (``TurnStarting``: time, turns and a cancel are checked before it starts), and
agents inside report their model calls, tokens and dollars to ``step.governor``, a child of it.
Each loop's logic is one generator; ``run``/``resume`` and ``arun``/``aresume`` are thin drivers
over it.

Reason codes a loop's ``Outcome`` may carry (besides the governor's own: ``time_limit``,
``model_call_limit``, ``cost_limit``, ``token_limit``, ``cancelled``, ...):

================================  ============================  ==================================
reason                            status                        when
================================  ============================  ==================================
``completed``                     completed                     accepted / approved / simplified
``attempts_exhausted``            abandoned                     ``n`` attempts, none accepted
``iteration_limit``               completed_with_warnings       refine: best effort at its bound
                                  (abandoned: nothing built)    simplify: all passes made
``converged.same_issues``         completed_with_warnings       the same issues (or error) N times
                                  (attempts: abandoned)         in a row, before the bound
``converged.no_improvement``      completed_with_warnings       a named metric improved < 5%
                                  (simplify: completed)
``converged.same_estimate``       as above                      the same estimate N times in a row
``measure_failed``                completed_with_warnings       simplify could not size the input
``cost_rejected``                 abandoned                     over budget, nothing cheaper
``no_acceptable_alternative``     abandoned                     every alternative was rejected
``plan_too_large``                abandoned                     ``max_plan_size(n).check(plan)``
``interrupted``                   (checkpoint only)             Ctrl-C or task cancelled mid-loop
================================  ============================  ==================================
"""

from ._flow import BoundedLoop, Step
from .attempts import Attempts, attempts
from .caps import PlanCap, max_plan_size, session_limits
from .convergence import Converged, Convergence, convergence
from .gate import CostGate, Quote, cost_gate
from .records import Issue, Iteration, LoopResult, Review, Severity, Strictness, as_review
from .refine import Refine, refine
from .simplify import Simplify, simplify

__all__ = [
    "Attempts",
    "BoundedLoop",
    "Converged",
    "Convergence",
    "CostGate",
    "Issue",
    "Iteration",
    "LoopResult",
    "PlanCap",
    "Quote",
    "Refine",
    "Review",
    "Severity",
    "Simplify",
    "Step",
    "Strictness",
    "as_review",
    "attempts",
    "convergence",
    "cost_gate",
    "max_plan_size",
    "refine",
    "session_limits",
    "simplify",
]
