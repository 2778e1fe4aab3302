"""How late a run stops after its time limit passes while something is in flight.

``haltwise run --timeout 1`` in this process, through the real ``openai`` client against
ScriptedServer, five times each: a reply that never comes, a reply that comes 3 s late, and a
shell command (``sleep 20``) run with ``--yes``. Reported: the time from the deadline to the
command's return (what a user waits), which includes setting up the agent before its run's clock
starts, so it is an upper bound on the delay from deadline to stop.

``python benchmarks/run.py deadlines``
"""

from __future__ import annotations

import contextlib
import io
import statistics
import tempfile
import time
from pathlib import Path

from haltwise.cli import main as haltwise_main
from haltwise.testing import ScriptedServer, ScriptEntry, reply, tool_call

LIMIT_S = 1.0
REPEATS = 5


def late_by(script: list[ScriptEntry], *extra: str) -> float:
    """Seconds from the deadline to the return of one ``haltwise run``."""
    with tempfile.TemporaryDirectory() as folder, ScriptedServer(script, model="m") as server:
        workspace = Path(folder)
        args = [
            "run",
            "--base-url",
            server.base_url,
            "--model",
            "m",
            "--workspace",
            str(workspace),
            "--store",
            str(workspace / "haltwise.db"),
            "Go.",
            "--timeout",
            str(LIMIT_S),
            "--json",
            "-q",
            *extra,
        ]
        with contextlib.redirect_stdout(io.StringIO()):
            started = time.monotonic()
            code = haltwise_main(args)
            took = time.monotonic() - started
    assert code == 3, f"expected the run to stop at its time limit (exit 3), got {code}"
    return took - LIMIT_S


def main() -> None:
    cases: list[tuple[str, list[ScriptEntry], tuple[str, ...]]] = [
        ("a reply that never comes", [reply("never", delay=30)], ()),
        ("a reply 3 s late", [reply("late", delay=3)], ()),
        (
            "a shell command, sleep 20",
            [reply(tool_calls=[tool_call("run_command", {"command": "sleep 20"})]), reply("x")],
            ("--yes",),
        ),
    ]
    print(f"haltwise run --timeout {LIMIT_S:g}, {REPEATS} runs each: deadline to return, ms")
    print(f"{'in flight at the deadline':28} {'median':>8} {'max':>8}  goal < 1000")
    for name, script, extra in cases:
        lates = [late_by(script, *extra) * 1000 for _ in range(REPEATS)]
        verdict = "PASS" if max(lates) < 1000 else "OVER"
        print(f"{name:28} {statistics.median(lates):8.0f} {max(lates):8.0f}  {verdict}")


if __name__ == "__main__":
    main()
