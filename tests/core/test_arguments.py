"""What ``Guard`` and ``Governor`` are given is checked where it is given: a wrong argument
raises ``InvalidValueError`` (or ``ConfigurationError``) at the call, naming the argument, what
it got and what it takes, rather than a traceback from deep inside a later event."""

from __future__ import annotations

import math
import re
import time
from decimal import Decimal
from typing import Any

import pytest

from haltwise import (
    ConfigurationError,
    Governor,
    Guard,
    InvalidValueError,
    Prices,
    max_cost,
    max_turns,
)
from haltwise.engine.ledger import MemoryLedger

BAD_GUARD: list[tuple[str, Any, str]] = [
    ("governor", 5, "a Governor"),
    ("governor", "gov", "a Governor"),
    ("clock", 5, "a monotonic clock"),
    ("pricer", "x", "a Pricer"),
    ("pricer", {"gpt-4o": "1"}, "a Pricer"),
    ("ledger", 5, "a Ledger"),
    ("ledger", "postgres://db", "memory:"),
    ("prompter", 5, "a function f(ask)"),
    ("synthesizer", 5, "a function f(evidence)"),
    ("heartbeat", "x", "a number of seconds above 0"),
    ("heartbeat", 0, "a number of seconds above 0"),
    ("heartbeat", math.inf, "a number of seconds above 0"),
    ("heartbeat", math.nan, "a number of seconds above 0"),
    ("heartbeat", True, "a number of seconds above 0"),
    ("approval_timeout", -1, "a number of seconds from 0"),
    ("approval_timeout", "600", "a number of seconds from 0"),
    ("signal", "yes", "True or False"),
    ("live", 1, "True, False, or None"),
    ("on_ledger_error", "later", "'closed'"),
]


@pytest.mark.parametrize(("argument", "value", "takes"), BAD_GUARD)
def test_guard_names_a_bad_argument(argument: str, value: Any, takes: str) -> None:
    named = re.escape(f"Guard({argument})={value!r} is not valid: expected ")
    with pytest.raises(InvalidValueError, match=f"{named}.*{re.escape(takes)}"):
        Guard(max_turns(3), **{argument: value})


BAD_GOVERNOR: list[tuple[str, Any, str]] = [
    ("clock", 5, "a monotonic clock"),
    ("wall_clock", 5, "a clock of epoch seconds"),
    ("new_id", 5, "a function that returns a new run id"),
    ("pricer", {}, "a Pricer"),
    ("pricer", "genai-prices", "a Pricer"),
    ("ledger", 5, "a Ledger"),
    ("ledger", "", "memory:"),
    ("parent", 5, "a Governor, or None"),
    ("lease", -1, "a number of seconds above 0"),
    ("lease", "x", "a number of seconds above 0"),
    ("lease", Decimal(300), "a number of seconds above 0"),
]


@pytest.mark.parametrize(("argument", "value", "takes"), BAD_GOVERNOR)
def test_governor_names_a_bad_argument(argument: str, value: Any, takes: str) -> None:
    named = re.escape(f"Governor({argument})={value!r} is not valid: expected ")
    with pytest.raises(InvalidValueError, match=f"{named}.*{re.escape(takes)}"):
        Governor(max_turns(3), **{argument: value})


def test_a_guard_given_a_governor_takes_nothing_the_governor_has() -> None:
    governor = Governor(max_turns(3))
    for given in (
        {"limits": max_turns(5)},
        {"clock": time.perf_counter},
        {"pricer": Prices()},
        {"ledger": MemoryLedger()},
        {"on_ledger_error": "open"},
    ):
        with pytest.raises(ConfigurationError, match="takes its limits, clock, pricer"):
            Guard(governor=governor, **given)


def test_what_is_valid_is_taken() -> None:
    prices = Prices({"my-model": {"input": "0.50", "output": "1.50"}})
    guard = Guard(
        max_turns(3) | max_cost("1"),
        prompter=lambda ask: None,
        synthesizer=lambda evidence: "42",
        signal=True,
        clock=time.monotonic,
        pricer=prices,
        ledger="memory:",
        live=False,
        approval_timeout=0,  # no wait for an answer through the ledger
        heartbeat=0.5,
    )
    assert isinstance(guard.governor.ledger, MemoryLedger)
    assert guard.heartbeat == 0.5
    Guard(governor=guard.governor, prompter=None)
    Governor(None, lease=1, parent=guard.governor, new_id=lambda: "id", wall_clock=time.time)
