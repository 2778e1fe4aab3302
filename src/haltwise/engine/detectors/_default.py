"""``stuck()``: the default composite of every detector, with thresholds chosen by measurement.

The defaults were chosen by replaying 1,543 recorded runs of five agents and models
(``benchmarks/bench_detectors.py`` over ``../shared/traces``, which prints the table, the
frontier around each default and the ceiling): the tightest thresholds that cut at most 1% of
the runs that solved their task, counting also how many solved runs a threshold tells they
seem stuck (a note the live model reads) and how many calls it refuses them.

- ``no_progress`` 4 (was 8, when turns without a tool call counted too; they are
  ``monologue``'s now): 2 of 374 solved runs cut, 21 nudged. 3 would cut 3 (one run short of
  1%) and nudge 34, for 3% more tokens saved; 5 and 6 cut 2 and 1 and nudge 17.
- ``cycle`` 2 (was 3): a period of steps that came round twice with nothing new (A-B-A-B)
  trips; no solved run more cut or nudged.
- Left as they were, each measured a step tighter: ``repeat`` 2 cuts one solved run more and
  nudges 9 more; ``same_error`` 2 nudges 7 more and refuses calls in 2; ``scattered`` 3 cuts
  one more and nudges 35 more, for at most 2% more tokens saved each.
- ``paging`` off: a budget of 5 to 10 calls would stop a few more runs that spent their
  budget, but only by cutting paging that brought a new page each time, which the corpus
  counts as progress (``sympy__sympy-17139`` scrolls 13 times); at 14 and above it stops
  nothing more.

- ``no_effect``, ``oscillation``, ``recurring`` off (``benchmarks/bench_stuck.py`` prints each
  beside the defaults). Results now keep every number that is not volatile, so the same check
  moving from 9 failures to 7 is progress; the defaults measured about the same after that
  change (36 of 138 on-limit runs stopped, not 37: one stop at the last step of its run went;
  34.1% of their tokens, not 34.2%; 2 of 374 solved runs cut; 17 solved runs nudged, not 21,
  the progress that had been taken for a loop). On top of
  them, ``no_effect`` 2 saves 0.1% more tokens and nudges 7 more solved runs, 3 changes
  nothing; ``recurring`` 6 saves 0.5% more and cuts 2 more solved runs (3 of 179 in
  mini-swe-agent); ``oscillation`` 2 never fires (1 fires 5 times, cutting 2 solved runs).

What a stop at the first sign of any plausible rule could save at most is printed by
``bench_detectors.py`` (the ceiling); these defaults save 12.3M of the 13.1M tokens it finds
within the 1% budget with paging spared, on the unsolved runs that ended on a limit. Of those
runs' dollars (the 89 priced: GPT-4 and GPT-4o), no rule of those families saves more than 8.6%
within the budget: the GPT-4o runs end on their cost limit after about 14 steps of work that
no rule tells from progress without cutting solved runs.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from typing import Any

from ..errors import InvalidValueError
from ..limits import Limit, Scope, _AnyOf
from ..policies import Policy, as_policy
from ._base import Detector, check_tools
from ._base import options as _options
from ._edits import no_effect as no_effect_factory
from ._edits import oscillation as oscillation_factory
from ._edits import recurring_errors
from ._paging import paging as _paging_factory
from ._text import degenerate_text, monologue
from ._tools import cycles, no_progress, repeats, same_errors, scattered

__all__ = ["DEFAULTS", "MINIMUMS", "load_profile", "stuck"]

#: The measured default thresholds (``None`` switches a detector off).
DEFAULTS: dict[str, int | None] = {
    "repeat": 3,
    "same_error": 3,
    "same_tool_error": 4,
    "cycle": 2,
    "scattered": 4,
    "no_progress": 4,
    "monologue": 8,
    "degenerate": 10,
    "paging": None,
    "no_effect": None,
    "oscillation": None,
    "recurring": None,
}

#: The smallest value each threshold takes.
MINIMUMS: dict[str, int] = dict.fromkeys(DEFAULTS, 2) | {
    "no_progress": 1,
    "monologue": 1,
    "no_effect": 1,
    "oscillation": 1,
}


class _Stuck(_AnyOf):
    """The detectors of ``stuck()``: checked one by one, shown as the call that made them."""

    __slots__ = ("_args",)

    def __init__(self, members: tuple[Limit, ...], args: str) -> None:
        super().__init__(members, as_policy("abort"))
        self._args = args
        for member in members:
            if isinstance(member, Detector):
                member.composite = self

    def __repr__(self) -> str:
        return f"stuck({self._args})"


def stuck(
    *,
    repeat: int | None = DEFAULTS["repeat"],
    same_error: int | None = DEFAULTS["same_error"],
    same_tool_error: int | None = DEFAULTS["same_tool_error"],
    cycle: int | None = DEFAULTS["cycle"],
    scattered: int | None = DEFAULTS["scattered"],
    no_progress: int | None = DEFAULTS["no_progress"],
    monologue: int | None = DEFAULTS["monologue"],
    degenerate: int | None = DEFAULTS["degenerate"],
    paging: int | None = DEFAULTS["paging"],
    no_effect: int | None = DEFAULTS["no_effect"],
    oscillation: int | None = DEFAULTS["oscillation"],
    recurring: int | None = DEFAULTS["recurring"],
    profile: str | os.PathLike[str] | None = None,
    window: int = 20,
    polling_tools: Iterable[str] = (),
    polling_n: int | None = None,
    ladder: bool = True,
    scope: Scope = "run",
    on_limit: str | Policy = "abort",
    shadow: bool = False,
) -> Limit:
    """Every stuck detector at once, each with its threshold (``None`` leaves one out):

    ``repeat``: the same action and result N times in a row; ``same_error``: the same action
    failing the same way N times in a row; ``same_tool_error``: the same tool failing the same
    way N times in a row, whatever its arguments; ``cycle``: a period of 2..8 steps repeated N
    times;
    ``scattered``: the same action and result N times within ``window`` calls; ``no_progress``:
    K turns without new information; ``monologue``: N turns without a tool call;
    ``degenerate``: a chunk of text chanted N times; ``paging``: the same action N times in a
    row whatever its results, a budget on paging (off unless given); ``no_effect``: the same
    check giving the same result after each of K rounds of edits; ``oscillation``: N edits made
    again after another edit came between; ``recurring``: the same tool failing the same way N
    times within ``window`` calls (the last three off unless given: measured, they did not pay
    on the corpus).

    ``profile``: a file written by ``haltwise audit RUNS --suggest --write-profile FILE``, whose
    thresholds, fitted to an agent's own runs, replace the defaults; a threshold given here as
    well (other than its default) wins over the file's. ``repr`` echoes the call as written.
    """
    thresholds = {
        "repeat": repeat,
        "same_error": same_error,
        "same_tool_error": same_tool_error,
        "cycle": cycle,
        "scattered": scattered,
        "no_progress": no_progress,
        "monologue": monologue,
        "degenerate": degenerate,
        "paging": paging,
        "no_effect": no_effect,
        "oscillation": oscillation,
        "recurring": recurring,
    }
    given = thresholds
    if profile is not None:
        fitted = load_profile(profile)
        thresholds = {
            name: fitted.get(name, value) if value == DEFAULTS[name] else value
            for name, value in thresholds.items()
        }
        same_tool_error = thresholds["same_tool_error"]
        same_error = thresholds["same_error"]
    tools = check_tools(polling_tools, "stuck(polling_tools)")
    common: dict[str, Any] = {
        "ladder": ladder,
        "scope": scope,
        "on_limit": on_limit,
        "shadow": shadow,
    }
    tool_options: dict[str, Any] = {
        "window": window,
        "polling_tools": tools,
        "polling_n": polling_n,
        **common,
    }
    edit_options = {"window": window, **common}
    members: list[Limit] = []
    for name, value in thresholds.items():
        if value is None or value is False:
            continue
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidValueError(
                f"stuck({name})", value, "a positive integer, or None to leave it out"
            )
        if name == "repeat":
            members.append(repeats(value, **tool_options))
        elif name == "same_error":
            members.append(same_errors(value, tool_n=same_tool_error, **tool_options))
        elif name == "same_tool_error":
            if same_error is None:
                members.append(same_errors(value, tool_n=value, **tool_options))
        elif name == "cycle":
            members.append(cycles(value, **tool_options))
        elif name == "scattered":
            members.append(_scattered(value, **tool_options))
        elif name == "no_progress":
            progress_options = {k: v for k, v in tool_options.items() if k != "polling_n"}
            members.append(_no_progress(value, **progress_options))
        elif name == "monologue":
            members.append(_monologue(value, **common))
        elif name == "paging":
            members.append(_paging_factory(value, **tool_options))
        elif name == "no_effect":
            members.append(_no_effect(value, **edit_options))
        elif name == "oscillation":
            members.append(_oscillation(value, **edit_options))
        elif name == "recurring":
            members.append(_recurring_errors(value, **edit_options))
        else:
            members.append(degenerate_text(value, **common))
    if not members:
        raise InvalidValueError("stuck", thresholds, "at least one detector left on")
    shown = _options(
        profile=(None if profile is None else os.fspath(profile), None),
        **{name: (value, DEFAULTS[name]) for name, value in given.items()},
        window=(window, 20),
        polling_tools=(tools, frozenset()),
        polling_n=(polling_n, None),
        ladder=(bool(ladder), True),
        scope=(scope, "run"),
        on_limit=(on_limit, "abort"),
        shadow=(bool(shadow), False),
    ).removeprefix(", ")
    return _Stuck(tuple(members), shown)


def load_profile(path: str | os.PathLike[str]) -> dict[str, int | None]:
    """The thresholds of a profile file (JSON, as ``haltwise audit --suggest`` writes it):
    ``{"stuck": {"repeat": 4, "no_progress": 6, ...}, ...}``; every name a ``stuck()``
    threshold, every value an integer at least its minimum, or null to leave it out. A file that
    cannot be read or does not say that raises ``InvalidValueError`` naming the file."""
    where = f"stuck(profile={os.fspath(path)!r})"
    try:
        with open(path, "rb") as file:
            document = json.load(file)
    except OSError as error:
        raise InvalidValueError(
            where, path, f"a readable profile file ({error.strerror})"
        ) from None
    except ValueError as error:
        raise InvalidValueError(where, path, f"a JSON profile file ({error})") from None
    table = document.get("stuck") if isinstance(document, dict) else None
    if not isinstance(table, dict):
        raise InvalidValueError(
            where, path, 'a JSON object with a "stuck" table: {"stuck": {"repeat": 4, ...}}'
        )
    thresholds: dict[str, int | None] = {}
    for name, value in table.items():
        if name not in DEFAULTS:
            raise InvalidValueError(
                f"{where}: stuck.{name}", name, f"one of {', '.join(sorted(DEFAULTS))}"
            )
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int) or value < MINIMUMS[name]
        ):
            raise InvalidValueError(
                f"{where}: stuck.{name}",
                value,
                f"an integer of at least {MINIMUMS[name]}, or null to leave it out",
            )
        thresholds[name] = value
    return thresholds


# The keyword names shadow the factories inside ``stuck``.
_scattered = scattered
_no_progress = no_progress
_monologue = monologue
_no_effect = no_effect_factory
_oscillation = oscillation_factory
_recurring_errors = recurring_errors
