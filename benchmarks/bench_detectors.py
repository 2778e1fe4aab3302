"""Stuck detection on real recorded runs: haltwise's defaults beside the checks agents ship.

Every run under ``../shared/traces`` (or ``$HALTWISE_TRACES``) is replayed, in one pass, through
OpenHands' StuckDetector (both readings of its observation equality), Gemini CLI's tool-call
loop check, and haltwise's ``stuck()``. For each corpus and model, and in total:

- solved runs cut (false cuts): runs that solved their task but would have been stopped;
- on unsolved runs that really ended on the agent's own limit (``exit_cost``,
  ``exit_context``): how many would have been stopped earlier, and the steps, tokens and
  dollars after that point.

Tokens are the spend measure that every corpus has (the SWE-agent runs record only run totals,
spread over their steps by prompt size); dollars are shown where the model has a known price.

Then three measurements behind ``stuck()``'s defaults:

- **what a nudge costs**: how many solved runs were told they seemed stuck (a note the live
  model would have read) or had a call refused, for each rule;
- **the frontier**: ``stuck()`` with one threshold moved at a time, the same measures in one
  line each, so that a default can be checked against its neighbours;
- **the ceiling**: where the unsolved runs that ended on a limit spend their tokens. For five
  families of plausible rules (the same call with no new result n times in a row; the same
  call n times in a row whatever its result; n failures in a row of one error class, any
  tool; n calls in a row with no new information; the same call with the same result n times
  anywhere in the run), the tokens after the first step at which any of them could fire: at
  their loosest (whatever that cuts), and with each at the loosest setting that cuts at most
  1% of solved runs on its own. Both stop at the first sign, with no note first, so no rule
  of those families, alone or together, saves more than they do.

    python benchmarks/run.py detectors
"""

from __future__ import annotations

import os
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Iterable
from decimal import Decimal
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from anchors import gemini_tool_loop, openhands_stuck
from haltwise.audit.readers import read_paths
from haltwise.audit.replay import replay
from haltwise.audit.report import Totals, format_table
from haltwise.audit.runs import ReadError, Run
from haltwise.engine.detectors import DEFAULTS, result_fingerprint, stuck
from haltwise.engine.detectors._base import Recent
from haltwise.engine.detectors._keys import ActionInfo, analyze_call, analyze_result
from haltwise.engine.events import ModelResponse, ToolCall, ToolResult, TurnStarting
from haltwise.engine.limits import Limit
from haltwise.pricing import Prices

ROOT = Path(__file__).resolve().parents[1]
TRACES = Path(os.environ.get("HALTWISE_TRACES", ROOT.parent / "shared" / "traces"))
#: Corpora whose files do not name their model (from the corpus README).
MODELS = {"swe-agent-gpt4-lite": "gpt-4-0125-preview"}
HALTWISE = "haltwise stuck()"
ANCHORS = ("openhands (content)", "openhands (exit code)", "gemini-cli")
#: The share of solved runs a default may cut.
BUDGET = 0.01


def rules() -> dict[str, Limit]:
    return {
        "openhands (content)": openhands_stuck("content"),
        "openhands (exit code)": openhands_stuck("exit_code"),
        "gemini-cli": gemini_tool_loop(5),
        HALTWISE: stuck(),
    }


def frontier() -> dict[str, Limit]:
    """``stuck()`` with one threshold moved at a time (each beside the default)."""
    moves: dict[str, Iterable[int | None]] = {
        "no_progress": (3, 5, 6, 8),
        "cycle": (3,),
        "repeat": (2,),
        "same_error": (2,),
        "scattered": (3,),
        "paging": (5, 10, 14),
    }
    variants: dict[str, Limit] = {}
    for name, values in moves.items():
        for value in values:
            if value != DEFAULTS[name]:
                variants[f"stuck({name}={value})"] = stuck(**{name: value})  # type: ignore[arg-type]
    return variants


# --------------------------------------------------------------------------------------------
# The ceiling: five families of plausible rules, each as a running count per step

FAMILIES = {
    "repeat": "the same call, no new result, n in a row",
    "same call": "the same call, whatever its result, n in a row",
    "error streak": "n failures in a row of one error class, any tool",
    "no news": "n calls in a row with no new information",
    "redo": "the same call with the same result n times in the run",
}
#: The loosest setting of each family: the first sign of it.
LOOSEST = {"repeat": 2, "same call": 2, "error streak": 2, "no news": 1, "redo": 2}
MOST = 64


class Signs:
    """For one run: the first step at which each family reached each count, and the tokens
    spent by the end of each step. (Plain classes here: ``run.py`` loads benchmarks as
    unregistered modules, which dataclasses cannot resolve.)"""

    __slots__ = ("dollars", "first", "group", "on_limit", "resolved", "spent")

    def __init__(self, group: str, resolved: bool | None, on_limit: bool) -> None:
        self.group = group
        self.resolved = resolved
        self.on_limit = on_limit
        self.first: dict[str, dict[int, int]] = defaultdict(dict)
        self.spent = [0]
        #: Dollars spent by the end of each step, or None when some step has no known price.
        self.dollars: list[Decimal] | None = [Decimal(0)]

    def saved(self, step: int) -> int:
        return self.spent[-1] - self.spent[step]

    def saved_dollars(self, step: int) -> Decimal:
        return Decimal(0) if self.dollars is None else self.dollars[-1] - self.dollars[step]

    def first_step(self, settings: dict[str, int]) -> int | None:
        steps = [self.first[name].get(n) for name, n in settings.items()]
        found = [step for step in steps if step is not None]
        return min(found) if found else None


def signs(run: Run, group: str, pricer: Prices) -> Signs:
    """The five families' counts over one run, judged as the detectors judge (the same keys,
    fingerprints and novelty window as ``stuck()``)."""
    meta = run.meta
    found = Signs(group, meta.resolved, meta.resolved is False and meta.ended_on_limit)
    recent = Recent(20)
    pending: dict[str, ActionInfo] = {}
    step = 0
    last: tuple[int, str | None] | None = None
    counts = dict.fromkeys(FAMILIES, 0)
    best = dict.fromkeys(FAMILIES, 0)
    redone: Counter[tuple[int, str]] = Counter()
    for event in run.events:
        kind = type(event)
        if kind is TurnStarting:
            step += 1
            found.spent.append(found.spent[-1])
            if found.dollars is not None:
                found.dollars.append(found.dollars[-1])
        elif kind is ModelResponse:
            assert isinstance(event, ModelResponse)
            found.spent[-1] += event.input_tokens + event.output_tokens
            cost = event.cost
            if cost is None and event.model:
                cost = pricer.cost(
                    event.model,
                    input_tokens=event.input_tokens,
                    output_tokens=event.output_tokens,
                    cache_read_tokens=event.cache_read_tokens,
                    cache_write_tokens=event.cache_write_tokens,
                )
            if cost is None or found.dollars is None:
                found.dollars = None
            else:
                found.dollars[-1] += cost
        elif kind is ToolCall:
            assert isinstance(event, ToolCall)
            pending[event.call_id] = analyze_call(event)
        elif kind is ToolResult:
            assert isinstance(event, ToolResult)
            action = pending.pop(event.call_id, None)
            if action is None:
                continue
            result = analyze_result(event, action)
            new = recent.is_new(action.key, result, action.edit)
            recent.push(action.key, result)
            again = last is not None and last[0] == action.key
            failed_alike = result.error is not None and last is not None and last[1] == result.error
            counts["repeat"] = counts["repeat"] + 1 if again and not new else 1
            counts["same call"] = counts["same call"] + 1 if again else 1
            counts["error streak"] = (
                0 if result.error is None else counts["error streak"] + 1 if failed_alike else 1
            )
            counts["no news"] = 0 if new else counts["no news"] + 1
            output = result_fingerprint(
                event.content or "", is_error=event.is_error, exit_code=event.exit_code
            )
            redone[action.key, output] += 1
            counts["redo"] = redone[action.key, output]
            for name, count in counts.items():
                for n in range(best[name] + 1, min(count, MOST) + 1):
                    found.first[name][n] = step
                best[name] = max(best[name], count)
            last = (action.key, result.error)
    return found


def loosest_within_budget(runs: list[Signs]) -> dict[str, tuple[int, int]]:
    """Each family's loosest count that cuts at most ``BUDGET`` of solved runs on its own,
    with the number it cuts."""
    solved = [run for run in runs if run.resolved is True]
    allowed = int(BUDGET * len(solved))
    chosen = {}
    for name in FAMILIES:
        for n in range(LOOSEST[name], MOST + 1):
            cut = sum(1 for run in solved if n in run.first[name])
            if cut <= allowed:
                chosen[name] = (n, cut)
                break
    return chosen


# --------------------------------------------------------------------------------------------
# Replay


class Measured:
    __slots__ = ("count", "errors", "nudged", "refused", "signs", "table")

    def __init__(
        self,
        table: dict[str, dict[str, Totals]],
        nudged: Counter[str],
        refused: Counter[str],
        signs: list[Signs],
        count: int,
        errors: list[str],
    ) -> None:
        self.table = table
        #: Per rule: solved runs with a note for the model, and with a refused call.
        self.nudged = nudged
        self.refused = refused
        self.signs = signs
        self.count = count
        self.errors = errors


def measure(limits: dict[str, Limit]) -> Measured:
    """Totals per rule and per group ("corpus / model", and "all"), and each run's signs."""
    # Recorded runs carry no request times: prices that changed over time are unknown.
    pricer = Prices(undated=True)
    names = list(limits)
    table: dict[str, dict[str, Totals]] = {name: defaultdict(Totals) for name in names}
    nudged: Counter[str] = Counter()
    refused: Counter[str] = Counter()
    found: list[Signs] = []
    errors: list[str] = []
    count = 0
    corpora = sorted(path for path in TRACES.iterdir() if path.is_dir())
    for corpus in corpora:
        model = MODELS.get(corpus.name)
        for item in read_paths([corpus], model=model, known_model=pricer.knows):
            if isinstance(item, ReadError):
                errors.append(str(item))
                continue
            # The folder given is the corpus itself: name it as the whole tree would.
            item.meta.corpus = corpus.name
            count += 1
            group = f"{corpus.name} / {item.meta.model or 'unknown model'}"
            found.append(signs(item, group, pricer))
            for name, result in zip(
                names, replay(item, list(limits.values()), pricer=pricer), strict=True
            ):
                table[name][group].add(result)
                table[name]["all"].add(result)
                if item.meta.resolved is True:
                    nudged[name] += result.warn_step is not None
                    refused[name] += result.blocked > 0
    return Measured(table, nudged, refused, found, count, errors)


# --------------------------------------------------------------------------------------------
# Printing


def _line(name: str, totals: Totals, nudged: int, refused: int) -> str:
    limit = totals.on_limit
    solved = totals.solved.runs
    return (
        f"  {name:26} solved cut {totals.solved_cut}/{solved} "
        f"({100 * totals.solved_cut / max(1, solved):.1f}%), nudged {nudged}, refused {refused}; "
        f"on a limit: stopped {limit.stopped}/{limit.runs}, {limit.saved_tokens:,} tokens "
        f"({100 * (limit.share('tokens') or 0):.1f}%), ${limit.saved_cost:,.2f} where priced"
    )


def _ceiling(measured: Measured) -> None:
    runs = measured.signs
    on_limit = [run for run in runs if run.on_limit]
    solved = [run for run in runs if run.resolved is True]
    loosest = dict(LOOSEST)
    budget = loosest_within_budget(runs)
    within = {name: n for name, (n, _) in budget.items()}
    # The README's progress: sympy-17139 scrolls 13 times with a new page each time.
    progress = dict(within, **{"same call": max(within["same call"], 14)})
    settings = {
        "at the first sign": loosest,
        "within the 1% budget": within,
        "within it, paging spared": progress,
    }
    print(
        f"Ceiling: the {len(on_limit)} unsolved runs that ended on a limit, tokens after the "
        "first step at which a rule could fire (a stop at the first sign, no note first)"
    )
    print("  each family on its own, at the loosest count that cuts at most 1% of solved runs:")
    for name, text in FAMILIES.items():
        n, cut = budget[name]
        saved = sum(run.saved(step) for run in on_limit if (step := run.first[name].get(n)))
        print(f"    {name:13} {text:54} n={n:<3} cuts {cut}/{len(solved)}  saves {saved:,}")
    groups = sorted({run.group for run in on_limit})
    table = measured.table
    header = ["group", "runs", "spent", HALTWISE, "best reference", "2x reference"]
    header += list(settings)
    rows = [header]
    for group in [*groups, "all"]:
        members = [run for run in on_limit if group in ("all", run.group)]
        priced = [run for run in members if run.dollars is not None]
        limits = {name: table[name][group].on_limit for name in (*ANCHORS, HALTWISE)}
        best = max(limits[name].saved_tokens for name in ANCHORS)
        best_dollars = max(limits[name].saved_cost for name in ANCHORS)
        tokens = [
            group,
            str(len(members)),
            f"{sum(run.spent[-1] for run in members):,}",
            f"{limits[HALTWISE].saved_tokens:,}",
            f"{best:,}",
            f"{2 * best:,}",
        ]
        dollars = [
            f"  $ ({len(priced)} priced)",
            "",
            f"${sum(run.saved_dollars(0) for run in priced):,.2f}",
            f"${limits[HALTWISE].saved_cost:,.2f}",
            f"${best_dollars:,.2f}",
            f"${2 * best_dollars:,.2f}",
        ]
        for key in settings.values():
            stops = [(run, run.first_step(key)) for run in members]
            tokens.append(f"{sum(run.saved(step) for run, step in stops if step):,}")
            spared = sum((run.saved_dollars(step) for run, step in stops if step), Decimal(0))
            dollars.append(f"${spared:,.2f}")
        rows += [tokens, dollars] if priced else [tokens]
    cut_row = ["solved runs cut", "", "", str(table[HALTWISE]["all"].solved_cut), "", ""]
    for key in settings.values():
        cut_row.append(str(sum(1 for run in solved if run.first_step(key) is not None)))
    rows.append(cut_row)
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    for index, row in enumerate(rows):
        cells = [c.ljust(widths[i]) if i == 0 else c.rjust(widths[i]) for i, c in enumerate(row)]
        print("  " + "  ".join(cells).rstrip())
        if index == 0:
            print("  " + "  ".join("-" * width for width in widths))


def main() -> None:
    if not TRACES.is_dir():
        print(f"skipped: the trace corpus is absent (expected {TRACES})")
        return
    started = time.perf_counter()
    limits = rules()
    variants = frontier()
    measured = measure({**limits, **variants})
    table = measured.table
    print(f"{measured.count} runs from {TRACES} in {time.perf_counter() - started:.1f}s")
    print(f"haltwise defaults: {limits[HALTWISE]!r} = {DEFAULTS}")
    for error in measured.errors:
        print(f"  read error: {error}")
    groups = sorted(next(iter(table.values())))
    for group in groups:
        rows = [(name, table[name][group]) for name in limits]
        print()
        print(format_table(rows, title=f"[{group}]"))
    print()
    print("Summary (all corpora; nudged/refused: solved runs told they seemed stuck / refused):")
    for name in limits:
        print(_line(name, table[name]["all"], measured.nudged[name], measured.refused[name]))
    print()
    print("Frontier: stuck() with one threshold moved (the default is the last line above)")
    for name in variants:
        print(_line(name, table[name]["all"], measured.nudged[name], measured.refused[name]))
    print()
    _ceiling(measured)


if __name__ == "__main__":
    main()
