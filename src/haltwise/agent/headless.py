"""``haltwise run "TASK"``: the agent with no UI, for scripts and CI.

At a limit the run stops (the seeds' silent abort: there is no one to ask), or, where the policy
says ``synthesize``, a tools-free pass writes the best answer first. Progress goes to stderr and
the answer to stdout; with ``--json``, stdout gets the run as ``haltwise.eventlog`` JSON lines:
each event, then the governor's decision on it, and last a ``Label`` line with the outcome
(``{"type": "Label", "outcome": {...}, "exit_code": 3, "sandbox": {...}, ...}``). Unless
``--quiet``, stderr first gets the run's header: the shell sandbox in force.

Exit codes: 0 completed; 3 stopped at a limit (even with a synthesized answer); 130 cancelled
(Ctrl-C); 1 the endpoint or the agent failed; 2 a bad option or setting.
"""

from __future__ import annotations

import argparse
import sys
import threading
from typing import Any, TextIO

from ..engine.decisions import Decision
from ..engine.errors import ConfigurationError
from ..engine.events import Event
from ..engine.outcome import Outcome, Status
from ..eventlog import LABEL_TYPE, decision_to_dict, event_to_dict, outcome_to_dict, write_line
from .loop import Agent, AgentError, Fanout, Listener

__all__ = [
    "EXIT_CANCELLED",
    "EXIT_COMPLETED",
    "EXIT_ERROR",
    "EXIT_LIMIT",
    "JsonLines",
    "exit_code",
    "main",
    "run_to_end",
]

EXIT_COMPLETED = 0
EXIT_ERROR = 1
EXIT_LIMIT = 3
EXIT_CANCELLED = 130


def exit_code(outcome: Outcome | None) -> int:
    """The process's exit code for a run's outcome."""
    if outcome is None or outcome.reason == "error":
        return EXIT_ERROR
    if outcome.status is Status.COMPLETED:
        return EXIT_COMPLETED
    if outcome.status is Status.CANCELLED:
        return EXIT_CANCELLED
    return EXIT_LIMIT


class JsonLines(Listener):
    """The run as ``haltwise.eventlog`` lines (what ``haltwise audit`` reads back): each event,
    then the governor's decision on it; last, a ``Label`` line with the run's outcome, its exit
    code, the model and the shell sandbox in force (``Sandbox.summary``)."""

    def __init__(self, out: TextIO, *, model: str = "") -> None:
        self.out = out
        self.model = model
        self.sandbox: dict[str, Any] | None = None
        self._lock = threading.Lock()

    def write(self, record: dict[str, Any]) -> None:
        with self._lock:
            write_line(self.out, record)
            self.out.flush()

    def event(self, event: Event, decision: Decision) -> None:
        with self._lock:
            write_line(self.out, event_to_dict(event))
            write_line(self.out, decision_to_dict(decision))
            self.out.flush()

    def outcome(self, outcome: Outcome, code: int) -> None:
        self.write(
            {
                "type": LABEL_TYPE,
                "outcome": outcome_to_dict(outcome),
                "exit_code": code,
                "exit_status": outcome.reason,
                "model": self.model,
                "sandbox": self.sandbox,
            }
        )


def run_to_end(agent: Agent, task: str, *, stderr: TextIO | None = None) -> Outcome:
    """``agent.send(task)`` on a worker thread, so that Ctrl-C here cancels the run cleanly
    (outcome ``cancelled``); a second Ctrl-C gives up waiting."""
    result: dict[str, Any] = {}
    done = threading.Event()

    def work() -> None:
        try:
            result["outcome"] = agent.send(task)
        except BaseException as error:  # handed back to the caller's thread
            result["error"] = error
        finally:
            done.set()

    worker = threading.Thread(target=work, name="haltwise-agent", daemon=True)
    worker.start()
    interrupted = False
    # An Event, not Thread.join: a Ctrl-C that interrupts join() can leave the thread looking
    # finished while it still runs.
    while not done.is_set():
        try:
            done.wait(0.25)
        except KeyboardInterrupt:
            if interrupted:
                raise
            interrupted = True
            if agent.cancel("interrupted (Ctrl-C)") and stderr is not None:
                stderr.write("cancelling the run… (Ctrl-C again to quit at once)\n")
    if "error" in result:
        raise result["error"]
    outcome: Outcome = result["outcome"]
    return outcome


def main(args: argparse.Namespace) -> int:
    """``haltwise run``: the exit code."""
    from rich.console import Console

    from .options import build_agent
    from .render import TerminalView, sandbox_line

    task = sys.stdin.read() if args.task == "-" else args.task
    if not task.strip():
        raise ConfigurationError("the task is empty: say what the agent should do")
    stdout, stderr = sys.stdout, sys.stderr
    view = TerminalView(
        Console(file=stderr, stderr=True, highlight=False),
        widget_lines=True,
        resume_hint=lambda run_id: f'continue it: haltwise run --resume {run_id} "…"',
    )
    json_lines = JsonLines(stdout) if args.json else None
    shown: list[Listener] = [] if args.quiet else [view]
    listener = Fanout(*shown, *([json_lines] if json_lines is not None else []))
    setup = build_agent(args, interactive=False, listener=listener, resume=args.resume)
    sandbox = setup.agent.toolbox.sandbox
    if json_lines is not None:
        json_lines.model = setup.agent.model
        json_lines.sandbox = sandbox.summary()
    if not args.quiet:
        view.console.print(sandbox_line(sandbox), soft_wrap=True)
    try:
        try:
            outcome = run_to_end(setup.agent, task, stderr=stderr)
        except KeyboardInterrupt:
            stderr.write("haltwise run: interrupted before the run could stop cleanly\n")
            return EXIT_CANCELLED
        except AgentError as error:
            stderr.write(f"haltwise run: {error}\n")
            failed = setup.agent.governor.outcome
            if json_lines is not None and failed is not None:
                json_lines.outcome(failed, EXIT_ERROR)
            return EXIT_ERROR
        code = exit_code(outcome)
        if json_lines is not None:
            json_lines.outcome(outcome, code)
        elif outcome.partial_output:
            stdout.write(outcome.partial_output.rstrip("\n") + "\n")
        return code
    finally:
        setup.store.close()
