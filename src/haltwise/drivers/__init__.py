"""Drivers: carry out the governor's decisions in a hand-written loop, sync or async.

The governor decides; a driver does what the decision says: asks a human through a prompter,
writes a final answer through a synthesizer, raises the typed exception on a stop. The sync and
async drivers run one generator (``Run._flow``), so neither holds logic of its own.
"""

from .guard import AsyncRun, Guard, Run
from .openai_usage import response_event
from .prompters import Prompter, console_prompter

__all__ = ["AsyncRun", "Guard", "Prompter", "Run", "console_prompter", "response_event"]
