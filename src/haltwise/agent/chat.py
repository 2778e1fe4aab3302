"""``haltwise chat``: the agent in a terminal REPL (prompt_toolkit for input, rich for output).

- At the prompt, the bottom toolbar is the seeds' widget: ``Turns: N/M`` (``N/∞`` when
  unlimited) with the session's tokens and dollars.
- While a run goes on (on a worker thread: ``Agent.send``), its replies and tool activity print
  as they stream, and the same widget is a live line under them, redrawn as the counts change.
- At a limit the run waits on a dialog: ``continue`` (the count restarts), ``extend N``,
  ``wrap up`` (a tools-free pass writes the best answer) or ``abort``. Shell commands wait for
  approval the same way, unless ``--yes``.
- Ctrl-C stops the current run (outcome ``cancelled``); a second Ctrl-C at the prompt exits.
- SIGTERM and SIGHUP (the terminal closed) stop the current run the same way, checkpointed,
  then end the chat (exit 143 or 129); a second one stops waiting for the run.

Questions from the run's thread are put to the human on the main thread, which owns the
terminal; the run's thread waits for the answer.

Commands: ``/turn-limit N|unlimited``, ``/limits``, ``/budget``, ``/runs``, ``/help``, ``/exit``.
"""

from __future__ import annotations

import argparse
import contextlib
import queue
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from prompt_toolkit import PromptSession
from prompt_toolkit.input import Input
from prompt_toolkit.output import Output
from rich.console import Console
from rich.live import Live
from rich.table import Table
from rich.text import Text

from ..config import parse_turn_limit
from ..drivers.prompters import parse_answer
from ..engine.decisions import Answer, Ask
from ..engine.errors import ConfigurationError
from ..engine.outcome import Usage
from .headless import STOP_SIGNALS, taking_over
from .loop import AgentError, AgentStatus, Fanout, Listener
from .options import Setup, build_agent
from .render import MARK, TerminalView, sandbox_line

__all__ = ["ChatApp", "main"]

HELP_TEXT = """\
Type a task and press Enter; the agent works until it answers or a limit stops it.

  /turn-limit N|unlimited   set the turn limit (unlimited → N restarts the count; N → M keeps it)
  /limits                   every limit, with its count and cap; the shell sandbox
  /budget                   what this run and this session have spent
  /runs                     the latest stored runs (resume one: haltwise chat --resume RUN_ID)
  /help                     this help
  /exit                     quit (also Ctrl-D, or Ctrl-C twice)

At a limit: c (continue: the count restarts), e N (extend by N), w (wrap up: a tools-free
pass writes the best answer), a (abort). Ctrl-C stops the current run."""

_STATE = {
    "idle": "",
    "running": "  ● running · Ctrl-C stops",
    "asking": "  ⏸ waiting for your answer",
    "synthesizing": "  ✎ wrapping up",
}

PROMPT = MARK + " "
DIALOG_PROMPT = "continue / extend N / wrap up / abort " + MARK + " "
APPROVAL_PROMPT = "run it? [y]es / [n]o / [a]lways " + MARK + " "


@dataclass
class _Question:
    """A question the run's thread waits on; the main thread asks it."""

    #: ``limit`` (an Ask) or ``approve`` (a shell command).
    kind: str
    ask: Ask | None = None
    command: str = ""
    answers: queue.Queue[tuple[str, Any]] = field(default_factory=queue.Queue)


class ChatApp(Listener):
    """The REPL. ``input``/``output`` are prompt_toolkit's (the terminal by default);
    ``console`` is where the run prints (stdout by default)."""

    def __init__(
        self,
        args: argparse.Namespace,
        *,
        input: Input | None = None,
        output: Output | None = None,
        console: Console | None = None,
    ) -> None:
        self.args = args
        self._input = input
        self._output = output
        #: Whether this chat owns the process's terminal (not so under tests and benchmarks).
        self._owns_terminal = input is None and console is None
        self.console = console or Console(highlight=False, soft_wrap=True)
        self._questions: queue.Queue[_Question | None] = queue.Queue()
        self._always_approve = False
        self._armed = False
        self._exit = False
        self._live: Live | None = None
        #: The SIGTERM or SIGHUP that ended the chat, if one did.
        self._signal: int | None = None
        self.session: PromptSession[str] | None = None
        self.setup: Setup | None = None

    # ----------------------------------------------------------------------------------------
    # The loop

    def main(self) -> int:
        view = TerminalView(
            self.console,
            resume_hint=lambda run_id: f"resume it later: haltwise chat --resume {run_id}",
        )
        self.setup = build_agent(
            self.args,
            interactive=True,
            listener=Fanout(view, self),
            prompter=self._ask_limit,
            approver=self._approve,
            resume=self.args.resume,
        )
        try:
            with taking_over(("SIGTERM", "SIGHUP") if self._owns_terminal else (), _end):
                self._loop()
        finally:
            self.setup.store.close()
        return 0 if self._signal is None else 128 + self._signal

    def _loop(self) -> None:
        """Prompts until /exit, Ctrl-C twice, end of input, SIGTERM or SIGHUP."""
        try:
            self._banner()
            self.session = PromptSession(
                bottom_toolbar=lambda: self.toolbar_text(),
                input=self._input,
                output=self._output,
            )
            while not self._exit:
                try:
                    text = self.session.prompt(PROMPT)
                except KeyboardInterrupt:
                    if self._armed:
                        break
                    self._armed = True
                    self.console.print(Text("(Ctrl-C again to exit, or /exit)", style="dim"))
                    continue
                except EOFError:
                    break
                self._armed = False
                self._submit(text)
        except _Ended as ended:  # at the prompt: no run to stop
            self._signal = ended.signum

    def _banner(self) -> None:
        assert self.setup is not None
        agent = self.setup.agent
        self.console.print(
            Text(f"haltwise chat · {agent.model} at {self.setup.endpoint.shown}", style="bold")
        )
        self.console.print(
            Text(
                f"workspace {agent.toolbox.workspace.root} · store {self.setup.store.path}",
                style="dim",
            )
        )
        self.console.print(sandbox_line(agent.toolbox.sandbox), soft_wrap=True)
        self.console.print(Text(f"limits: {agent.governor.limits!r}", style="dim"))
        record = self.setup.resumed
        if record is not None:
            status = agent.status()
            self.console.print(
                Text(
                    f"Resumed run {record.run_id} ({record.status or 'unfinished'}"
                    f"{', ' + record.reason if record.reason else ''}): your next message "
                    f"continues it with its counts ({status.widget()}).",
                    style="bold cyan",
                )
            )
        self.console.print(
            Text(
                "/help for commands · Ctrl-C stops a run · Ctrl-C twice or /exit quits", style="dim"
            )
        )

    def _submit(self, text: str) -> None:
        text = text.strip()
        if not text:
            return
        if text.startswith("/"):
            self._command(text)
        else:
            self.run_prompt(text)

    def run_prompt(self, prompt: str) -> None:
        """One run, on a worker thread; this thread shows the live widget, asks the run's
        questions and turns Ctrl-C into a cancel."""
        assert self.setup is not None
        agent = self.setup.agent
        worker = threading.Thread(
            target=self._work, args=(prompt,), name="haltwise-agent", daemon=True
        )
        cancelled = False
        with _no_echo(self._owns_terminal), self._live_widget():
            worker.start()
            # The worker puts None here when the run is over. (Not Thread.join: a Ctrl-C that
            # interrupts join() can leave the thread looking finished while it still runs.)
            while True:
                try:
                    try:
                        question = self._questions.get(timeout=0.5)
                    except queue.Empty:
                        continue
                    if question is None:
                        break
                    self._put(question)
                except _Ended as ended:
                    # SIGTERM or SIGHUP (the terminal closed): the run is cancelled and
                    # checkpointed, then the chat ends; a second one stops waiting.
                    self._exit = True
                    if self._signal is not None:
                        break
                    self._signal = ended.signum
                    if not cancelled:
                        cancelled = True
                        agent.cancel(STOP_SIGNALS[signal.Signals(ended.signum).name])
                except KeyboardInterrupt:
                    if cancelled:
                        self._exit = True  # a Ctrl-C while the cancel goes on: give up waiting
                        break
                    cancelled = True
                    self._armed = True
                    agent.cancel("interrupted (Ctrl-C)")
                    self.console.print(
                        Text("cancelling… (Ctrl-C again at the prompt exits)", style="magenta")
                    )

    def _work(self, prompt: str) -> None:
        assert self.setup is not None
        try:
            self.setup.agent.send(prompt)
        except (AgentError, ConfigurationError) as error:
            self.console.print(Text(f"✗ {error}", style="bold red"))
        except Exception as error:  # a bug: say so, and keep the chat alive
            self.console.print(
                Text(f"✗ the agent failed: {type(error).__name__}: {error}", style="bold red")
            )
        finally:
            self._questions.put(None)

    @contextlib.contextmanager
    def _live_widget(self) -> Iterator[None]:
        live = Live(
            self._widget_line(),
            console=self.console,
            auto_refresh=False,
            transient=True,
            redirect_stdout=False,
            redirect_stderr=False,
        )
        with live:
            self._live = live
            try:
                yield
            finally:
                self._live = None

    # ----------------------------------------------------------------------------------------
    # Questions from the run's thread, asked on this one

    def _ask_limit(self, ask: Ask) -> Answer | None:
        kind, value = self._wait(_Question("limit", ask=ask))
        return value if kind == "answer" else None

    def _approve(self, command: str) -> bool:
        if self._always_approve:
            return True
        kind, value = self._wait(_Question("approve", command=command))
        return kind == "answer" and bool(value)

    def _wait(self, question: _Question) -> tuple[str, Any]:
        self._questions.put(question)
        return question.answers.get()

    def _put(self, question: _Question) -> None:
        """Ask on the terminal (the live line paused); Ctrl-C cancels the run."""
        assert self.session is not None
        live = self._live
        if live is not None:
            live.stop()
        try:
            if question.kind == "approve":
                self.console.print(
                    Text(f"⏸  the agent wants to run: {question.command}", style="bold yellow")
                )
            while True:
                try:
                    text = self.session.prompt(
                        APPROVAL_PROMPT if question.kind == "approve" else DIALOG_PROMPT
                    )
                except EOFError:
                    question.answers.put(("none", None))
                    return
                except KeyboardInterrupt:
                    # Cancel first, so that the run's thread sees it when the answer comes.
                    assert self.setup is not None
                    self.setup.agent.cancel("interrupted (Ctrl-C)")
                    question.answers.put(("cancel", None))
                    raise
                answer = self._parse(question, text)
                if answer is not None:
                    question.answers.put(("answer", answer))
                    return
        finally:
            if live is not None:
                live.start()

    def _parse(self, question: _Question, text: str) -> Any:
        """The answer in ``text``, or None (after saying what is expected)."""
        word = text.strip().lower()
        if question.kind == "approve":
            if word in ("y", "yes", "a", "always"):
                self._always_approve = word in ("a", "always")
                return True
            if word in ("n", "no"):
                return False
            self.console.print(Text("Please answer y (yes), n (no) or a (always).", style="red"))
            return None
        assert question.ask is not None
        answer = parse_answer(word)
        if answer is None or answer.choice not in question.ask.choices:
            self.console.print(Text("Please answer c, e N (e.g. e 10), w or a.", style="red"))
            return None
        return answer

    # ----------------------------------------------------------------------------------------
    # Commands

    def _command(self, line: str) -> None:
        assert self.setup is not None
        name, _, argument = line.partition(" ")
        name = name.lower()
        if name == "/turn-limit":
            self._turn_limit(argument)
        elif name == "/limits":
            self._limits()
        elif name == "/budget":
            self._budget()
        elif name == "/runs":
            self._runs()
        elif name in ("/help", "/?"):
            self.console.print(HELP_TEXT)
        elif name in ("/exit", "/quit"):
            self._exit = True
        else:
            self.console.print(Text(f"unknown command {name}: try /help", style="red"))

    def _turn_limit(self, argument: str) -> None:
        assert self.setup is not None
        try:
            value = parse_turn_limit(argument)
            status = self.setup.agent.set_turn_limit(value)
        except ConfigurationError as error:
            self.console.print(Text(f"✗ {error} (nothing changed)", style="red"))
            return
        self.console.print(Text(f"Turn limit set to {value}. {status.widget()}", style="cyan"))

    def _limits(self) -> None:
        assert self.setup is not None
        table = Table(title="limits (this round)", title_justify="left", box=None)
        table.add_column("limit")
        table.add_column("used", justify="right")
        table.add_column("cap", justify="right")
        table.add_column("scope")
        for standing in self.setup.agent.standing():
            cap = "∞" if standing.cap is None else _number(standing.cap)
            table.add_row(standing.limit, _number(standing.used), cap, standing.scope)
        self.console.print(table)
        self.console.print(sandbox_line(self.setup.agent.toolbox.sandbox), soft_wrap=True)

    def _budget(self) -> None:
        assert self.setup is not None
        run, session = self.setup.agent.usage()
        table = Table(title="spent", title_justify="left", box=None)
        table.add_column("")
        table.add_column("this run", justify="right")
        table.add_column("session", justify="right")
        for label, read in _USAGE_ROWS:
            table.add_row(label, read(run), read(session))
        self.console.print(table)

    def _runs(self) -> None:
        assert self.setup is not None
        rows = self.setup.store.recent_runs(10)
        if not rows:
            self.console.print("no stored runs yet")
            return
        for run_id, prompt, status, reason in rows:
            shown = status or "unfinished"
            if reason and reason not in ("completed", status):
                shown += f" ({reason})"
            self.console.print(Text(f"{run_id}  {shown:<28} {prompt[:60]}"))

    # ----------------------------------------------------------------------------------------
    # The widget

    def toolbar_text(self) -> str:
        """The widget: ``Turns: N/M │ tokens │ $``, and what the agent is doing."""
        assert self.setup is not None
        status = self.setup.agent.status()
        return status.widget() + _STATE.get(status.state, "")

    def _widget_line(self, status: AgentStatus | None = None) -> Text:
        if status is None:
            assert self.setup is not None
            status = self.setup.agent.status()
        return Text(status.widget() + _STATE.get(status.state, ""), style="reverse")

    # Listener: redraw the live widget when the counts change.

    def status(self, status: AgentStatus) -> None:
        live = self._live
        if live is not None:
            live.update(self._widget_line(status), refresh=True)


def _number(value: Any) -> str:
    if isinstance(value, Decimal):
        return f"${value:.4f}"
    if isinstance(value, float):
        return f"{value:.1f}"
    return f"{value:,}" if isinstance(value, int) else str(value)


_USAGE_ROWS: list[tuple[str, Callable[[Usage], str]]] = [
    ("turns", lambda u: str(u.turns)),
    ("model calls", lambda u: str(u.model_calls)),
    ("tool calls", lambda u: str(u.tool_calls)),
    ("input tokens", lambda u: f"{u.input_tokens:,}"),
    ("output tokens", lambda u: f"{u.output_tokens:,}"),
    ("dollars", lambda u: "unknown" if u.cost is None else f"${u.cost:.4f}"),
    ("time", lambda u: f"{u.elapsed:.1f}s"),
]


def main(args: argparse.Namespace) -> int:
    """``haltwise chat``: the exit code."""
    return ChatApp(args).main()


class _Ended(BaseException):
    """SIGTERM or SIGHUP reached the chat: raised in its main thread, as Ctrl-C raises
    ``KeyboardInterrupt``."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _end(signum: int, frame: object) -> None:
    raise _Ended(signum)


@contextlib.contextmanager
def _no_echo(enabled: bool) -> Iterator[None]:
    """While a run goes on, keys typed do not echo over its output (they wait for the prompt)."""
    if not enabled or not sys.stdin.isatty():
        yield
        return
    try:
        import termios
    except ImportError:  # pragma: no cover - not a POSIX terminal
        yield
        return
    descriptor = sys.stdin.fileno()
    saved = termios.tcgetattr(descriptor)
    quiet = list(saved)
    quiet[3] &= ~termios.ECHO
    termios.tcsetattr(descriptor, termios.TCSANOW, quiet)
    try:
        yield
    finally:
        termios.tcsetattr(descriptor, termios.TCSANOW, saved)
