"""``stuck()`` on real recorded runs, beside the checks agents ship; and what it costs per step.

**Quality** (``../shared/traces`` or ``$HALTWISE_TRACES``; skipped with a message where absent):
every run is replayed through ``stuck()``, through ``stuck()`` with each detector that is off
by default switched on (the measurement that kept it off), and through the OpenHands-like and
Gemini-like rules (``anchors.py``). Per corpus and overall: solved runs cut, and on the unsolved
runs that ended on the agent's own limit the share of their steps, tokens and dollars (priced
runs only) after the stop. Then the goals of the defaults, each with its figure: at least 34%
of those runs' tokens and of their dollars, at most 1% of solved runs cut overall and in every
corpus alone, and no refusal on progress (the same test command from 9 failures to 7 to 5; a
listing whose sizes grew; tests in ``tests/detectors/test_detector_volatile.py``).

**Cost**: a governor with ``stuck()`` is fed runs of 10, 1,000 and 100,000 steps (a step: a
turn with a model response, one tool call with 2 KB of arguments and a 100-line result, all
different, so that no detector stops the run). For each length: the mean time per step over the
last 1,000 steps (or all of them), and the size of every detector's state at the end (deep,
each shared object counted once). Both stay flat as the history grows a thousandfold.

**Per tool call** (issue 15): one ``ToolCall`` and its ``ToolResult`` (a 3-line and a 1 KB
test run, different every call) through ``Governor(limits | stuck())``, beside the same with
the ``main`` revision (``$HALTWISE_BENCH_BASE``) imported from git, in interleaved rounds: µs
per call for each and the median of per-round ratios. Goals: at most 5 µs and 20 µs. The base
revision is imported from its sources, so it runs interpreted: beside a compiled build, the
ratio mixes the two. ``--instructions`` counts instead, under Valgrind (``instructions.py``),
the instructions one such call executes in the build in force, which a loaded machine does not
move; run it with ``PYTHONPATH`` naming another checkout (built in place) to count that one.
It counts where a 3-line call's go too: the limits alone, with one tool detector, and the
analysis of the call and its result alone (``PARTS``).

    python benchmarks/run.py stuck
    python benchmarks/bench_stuck.py --instructions
"""

from __future__ import annotations

import gc
import os
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

sys.path.insert(0, str(Path(__file__).resolve().parent))

import haltwise
import instructions
from anchors import gemini_tool_loop, openhands_stuck
from haltwise.audit.readers import read_paths
from haltwise.audit.replay import replay
from haltwise.audit.report import Saved, Totals
from haltwise.audit.runs import ReadError
from haltwise.engine.decisions import Block, Stop, Warn
from haltwise.engine.detectors import stuck
from haltwise.engine.events import (
    ModelRequest,
    ModelResponse,
    RunStarted,
    ToolCall,
    ToolResult,
    TurnEnded,
    TurnStarting,
)
from haltwise.engine.governor import Governor
from haltwise.engine.limits import Leaf, Limit
from haltwise.pricing import Prices
from haltwise.testing import FakeClock, deep_size
from revisions import load_revision
from tool_outputs import long_result, short_result

ROOT = Path(__file__).resolve().parents[1]
TRACES = Path(os.environ.get("HALTWISE_TRACES", ROOT.parent / "shared" / "traces"))
#: Corpora whose files do not name their model (from the corpus README).
MODELS = {"swe-agent-gpt4-lite": "gpt-4-0125-preview"}
#: The goals of the defaults: a share of on-limit spend saved, a share of solved runs cut.
SAVED_GOAL = 0.34
CUT_BUDGET = 0.01
DEFAULT = "stuck()"


def rules() -> dict[str, Limit]:
    return {
        DEFAULT: stuck(),
        "stuck(no_effect=3)": stuck(no_effect=3),
        "stuck(no_effect=2)": stuck(no_effect=2),
        "stuck(oscillation=2)": stuck(oscillation=2),
        "stuck(recurring=6)": stuck(recurring=6),
        "openhands (content)": openhands_stuck("content"),
        "openhands (exit code)": openhands_stuck("exit_code"),
        "gemini-cli": gemini_tool_loop(5),
    }


def measure_traces(limits: dict[str, Limit]) -> dict[str, dict[str, Totals]]:
    """Totals per rule and per corpus (and ``all``), every run replayed once through all."""
    pricer = Prices(undated=True)
    table: dict[str, dict[str, Totals]] = {name: defaultdict(Totals) for name in limits}
    for corpus in sorted(path for path in TRACES.iterdir() if path.is_dir()):
        runs = read_paths([corpus], model=MODELS.get(corpus.name), known_model=pricer.knows)
        for run in runs:
            if isinstance(run, ReadError):
                continue
            results = replay(run, list(limits.values()), pricer=pricer)
            for name, result in zip(limits, results, strict=True):
                table[name][corpus.name].add(result)
                table[name]["all"].add(result)
    return table


def _share(saved: Saved, part: str) -> str:
    share = saved.share(part)
    return "-" if share is None else f"{100 * share:.1f}%"


def progress_refusals() -> int:
    """Notes, refusals and stops that ``stuck()`` gives on progress of one command: a test
    run from 9 failures down to 1, and a listing whose sizes grow."""
    outputs = [
        [
            f"{failed} failed, {10 - failed} passed in 0.{failed}1s\n"
            + "".join(f"FAILED test_x.py::test_{index}\n" for index in range(failed))
            for failed in (9, 7, 5, 3, 1)
        ],
        [f"-rw-r--r-- 1 ci ci {size} Nov 23 05:41 out.log" for size in (10, 20, 40, 80, 160)],
    ]
    alarms = 0
    for series in outputs:
        governor = Governor(stuck(), clock=FakeClock())
        governor.handle(RunStarted(prompt="fix it", run_id="progress"))
        for index, output in enumerate(series):
            call = ToolCall("bash", {"command": "make check"}, call_id=f"c{index}")
            for event in (TurnStarting(), call, ToolResult("bash", output, call_id=f"c{index}")):
                decision = governor.handle(event)
                alarms += isinstance(decision, Warn | Block | Stop)
            governor.handle(TurnEnded())
    return alarms


def quality() -> None:
    if not TRACES.is_dir():
        print(f"quality: skipped, the trace corpus is absent (expected {TRACES})")
        return
    started = time.perf_counter()
    limits = rules()
    table = measure_traces(limits)
    groups = sorted(table[DEFAULT], key=lambda group: (group == "all", group))
    print(f"Replayed {table[DEFAULT]['all'].runs} runs in {time.perf_counter() - started:.0f}s")
    header = (
        f"{'rule':22} {'corpus':22} {'solved cut':>14} {'on limit':>9} {'stopped':>8} "
        f"{'steps':>7} {'tokens':>7} {'dollars':>8}"
    )
    print(header)
    print("-" * len(header))
    for name in limits:
        for group in groups:
            totals = table[name][group]
            limit = totals.on_limit
            cut = totals.solved_cut
            solved = totals.solved.runs
            print(
                f"{name:22} {group:22} {f'{cut}/{solved}':>8} "
                f"{f'{100 * cut / max(1, solved):.1f}%':>5} {limit.runs:>9} {limit.stopped:>8} "
                f"{_share(limit, 'steps'):>7} {_share(limit, 'tokens'):>7} "
                f"{_share(limit, 'cost'):>8}"
            )
    every = table[DEFAULT]
    limit = every["all"].on_limit
    print("\nGoals of the defaults (stuck()):")
    for part, label in (("tokens", "tokens"), ("cost", "dollars")):
        share = limit.share(part) or 0.0
        verdict = "met" if share >= SAVED_GOAL else "NOT met"
        print(f"  {SAVED_GOAL:.0%} of on-limit {label} saved: {100 * share:.1f}% ({verdict})")
    for group in groups:
        totals = every[group]
        allowed = int(CUT_BUDGET * totals.solved.runs)
        verdict = "met" if totals.solved_cut <= allowed else "NOT met"
        print(
            f"  at most {CUT_BUDGET:.0%} of solved runs cut, {group}: "
            f"{totals.solved_cut}/{totals.solved.runs} (at most {allowed}; {verdict})"
        )
    alarms = progress_refusals()
    print(f"  no alarm on progress of one command: {alarms} ({'met' if not alarms else 'NOT met'})")


LENGTHS = (10, 1_000, 100_000)
TIMED = 1_000


def _step(index: int) -> list[Any]:
    # Numbers of a fixed width, so that every step carries the same amount of text.
    body = "\n".join(
        f"line {index:06d}-{line:03d}: value {index * 131 + line:09d}" for line in range(100)
    )
    call = ToolCall(
        "edit_file",
        {
            "path": f"src/module_{index:06d}.py",
            "content": f"# revision {index:06d}\n" + "x = 1\n" * 340,
        },
        call_id=f"c{index}",
    )
    return [
        TurnStarting(),
        ModelRequest(model=""),
        ModelResponse(text=f"Step {index:06d}: editing module {index:06d}.", tool_calls=1),
        call,
        ToolResult("edit_file", content=body, call_id=f"c{index}"),
        TurnEnded(),
    ]


def measure(length: int) -> tuple[float, int, str]:
    """Mean seconds per step over the last steps, the detectors' state size, the decision."""
    limits = stuck()
    governor = Governor(limits, clock=lambda: 0.0)
    governor.handle(RunStarted(prompt="refactor everything", run_id="bench"))
    timed_from = max(0, length - TIMED)
    started = 0.0
    decision: object = None
    for index in range(length):
        events = _step(index)  # built outside the timed part
        if index == timed_from:
            started = time.perf_counter()
        for event in events:
            decision = governor.handle(event)
    elapsed = time.perf_counter() - started
    leaves: list[Leaf] = list(limits.leaves())
    size = deep_size([governor.slot(leaf).state for leaf in leaves])
    return elapsed / (length - timed_from), size, type(decision).__name__


# --------------------------------------------------------------------------------------------
# One tool call and its result, beside the base revision

BASE_REVISION = os.environ.get("HALTWISE_BENCH_BASE", "main")
#: Calls per timed run (a fresh run before each), interleaved rounds, distinct results per size.
CALLS_PER_RUN = 20
ROUNDS = 300
RESULT_POOL = 4_000
#: Issue 15's goals, µs per tool call and its result.
PER_CALL_GOALS = {"3-line": 5.0, "1 KB": 20.0}


def tool_args(index: int) -> tuple[str, dict[str, Any]]:
    """Call ``index``'s tool and arguments: three tools in turn, arguments that differ."""
    if index % 3 == 0:
        return "bash", {"command": f"pytest -x tests/test_mod_{index % 40:02d}.py -k case_{index}"}
    if index % 3 == 1:
        return "run_tests", {"path": f"tests/test_api_{index % 10}.py", "verbose": True}
    return "read_file", {"path": f"src/app/module_{index}.py"}


def default_stuck(api: Any) -> Any:
    """``stuck()`` as it comes."""
    return api.stuck()


def one_detector(api: Any) -> Any:
    """``stuck()`` with one tool detector (``repeat``) and no other."""
    others = ("same_error", "same_tool_error", "cycle", "scattered", "no_progress")
    return api.stuck(**dict.fromkeys((*others, "monologue", "degenerate")))


def batches(results: list[str]) -> Callable[[], list[str]]:
    """The next ``CALLS_PER_RUN`` of ``results`` at each call, from the start again at the end."""
    position = 0

    def following() -> list[str]:
        nonlocal position
        if position + CALLS_PER_RUN > len(results):
            position = 0
        position += CALLS_PER_RUN
        return results[position - CALLS_PER_RUN : position]

    return following


def per_call_loop(
    api: Any, results: list[str], detectors: Callable[[Any], Any] | None = default_stuck
) -> Callable[[], float]:
    """A timed run: ``CALLS_PER_RUN`` calls and results through ``api``'s Governor with the
    usual limits and ``detectors(api)`` (None: the limits alone); it returns µs per call and
    starts at the next results."""
    limits = (
        api.max_turns(25)
        | api.max_tool_calls(50)
        | api.max_tokens(200_000)
        | api.max_cost("5.00")
        | api.timeout(minutes=30)
    )
    if detectors is not None:
        limits = limits | detectors(api)
    handle = api.Governor(limits).handle
    calls = [(*tool_args(index), f"call_{index}") for index in range(CALLS_PER_RUN)]
    following = batches(results)

    def run() -> float:
        handle(api.RunStarted(prompt="Fix the failing test"))
        outputs = following()
        started = time.perf_counter_ns()
        for (name, arguments, call_id), output in zip(calls, outputs, strict=True):
            handle(api.ToolCall(name, arguments, call_id))
            decision = handle(api.ToolResult(name, output, call_id, exit_code=1))
        elapsed = time.perf_counter_ns() - started
        if type(decision).__name__ in ("Stop", "Block"):  # a run that trips measures nothing
            raise AssertionError(f"stuck() stopped the benchmark's run: {decision}")
        return elapsed / CALLS_PER_RUN / 1_000

    return run


def per_call() -> None:
    base = load_revision(BASE_REVISION, "haltwise_base")
    print(
        f"\nOne tool call and its result through Governor(limits | stuck()), µs per call "
        f"({ROUNDS} interleaved rounds of {CALLS_PER_RUN} calls; median of per-round ratios)"
    )
    if isinstance(base, str):
        print(f"  {BASE_REVISION}: {base}")
    print(f"{'result':8} {'this':>8} {BASE_REVISION:>10} {'ratio':>7}  goal")
    for size, make, offset in (("3-line", short_result, 10_000), ("1 KB", long_result, 50_000)):
        results = [make(offset + index) for index in range(RESULT_POOL)]
        loops = {"this": per_call_loop(haltwise, results)}
        if not isinstance(base, str):
            loops[BASE_REVISION] = per_call_loop(base, results)
        times: dict[str, list[float]] = {name: [] for name in loops}
        for loop in loops.values():
            for _ in range(20):
                loop()
        gc.collect()
        gc.disable()
        try:
            for round_no in range(ROUNDS):
                order = list(loops) if round_no % 2 else list(reversed(loops))
                for name in order:
                    times[name].append(loops[name]())
        finally:
            gc.enable()
        this = statistics.median(times["this"])
        goal = PER_CALL_GOALS[size]
        verdict = f"{goal:.0f} µs {'met' if this <= goal else 'NOT met'}"
        if BASE_REVISION in times:
            then = statistics.median(times[BASE_REVISION])
            ratio = statistics.median(
                a / b for a, b in zip(times["this"], times[BASE_REVISION], strict=True)
            )
            print(f"{size:8} {this:>8.1f} {then:>10.1f} {ratio:>6.2f}x  {verdict}")
        else:
            print(f"{size:8} {this:>8.1f} {'-':>10} {'-':>7}  {verdict}")


#: ``--instructions``: timed runs of ``CALLS_PER_RUN`` calls per phase (the counts barely move).
INSTRUCTION_RUNS = 20


def analysis_loop(results: list[str]) -> Callable[[], float]:
    """``per_call_loop``'s calls and results analysed alone, as the first tool detector to see
    each has it analysed (``_keys.analyze_call``, ``analyze_result``): no governor, no window."""
    from haltwise.engine.detectors._keys import analyze_call, analyze_result

    calls = [(*tool_args(index), f"call_{index}") for index in range(CALLS_PER_RUN)]
    following = batches(results)

    def run() -> float:
        outputs = following()
        started = time.perf_counter_ns()
        for (name, arguments, call_id), output in zip(calls, outputs, strict=True):
            action = analyze_call(ToolCall(name, arguments, call_id))
            analyze_result(ToolResult(name, output, call_id, exit_code=1), action)
        return (time.perf_counter_ns() - started) / CALLS_PER_RUN / 1_000

    return run


#: ``--instructions``: where a 3-line call's instructions go, each counted like the whole: the
#: limits alone; with one tool detector (the analysis of the call and its result comes with
#: the first); and that analysis alone, with the events built.
PARTS: Final = (
    ("3-line, limits alone", lambda results: per_call_loop(haltwise, results, None)),
    ("3-line, one detector", lambda results: per_call_loop(haltwise, results, one_detector)),
    ("3-line, analysis alone", analysis_loop),
)


def phases() -> None:
    """``--phases``, under callgrind (``count_instructions``): the per-call runs of each size,
    then of each of ``PARTS``."""
    loops: list[tuple[str, Callable[[list[str]], Callable[[], float]], Callable[[int], str], int]]
    loops = [
        (size, lambda results: per_call_loop(haltwise, results), make, offset)
        for size, make, offset in (("3-line", short_result, 10_000), ("1 KB", long_result, 50_000))
    ]
    loops += [(part, loop, short_result, 10_000) for part, loop in PARTS]
    runs = []
    for name, loop, make, offset in loops:
        run = loop([make(offset + index) for index in range(2 * INSTRUCTION_RUNS * CALLS_PER_RUN)])
        for _ in range(INSTRUCTION_RUNS):
            run()  # warm, and on to results not seen yet
        runs.append((name, run))
    for name, run in runs:
        instructions.mark(name)
        for _ in range(INSTRUCTION_RUNS):
            run()
    instructions.mark("end")


def count_instructions() -> None:
    counted = instructions.counted(
        Path(__file__), "one tool call and its result through Governor(limits | stuck())"
    )
    if counted is None:
        return
    for name, count in counted:
        print(f"  {name:22} {count / (INSTRUCTION_RUNS * CALLS_PER_RUN) / 1000:>8.1f} k")


def main() -> None:
    quality()
    print()
    print(f"{'steps':>8}  {'µs per step':>12}  {'state bytes':>12}  last decision")
    for length in LENGTHS:
        per_step, size, decision = measure(length)
        print(f"{length:>8,}  {per_step * 1e6:>12.1f}  {size:>12,}  {decision}")
    per_call()


if __name__ == "__main__":
    if "--instructions" in sys.argv:
        count_instructions()
    elif "--phases" in sys.argv:
        phases()
    else:
        main()
