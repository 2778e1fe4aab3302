"""Stuck detectors: limits that notice an agent looping, thrashing or talking to itself.

Each detector is a limit (a ``Leaf``) with its own reason code, composable with the rest:
``max_turns(30) | stuck()`` or ``max_cost("2") | repeats(4) | cycles()``.

========================  ===================  ==================================================
factory                   reason               trips on
========================  ===================  ==================================================
``repeats(n)``            ``stuck.repeat``     the same action and result n times in a row
``same_errors(n)``        ``stuck.same_error`` the same action failing the same way n times
``cycles(repetitions)``   ``stuck.cycle``      a period of 2..8 steps repeated, learning nothing
``scattered(n)``          ``stuck.scattered``  the same action and result n times in a window
``no_progress(k)``        ``stuck.no_progress`` k turns without new information
``monologue(n)``          ``stuck.monologue``  n turns without a tool call
``degenerate_text(n)``    ``stuck.degenerate`` a chunk of text chanted n times
``paging(n)``             ``stuck.paging``     the same action n times in a row, whatever its
                                               results: a budget on paging, not a loop
``no_effect(k)``          ``stuck.no_effect``  the same check, the same result, after each of
                                               k rounds of edits
``oscillation(n)``        ``stuck.oscillation`` n edits made again after another edit came
                                               between (a change undone and redone)
``recurring_errors(n)``   ``stuck.recurring``  the same tool failing the same way n times in a
                                               window, whatever was tried between
``stuck()``               (each of the above)  all of them, with measured thresholds (paging
                                               and the last three only when asked, or from a
                                               profile fitted to one's own runs)
========================  ===================  ==================================================

Actions are compared as canonical keys and results as normalized fingerprints (``_keys.py``);
whether a result brought new information decides between a loop and paging, polling or a batch
of edits (``_base.Recent``). Every detector climbs the same ladder: a nudge, then refusing the
repeated call, then a stop (``_base.py``). Nothing here imports anything outside the engine.
"""

from ._base import Detector
from ._default import DEFAULTS, MINIMUMS, load_profile, stuck
from ._edits import no_effect, oscillation, recurring_errors
from ._keys import (
    action_key,
    canonical_arguments,
    error_class,
    normalize_output,
    result_fingerprint,
)
from ._paging import paging
from ._text import degenerate_text, find_degenerate, monologue
from ._tools import cycles, no_progress, repeats, same_errors, scattered

__all__ = [
    "DEFAULTS",
    "MINIMUMS",
    "Detector",
    "action_key",
    "canonical_arguments",
    "cycles",
    "degenerate_text",
    "error_class",
    "find_degenerate",
    "load_profile",
    "monologue",
    "no_effect",
    "no_progress",
    "normalize_output",
    "oscillation",
    "paging",
    "recurring_errors",
    "repeats",
    "result_fingerprint",
    "same_errors",
    "scattered",
    "stuck",
]
