"""``haltwise run "TASK"``: the agent with no UI, for scripts and CI.

At a limit the run stops (the seeds' silent abort: there is no one to ask), or, where the policy
says ``synthesize``, a tools-free pass writes the best answer first. Progress goes to stderr and
the answer to stdout; with ``--json``, stdout gets the run as ``haltwise.eventlog`` JSON lines:
each event, then the governor's decision on it, and last a ``Label`` line with the outcome
(``{"type": "Label", "outcome": {...}, "exit_code": 3, "sandbox": {...}, "warnings": [...],
...}``). Whatever ends a run once it has started (its answer, a limit, an error, a signal, a bug
of ours), the stream ends with exactly one ``Label`` line and the store holds the run's final
status. Unless ``--quiet``, stderr first gets the run's header: the shell sandbox in force.

SIGINT (Ctrl-C), SIGTERM (``timeout``, systemd, CI, container runtimes) and SIGHUP cancel the run
the same way: the call in flight is cut off, the run ends ``cancelled`` and checkpointed; a
second one stops waiting for that. A signal that was ignored when haltwise started (``nohup``,
a background job's Ctrl-C) stays ignored. A reader that goes away (``| head``) cancels the run too.

Exit codes: 0 completed; 3 stopped at a limit (even with a synthesized answer); cancelled: 128 +
the signal (130 Ctrl-C or ``haltwise stop``, 143 SIGTERM, 129 SIGHUP, 141 the output closed);
1 the endpoint or the agent failed; 2 a bad option or setting.
"""

from __future__ import annotations

import argparse
import io
import signal
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TextIO

from ..engine.decisions import Decision
from ..engine.errors import ConfigurationError
from ..engine.events import Event
from ..engine.outcome import Outcome, Status
from ..eventlog import LABEL_TYPE, decision_to_dict, event_to_dict, outcome_to_dict, write_line
from .loop import Agent, Fanout, Listener

__all__ = [
    "EXIT_COMPLETED",
    "EXIT_ERROR",
    "EXIT_LIMIT",
    "STOP_SIGNALS",
    "Ending",
    "JsonLines",
    "exit_code",
    "main",
    "run_to_end",
]

EXIT_COMPLETED = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_LIMIT = 3

#: The signals that cancel a run, and what its outcome then says.
STOP_SIGNALS: dict[str, str] = {
    "SIGINT": "interrupted (Ctrl-C)",
    "SIGTERM": "terminated (SIGTERM)",
    "SIGHUP": "the terminal hung up (SIGHUP)",
}
#: What the outcome of a run says when the reader of its output went away.
OUTPUT_CLOSED = "its output was closed (broken pipe)"


def exit_code(outcome: Outcome | None, signum: int = signal.SIGINT) -> int:
    """The process's exit code for a run's outcome; a cancelled run's is 128 + the signal that
    cancelled it (Ctrl-C's, unless told otherwise)."""
    if outcome is None or outcome.reason == "error":
        return EXIT_ERROR
    if outcome.status is Status.COMPLETED:
        return EXIT_COMPLETED
    if outcome.status is Status.CANCELLED:
        return 128 + signum
    return EXIT_LIMIT


@dataclass(frozen=True)
class Ending:
    """How ``run_to_end`` came back."""

    #: The run's outcome.
    outcome: Outcome
    #: The first stop signal received while the run went on, if any.
    signal: int | None = None
    #: True when a second signal stopped the wait before the run's thread finished.
    abandoned: bool = False

    @property
    def exit_code(self) -> int:
        return exit_code(self.outcome, self.signal or signal.SIGINT)


class JsonLines(Listener):
    """The run as ``haltwise.eventlog`` lines (what ``haltwise audit`` reads back): each event,
    then the governor's decision on it; last, a ``Label`` line with the run's outcome, its exit
    code, the model, the shell sandbox in force (``Sandbox.summary``) and the warnings the run
    gave (``Listener.warning``).

    A closed ``out`` (its reader went away) raises ``BrokenPipeError``, unless ``on_closed`` is
    given: it is then called once, and nothing more is written."""

    def __init__(
        self, out: TextIO, *, model: str = "", on_closed: Callable[[], None] | None = None
    ) -> None:
        self.out = out
        self.model = model
        self.sandbox: dict[str, Any] | None = None
        self.warnings: list[str] = []
        self.on_closed = on_closed
        self.closed = False
        self._lock = threading.Lock()

    def write(self, *records: dict[str, Any]) -> None:
        with self._lock:
            if self.closed:
                return
            try:
                for record in records:
                    write_line(self.out, record)
                self.out.flush()
                return
            except BrokenPipeError:
                self.closed = True
                if self.on_closed is None:
                    raise
        # Outside the lock: the callback cancels the run, which may write again.
        self.on_closed()

    def event(self, event: Event, decision: Decision) -> None:
        self.write(event_to_dict(event), decision_to_dict(decision))

    def warning(self, text: str) -> None:
        self.warnings.append(text)

    def outcome(self, outcome: Outcome, code: int) -> None:
        self.write(
            {
                "type": LABEL_TYPE,
                "outcome": outcome_to_dict(outcome),
                "exit_code": code,
                "exit_status": outcome.reason,
                "model": self.model,
                "sandbox": self.sandbox,
                "warnings": self.warnings,
            }
        )


@contextmanager
def taking_over(names: Iterable[str], handler: Callable[[int, Any], None]) -> Iterator[None]:
    """While the block runs, ``handler`` takes each of the signals ``names`` whose disposition is
    Python's default: an ignored one stays ignored, another program's handler stays. Only on
    the main thread, where Python runs signal handlers."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous: dict[int, Any] = {}
    for name in names:
        number = getattr(signal, name, None)  # no SIGHUP on Windows
        if number is not None and signal.getsignal(number) in (
            signal.SIG_DFL,
            signal.default_int_handler,
        ):
            previous[number] = signal.signal(number, handler)
    try:
        yield
    finally:
        for number, old in previous.items():
            signal.signal(number, old)


def run_to_end(agent: Agent, task: str, *, stderr: TextIO | None = None) -> Ending:
    """``agent.send(task)`` on a worker thread, so that a stop signal here (Ctrl-C, SIGTERM,
    SIGHUP) cancels the run cleanly: its outcome ``cancelled``, checkpointed. A second one stops
    waiting: the run is recorded as cancelled at once (``Agent.abandon``)."""
    result: dict[str, Any] = {}
    done = threading.Event()

    def work() -> None:
        try:
            result["outcome"] = agent.send(task)
        except BaseException as error:  # handed back to the caller's thread
            result["error"] = error
        finally:
            done.set()

    received: list[int] = []
    cancelled = told = False
    with taking_over(STOP_SIGNALS, lambda signum, frame: received.append(signum)):
        worker = threading.Thread(target=work, name="haltwise-agent", daemon=True)
        worker.start()
        # The handler only notes a signal (it must not take locks): this loop acts on it within
        # a quarter second.
        while not done.wait(0.25):
            if not received:
                continue
            first = received[0]
            reason = STOP_SIGNALS[signal.Signals(first).name]
            if len(received) > 1:
                # Both within one wait: the first one's cancel is made before the run is
                # abandoned, which ends it as that cancel would have.
                if not cancelled:
                    agent.cancel(reason)
                return Ending(agent.abandon(), first, abandoned=True)
            if not cancelled:
                if not told and stderr is not None:
                    # Said before the cancel, so that it comes before the outcome it causes.
                    _tell(stderr, "cancelling the run… (once more to quit at once)")
                    told = True
                # Until the run has begun there is nothing to cancel: try again next time.
                cancelled = agent.cancel(reason)
    if "error" in result:
        raise result["error"]
    return Ending(result["outcome"], received[0] if received else None)


def _write_text(stream: TextIO, text: str) -> None:
    """Write ``text``; what the stream's encoding cannot hold (an answer's emoji on a Latin-1
    terminal, a lone surrogate) as a backslash escape, as Python writes to stderr, rather than
    lose the answer to a ``UnicodeEncodeError`` once the run is over."""
    try:
        stream.write(text)
    except UnicodeEncodeError:
        encoding = getattr(stream, "encoding", None) or "utf-8"
        stream.write(text.encode(encoding, "backslashreplace").decode(encoding))


def _tell(stream: TextIO, line: str) -> None:
    try:
        stream.write(line + "\n")
        stream.flush()
    except (OSError, ValueError):
        pass


#: The flag that raises each limit a ``haltwise run`` can be stopped by.
LIMIT_FLAGS = {
    "turn_limit": "--max-turns",
    "tool_call_limit": "--max-tool-calls",
    "model_call_limit": "--max-model-calls",
    "token_limit": "--max-tokens",
    "cost_limit": "--max-cost",
    "time_limit": "--timeout",
}


class _ResumeHint(Listener):
    """The line after an outcome that says how to go on from it (the view asks with the run's
    id; this listener, placed before the view, heard the outcome). A run stopped by a limit
    stops again at once when resumed with the same limit: the hint names the flag to raise."""

    def __init__(self) -> None:
        self.last: Outcome | None = None

    def run_ended(self, outcome: Outcome) -> None:
        self.last = outcome

    def __call__(self, run_id: str) -> str:
        outcome = self.last
        resume = f"haltwise run --resume {run_id}"
        if outcome is None or outcome.limit is None:
            return f'continue it: {resume} "…"'
        if "key=" in outcome.limit:
            return (
                f"it stops again at once while the shared budget is spent ({outcome.limit}); "
                f'when there is budget again: {resume} "…"'
            )
        if "tool=" in outcome.limit:
            return (
                f"it stops again at once under the same cap ({outcome.limit}): raise it under "
                f'[tool_calls] in haltwise.toml, then {resume} "…"'
            )
        flag = LIMIT_FLAGS.get(outcome.reason)
        if flag is None:
            return f'continue it: {resume} "…"'
        return f'to go on, raise the limit that stopped it: {resume} {flag} N "…"'


class _ClosedOutput:
    """Called when a reader of the run's output goes away (``haltwise run --json | head``):
    the run is cancelled, as SIGPIPE would have ended another program."""

    def __init__(self) -> None:
        self.closed = False
        self.agent: Agent | None = None

    def __call__(self) -> None:
        self.closed = True
        if self.agent is not None:
            self.agent.cancel(OUTPUT_CLOSED)


def _read_task(given: str) -> str:
    """The task: ``given``, or stdin's text for ``-``. Bytes that are not text (a file in
    another encoding, a cut UTF-8 character) are read as U+FFFD, as ``Agent.send`` mends those
    of a command line, rather than end the command with a ``UnicodeDecodeError``."""
    if given != "-":
        return given
    stdin = sys.stdin
    if isinstance(stdin, io.TextIOWrapper):
        stdin.reconfigure(errors="replace")
    return stdin.read()


def main(args: argparse.Namespace) -> int:
    """``haltwise run``: the exit code."""
    from ..cli._console import PipeConsole
    from ..cli._errors import EXIT_BROKEN_PIPE, silence_stdout
    from .options import build_agent
    from .render import TerminalView, sandbox_line

    task = _read_task(args.task)
    if not task.strip():
        raise ConfigurationError("the task is empty: say what the agent should do")
    stdout, stderr = sys.stdout, sys.stderr
    closed = _ClosedOutput()
    hint = _ResumeHint()
    view = TerminalView(
        PipeConsole(file=stderr, stderr=True, highlight=False, on_closed=closed),
        widget_lines=True,
        resume_hint=hint,
    )
    json_lines = JsonLines(stdout, on_closed=closed) if args.json else None
    shown: list[Listener] = [] if args.quiet else [hint, view]
    listener = Fanout(*shown, *([json_lines] if json_lines is not None else []))
    setup = build_agent(args, interactive=False, listener=listener, resume=args.resume)
    agent = closed.agent = setup.agent
    sandbox = agent.toolbox.sandbox
    if json_lines is not None:
        json_lines.model = agent.model
        json_lines.sandbox = sandbox.summary()
    if not args.quiet:
        view.console.print(sandbox_line(sandbox), soft_wrap=True)
    try:
        try:
            ending = run_to_end(agent, task, stderr=stderr)
        except BaseException as error:
            # The endpoint failed, or a bug of ours: the run is recorded as ended with an
            # error, and the stream still ends with its outcome. The top level says why.
            failed = agent.governor.outcome
            if json_lines is not None and failed is not None:
                usage = isinstance(error, ConfigurationError)
                json_lines.outcome(failed, EXIT_USAGE if usage else EXIT_ERROR)
            raise
        outcome, code = ending.outcome, ending.exit_code
        if ending.abandoned:
            _tell(stderr, "haltwise run: stopped waiting; the run is recorded as cancelled")
        if json_lines is not None:
            json_lines.outcome(outcome, code)
        elif outcome.partial_output and not closed.closed:
            _write_text(stdout, outcome.partial_output.rstrip("\n") + "\n")
        if closed.closed:
            silence_stdout()
            return EXIT_BROKEN_PIPE
        return code
    finally:
        setup.store.close()
