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

    python benchmarks/run.py detectors
"""

from __future__ import annotations

import os
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from anchors import gemini_tool_loop, openhands_stuck
from haltwise.audit.readers import read_paths
from haltwise.audit.replay import replay
from haltwise.audit.report import Totals, format_table
from haltwise.audit.runs import ReadError
from haltwise.engine.detectors import DEFAULTS, stuck
from haltwise.engine.limits import Limit
from haltwise.pricing import Prices

ROOT = Path(__file__).resolve().parents[1]
TRACES = Path(os.environ.get("HALTWISE_TRACES", ROOT.parent / "shared" / "traces"))
#: Corpora whose files do not name their model (from the corpus README).
MODELS = {"swe-agent-gpt4-lite": "gpt-4-0125-preview"}


def rules() -> dict[str, Limit]:
    return {
        "openhands (content)": openhands_stuck("content"),
        "openhands (exit code)": openhands_stuck("exit_code"),
        "gemini-cli": gemini_tool_loop(5),
        "haltwise stuck()": stuck(),
    }


def measure(limits: dict[str, Limit]) -> tuple[dict[str, dict[str, Totals]], int, list[str]]:
    """Totals per rule and per group ("corpus / model", and "all"), runs read, read errors."""
    pricer = Prices()
    names = list(limits)
    table: dict[str, dict[str, Totals]] = {name: defaultdict(Totals) for name in names}
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
            for name, result in zip(
                names, replay(item, list(limits.values()), pricer=pricer), strict=True
            ):
                table[name][group].add(result)
                table[name]["all"].add(result)
    return table, count, errors


def main() -> None:
    if not TRACES.is_dir():
        print(f"skipped: the trace corpus is absent (expected {TRACES})")
        return
    started = time.perf_counter()
    limits = rules()
    table, count, errors = measure(limits)
    print(f"{count} runs from {TRACES} in {time.perf_counter() - started:.1f}s")
    print(f"haltwise defaults: {limits['haltwise stuck()']!r} = {DEFAULTS}")
    for error in errors:
        print(f"  read error: {error}")
    groups = sorted(next(iter(table.values())))
    for group in groups:
        rows = [(name, table[name][group]) for name in limits]
        print()
        print(format_table(rows, title=f"[{group}]"))
    print()
    summary = []
    for name in limits:
        totals = table[name]["all"]
        limit = totals.on_limit
        summary.append(
            f"  {name:24} solved cut {totals.solved_cut}/{totals.solved.runs} "
            f"({100 * totals.solved_cut / max(1, totals.solved.runs):.1f}%); "
            f"unsolved on a limit: {limit.saved_tokens:,} tokens saved "
            f"({100 * (limit.share('tokens') or 0):.1f}%), ${limit.saved_cost:,.2f} where priced"
        )
    print("Summary (all corpora):")
    print("\n".join(summary))


if __name__ == "__main__":
    main()
