"""Instructions executed per run, counted by Valgrind's callgrind: a measure of CPU work that
the load of a shared machine does not move (there, wall and CPU time scatter by several percent
from one run to the next, as much as the 2% an adapter may add).

A benchmark run with ``--phases`` marks the start of each phase with ``mark(name)``, which
prints the name and calls ``os.getppid()``; ``count(script)`` runs ``python script --phases``
under ``valgrind --tool=callgrind --dump-before=os_getppid``, so that callgrind writes its
counts at each mark, and returns the instructions of each phase. Every thread of the process
counts (the scripted server's too, the same work for every contender). Under callgrind a run
takes some 50 times longer: phases of a few runs are enough, as the counts barely move.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

#: How a phase's name is printed, for ``count`` to read.
PHASE = "haltwise-bench-phase: "


def mark(name: str) -> None:
    """Start the phase ``name`` (``"end"`` ends the last one)."""
    print(f"{PHASE}{name}", flush=True)
    os.getppid()  # callgrind dumps its counts here (--dump-before=os_getppid)


async def run_phases(
    players: Sequence[tuple[str, Callable[[], Awaitable[object]]]], rounds: int, runs: int
) -> None:
    """Warm each contender up, then run it ``runs`` times a phase, ``rounds`` times over in
    turn."""
    for _, run in players:
        for _ in range(2):
            await run()
    for _ in range(rounds):
        for name, run in players:
            mark(name)
            for _ in range(runs):
                await run()
    mark("end")


def count(script: Path) -> list[tuple[str, int]] | str:
    """The instructions of each phase of ``python script --phases``, in order; or why they
    cannot be counted (no valgrind, a Python without symbols)."""
    if shutil.which("valgrind") is None:
        return "valgrind is not installed (apt-get install valgrind)"
    with tempfile.TemporaryDirectory(prefix="haltwise-callgrind-") as folder:
        out = Path(folder) / "callgrind.out"
        done = subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                "--dump-before=os_getppid",
                f"--callgrind-out-file={out}",
                sys.executable,
                str(script),
                "--phases",
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            return f"the run under valgrind failed: {done.stderr.strip()[-500:]}"
        names = [line[len(PHASE) :] for line in done.stdout.splitlines() if line.startswith(PHASE)]
        dumps = sorted(out.parent.glob("callgrind.out.*"), key=lambda p: int(p.suffix[1:]))
        if len(dumps) < len(names):
            return "callgrind found no os_getppid to dump at (a Python built without symbols?)"
        totals = [_summary(dump) for dump in dumps]
    # Dump k (from 1) holds what ran before the k-th mark: phase i (from 0) is dump i + 2.
    return [(name, totals[i + 1]) for i, name in enumerate(names[:-1])]


def counted(script: Path, what: str) -> list[tuple[str, int]] | None:
    """``count(script)``, once a line has said that they are the instructions of ``what`` and
    which haltwise ran; or None once it has said why they cannot be counted."""
    phases = count(script)
    if isinstance(phases, str):
        print(f"(instructions not counted: {phases})")
        return None
    import haltwise

    print(
        f"instructions of {what}; haltwise {haltwise.__version__}, {haltwise._compiled.BUILD} "
        f"build, at {Path(haltwise.__file__).parent}"
    )
    return phases


def _summary(dump: Path) -> int:
    with dump.open() as lines:
        for line in lines:
            if line.startswith("summary:"):
                return int(line.split()[1])
    raise ValueError(f"{dump} has no summary line")


def report(
    phases: list[tuple[str, int]], runs_per_phase: int, baseline: Callable[[str], str]
) -> None:
    """Print the instructions per run of each contender and their ratio to
    ``baseline(name)``'s: the fewest over its phases, since what varies between phases is
    work done once in a while (a worker thread started, a garbage collection), never less."""
    per_run: dict[str, list[float]] = {}
    for name, instructions in phases:
        per_run.setdefault(name, []).append(instructions / runs_per_phase)
    fewest = {name: min(values) for name, values in per_run.items()}
    print(f"  {'':44}{'M instr/run':>12}{'ratio':>9}{'spread':>9}")
    for name, count in fewest.items():
        spread = (max(per_run[name]) - count) / count
        print(
            f"  {name:44}{count / 1e6:>12.2f}{count / fewest[baseline(name)]:>8.4f}x"
            f"{spread * 100:>8.2f}%"
        )
    print("  (spread: how much more the contender's other phases counted)")
