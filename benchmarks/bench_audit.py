"""``haltwise audit`` over real recorded runs: recorded steps per second, and where they go.

Over ``../shared/traces`` (or ``$HALTWISE_TRACES``; skipped with a message where absent), timed
side by side in one run, since the machines are shared and noisy:

- **parsing alone**: every file read into events by this revision's readers and by the base
  revision's (``$HALTWISE_BENCH_BASE``, main by default, imported from git), the best of three
  interleaved rounds;
- **the whole audit** as a user runs it (``haltwise audit TRACES``, the report included), at
  the base revision and here with ``--jobs 1`` and ``--jobs 2``; the reports must be the same
  byte for byte;
- the share of one process's time that is parsing, and the rest (replay through the governor
  and its detectors, which dominates, and the report);
- **decoding alone**: ``orjson.loads`` of every file (a JSON Lines file line by line), the
  files read into memory first, the best of three rounds: the floor under any reader of this
  corpus in Python, before a single event is built.

The base revision is imported from its sources, so it runs interpreted: beside a compiled build
its figures mix the two (``HALTWISE_PURE=1`` compares the pure builds). The audits run in this
process, once its imports are done: the interpreter's start-up is in none of the figures.

Then the goal of issue 15 with its figure: at least 100,000 recorded steps per second on one
core. A recorded step is one turn of a run (a model response and its tool calls).

    python benchmarks/run.py audit
"""

from __future__ import annotations

import contextlib
import importlib
import io
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import orjson

import haltwise
from revisions import load_revision

ROOT = Path(__file__).resolve().parents[1]
TRACES = Path(os.environ.get("HALTWISE_TRACES", ROOT.parent / "shared" / "traces"))
GOAL = 100_000
BASE_REVISION = os.environ.get("HALTWISE_BENCH_BASE", "main")


def parse_all(package: Any, traces: Path) -> int:
    """Every run under ``traces`` read by ``package``'s readers; its recorded steps."""
    readers = _module(package, "audit.readers")
    reader = readers.Reader(known_model=_module(package, "pricing").Prices(undated=True).knows)
    steps = 0
    for path, corpus in readers.find_files([traces]):
        for item in reader.read(path, corpus):
            events = getattr(item, "events", ())
            steps += sum(1 for event in events if type(event).__name__ == "TurnStarting")
    return steps


def decode_all(traces: Path) -> float:
    """Seconds to decode every file under ``traces`` with orjson, its bytes already in memory;
    the best of three rounds."""
    blobs = [
        path.read_bytes() for path, _ in _module(haltwise, "audit.readers").find_files([traces])
    ]
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        for blob in blobs:
            try:
                orjson.loads(blob)
            except orjson.JSONDecodeError:  # JSON Lines
                for line in blob.splitlines():
                    if line.strip():
                        orjson.loads(line)
        best = min(best, time.perf_counter() - started)
    return best


def audit_report(package: Any, traces: Path, *options: str) -> str:
    """``haltwise audit TRACES`` as ``package`` runs it: its report, standard error discarded."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        _module(package, "cli").main(["audit", str(traces), "--no-progress", *options])
    return out.getvalue()


def _module(package: Any, name: str) -> Any:
    return importlib.import_module(f"{package.__name__}.{name}")


def timed(work: Callable[[], Any]) -> tuple[float, Any]:
    started = time.perf_counter()
    answer = work()
    return time.perf_counter() - started, answer


def main() -> None:
    if not TRACES.is_dir():
        print(f"skipped: the trace corpus is absent (expected it at {TRACES}, ../shared/traces)")
        return
    base = load_revision(BASE_REVISION, "haltwise_base")
    if isinstance(base, str):
        print(f"{BASE_REVISION} is not measured: {base}")
        base = None
    steps = parse_all(haltwise, TRACES)
    cpus = os.cpu_count() or 1
    print(f"{TRACES}: {steps:,} recorded steps; {cpus} CPUs (shared: the figures are noisy)")

    rows: list[tuple[str, float]] = [
        ("decoding alone (orjson, bytes in memory)", decode_all(TRACES))
    ]
    readers: dict[str, Any] = {"this revision": haltwise}
    if base is not None:
        readers = {BASE_REVISION: base, **readers}
    best = dict.fromkeys(readers, float("inf"))
    for _ in range(3):  # interleaved: the machine's load moves between rounds
        for name, package in readers.items():
            started = time.perf_counter()
            read = parse_all(package, TRACES)
            best[name] = min(best[name], time.perf_counter() - started)
            assert read == steps, f"{name} reads {read} steps, this revision {steps}"
    rows += [(f"parsing alone, {name}", seconds) for name, seconds in best.items()]
    parsing = best["this revision"]
    reports: dict[str, str] = {}
    if base is not None:
        seconds, reports[BASE_REVISION] = timed(lambda: audit_report(base, TRACES))
        rows.append((f"haltwise audit, {BASE_REVISION}", seconds))
    one, reports["--jobs 1"] = timed(lambda: audit_report(haltwise, TRACES, "--jobs", "1"))
    rows.append(("haltwise audit --jobs 1", one))
    seconds, reports["--jobs 2"] = timed(lambda: audit_report(haltwise, TRACES, "--jobs", "2"))
    rows.append(("haltwise audit --jobs 2", seconds))

    width = max(len(name) for name, _ in rows)
    print(f"{'':{width}}  {'seconds':>8}  {'steps/s':>9}")
    for name, seconds in rows:
        print(f"{name:{width}}  {seconds:8.2f}  {steps / seconds:9,.0f}")
    same = len(set(reports.values())) == 1
    print(f"reports byte-identical ({', '.join(reports)}): {'yes' if same else 'NO'}")
    print(
        f"one process: parsing {parsing / one:.0%} of the audit's time, replay through the "
        f"governor and its detectors and the report {1 - parsing / one:.0%}"
    )
    verdict = "met" if steps / one >= GOAL else "not met"
    print(
        f"goal, at least {GOAL:,} recorded steps/s on one core: {verdict} "
        f"({steps / one:,.0f} steps/s; parsing alone reaches {steps / parsing:,.0f}, "
        f"decoding the JSON alone {steps / rows[0][1]:,.0f})"
    )
