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
from ..drivers.prompters import extension_forms, parse_answer
from ..engine.decisions import Answer, Ask
from ..engine.errors import ConfigurationError
from ..engine.outcome import Usage
from .headless import STOP_SIGNALS, taking_over
from .loop import AgentError, AgentStatus, Fanout, Listener
from .options import Setup, build_agent
from .render import MARK, TerminalView, printable, sandbox_line

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
    #: Whether ``answer`` was called: the run's thread reads one answer.
    answered: bool = False

    def answer(self, kind: str, value: Any = None) -> None:
        """``kind``: ``answer`` (with ``value``), ``none`` (no answer) or ``cancel``. Only the
        first answer counts: whichever way the asking ends, it answers once."""
        if not self.answered:
            self.answered = True
            self.answers.put((kind, value))


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
        except Exception as error:  # maybe a signal, hidden by the closed terminal's EIO
            ended = _signal_behind(error)
            if ended is None:
                raise
            self._signal = ended.signum
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
        #: The question being asked, if any: however the asking ends, it is answered, or the
        #: run's thread would wait for the answer forever.
        question: _Question | None = None
        #: What broke the asking: raised once the run ended.
        failure: Exception | None = None
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
                    if cancelled:
                        # The run is being cancelled: no one is asked (after SIGHUP no one can
                        # be); a command is refused, a limit stops it.
                        question.answer("cancel")
                        continue
                    self._put(question)
                except BaseException as leaving:
                    # Each way out cancels the run first, then answers the question it waits on
                    # (if any), so that the run sees the cancel when the answer comes.
                    ended = _signal_behind(leaving)
                    if ended is not None:
                        # SIGTERM or SIGHUP (the terminal closed): the run is cancelled and
                        # checkpointed, then the chat ends; a second one (a closing terminal
                        # may send two) stops waiting, the run recorded as cancelled at once.
                        self._exit = True
                        second = self._signal is not None
                        self._signal = self._signal or ended.signum
                        if not cancelled:
                            cancelled = True
                            agent.cancel(STOP_SIGNALS[signal.Signals(ended.signum).name])
                        _refuse(question)
                        if second:
                            agent.abandon()
                            break
                    elif isinstance(leaving, KeyboardInterrupt):
                        if cancelled:
                            # A Ctrl-C while the cancel goes on: give up waiting, the run
                            # recorded as cancelled at once.
                            self._exit = True
                            _refuse(question)
                            agent.abandon()
                            break
                        cancelled = True
                        self._armed = True
                        agent.cancel("interrupted (Ctrl-C)")
                        _refuse(question)
                        self.console.print(
                            Text("cancelling… (Ctrl-C again at the prompt exits)", style="magenta")
                        )
                    elif isinstance(leaving, Exception):
                        # Asking failed (the terminal gone, EIO, before its SIGHUP came; or a
                        # bug): no answer can come. The run ends cancelled and stored, then the
                        # chat ends, with the signal if one comes, else with the error.
                        self._exit = True
                        failure = failure or leaving
                        if not cancelled:
                            cancelled = True
                            said = f"{type(leaving).__name__}: {leaving}"
                            agent.cancel(f"the chat could not ask ({said})")
                        _refuse(question)
                    else:
                        raise
        if failure is not None and self._signal is None:
            raise failure

    def _work(self, prompt: str) -> None:
        assert self.setup is not None
        try:
            self.setup.agent.send(prompt)
        except (AgentError, ConfigurationError) as error:  # may quote the endpoint's reply
            self.console.print(Text(f"✗ {printable(str(error))}", style="bold red"))
        except Exception as error:  # a bug: say so, and keep the chat alive
            said = printable(f"{type(error).__name__}: {error}")
            self.console.print(Text(f"✗ the agent failed: {said}", style="bold red"))
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
        live.start(refresh=True)
        self._live = live
        try:
            yield
        finally:
            self._live = None
            with contextlib.suppress(OSError):  # the terminal is gone (closed: EIO)
                live.stop()

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
        """Ask on the terminal (the live line paused). Ctrl-C, SIGTERM and SIGHUP leave it
        unanswered: ``run_prompt`` cancels the run, then refuses the question."""
        assert self.session is not None
        live = self._live
        if live is not None:
            live.stop()
        try:
            if question.kind == "approve":
                self._show_command(question.command)
            while True:
                try:
                    text = self.session.prompt(
                        APPROVAL_PROMPT if question.kind == "approve" else DIALOG_PROMPT
                    )
                except EOFError:
                    question.answer("none")
                    return
                answer = self._parse(question, text)
                if answer is not None:
                    question.answer("answer", answer)
                    return
        finally:
            if live is not None:
                live.start()

    def _show_command(self, command: str) -> None:
        """The command to approve, exactly: what a terminal would act on or not show (an escape
        sequence that moves the cursor up and erases, a bidi override, a newline pushing the
        start out of sight) is written out, and said to be."""
        shown = printable(command, exact=True)
        self.console.print(Text(f"⏸  the agent wants to run: {shown}", style="bold yellow"))
        if shown != command:
            self.console.print(
                Text(
                    "   (it holds characters a terminal acts on or hides: shown as \\x1b, "
                    "\\n, \\u202e, … escapes)",
                    style="yellow",
                )
            )

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
        answer = parse_answer(word, question.ask)
        if answer is None or answer.choice not in question.ask.choices:
            forms = extension_forms(question.ask.reason)
            self.console.print(
                Text(f"Please answer c, e N (e.g. e 10), w or a. (N: {forms})", style="red")
            )
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
            self.console.print(Text(f"{run_id}  {shown:<28} {printable(prompt[:60], exact=True)}"))

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


def _signal_behind(error: BaseException) -> _Ended | None:
    """The SIGTERM or SIGHUP that ``error`` is, or came while handling: when the terminal
    closes, the signal may arrive while the prompt tidies up, and the tidying's writes then
    fail (EIO), their error replacing the signal's."""
    seen: set[int] = set()
    cause: BaseException | None = error
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, _Ended):
            return cause
        seen.add(id(cause))
        cause = cause.__context__
    return None


def _refuse(question: _Question | None) -> None:
    """After the run was told to cancel: answer the question it waits on (if any), so that it
    sees the cancel when the answer comes."""
    if question is not None:
        question.answer("cancel")


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
        with contextlib.suppress(termios.error):  # the terminal is gone: nothing to restore
            termios.tcsetattr(descriptor, termios.TCSANOW, saved)
