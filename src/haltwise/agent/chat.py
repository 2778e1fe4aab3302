"""``haltwise chat``: the agent in a terminal REPL (prompt_toolkit for input, rich for output).

The prompt stays live while a run goes on, so that:

- the bottom toolbar, the seeds' widget, shows ``Turns: N/M`` (``N/∞`` when unlimited) with
  the session's tokens and dollars, redrawn as the counts change;
- text typed during a run joins it as a mid-run message (no count reset);
- at a limit the same prompt becomes the dialog: the run waits for ``continue``, ``extend N``,
  ``wrap up`` or ``abort`` (and shell commands wait for approval the same way);
- Ctrl-C stops the current run (outcome ``cancelled``); a second Ctrl-C at the prompt exits.

The run itself goes on a worker thread (``Agent.send``); its output is printed above the prompt
through prompt_toolkit's stdout proxy.

Commands: ``/turn-limit N|unlimited``, ``/limits``, ``/budget``, ``/runs``, ``/help``, ``/exit``.
"""

from __future__ import annotations

import argparse
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from prompt_toolkit import PromptSession
from prompt_toolkit.application import create_app_session
from prompt_toolkit.input import Input
from prompt_toolkit.output import Output
from prompt_toolkit.patch_stdout import StdoutProxy
from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..config import parse_turn_limit
from ..drivers.prompters import parse_answer
from ..engine.decisions import Answer, Ask
from ..engine.errors import ConfigurationError
from ..engine.outcome import Outcome, Usage
from .loop import AgentError, AgentStatus, Fanout, Listener
from .options import Setup, build_agent
from .render import CHOICES_LINE, TerminalView

__all__ = ["ChatApp", "main"]

HELP_TEXT = """\
Type a task and press Enter. While the agent works you can type more: it joins the run
(the turn count is not reset). At a limit the prompt asks what to do.

  /turn-limit N|unlimited   set the turn limit (unlimited → N restarts the count; N → M keeps it)
  /limits                   every limit, with its count and cap
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


@dataclass
class _Question:
    """A question the agent's thread waits on; the prompt answers it."""

    #: ``limit`` (an Ask) or ``approve`` (a shell command).
    kind: str
    ask: Ask | None = None
    command: str = ""
    answers: queue.Queue[tuple[str, Any]] = field(default_factory=queue.Queue)


class ChatApp(Listener):
    """The REPL. ``input``/``output`` are prompt_toolkit's (a real terminal by default)."""

    def __init__(
        self,
        args: argparse.Namespace,
        *,
        input: Input | None = None,
        output: Output | None = None,
    ) -> None:
        self.args = args
        self._input = input
        self._output = output
        self._question: _Question | None = None
        self._always_approve = False
        self._armed = False
        self._cancel_requested = False
        self._exit = False
        self._worker: threading.Thread | None = None
        self.session: PromptSession[str] | None = None
        self.console = Console()
        self.setup: Setup | None = None

    # ----------------------------------------------------------------------------------------
    # The loop

    def main(self) -> int:
        with create_app_session(input=self._input, output=self._output):
            proxy = StdoutProxy(raw=True, sleep_between_writes=0.02)
            try:
                return self._main(proxy)
            finally:
                proxy.close()

    def _main(self, proxy: StdoutProxy) -> int:
        self.console = Console(
            file=proxy,  # type: ignore[arg-type]
            force_terminal=proxy.isatty(),
            highlight=False,
            soft_wrap=True,
        )
        view = TerminalView(
            self.console, resume_hint=lambda run_id: f"resume it later: haltwise chat --resume {run_id}"
        )
        self.setup = build_agent(
            self.args,
            interactive=True,
            listener=Fanout(view, self),
            prompter=self._ask_limit,
            approver=self._approve,
            resume=self.args.resume,
        )
        self._banner()
        self.session = PromptSession(
            message=self._message,
            bottom_toolbar=lambda: self.toolbar_text(),
            input=self._input,
            output=self._output,
        )
        try:
            while not self._exit:
                try:
                    text = self.session.prompt()
                except KeyboardInterrupt:
                    self._exit = self._interrupted()
                    continue
                except EOFError:
                    break
                self._armed = False
                self._submit(text)
        finally:
            self._shutdown()
        return 0

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
            Text("/help for commands · Ctrl-C stops a run · Ctrl-C twice or /exit quits", style="dim")
        )

    def _submit(self, text: str) -> None:
        text = text.strip()
        if not text:
            return
        question = self._question
        if question is not None and not text.startswith("/"):
            self._answer(question, text)
            return
        if text.startswith("/"):
            self._command(text)
            return
        assert self.setup is not None
        agent = self.setup.agent
        if agent.running:
            agent.inject(text)
            return
        self._cancel_requested = False
        self._worker = threading.Thread(
            target=self._work, args=(text,), name="haltwise-agent", daemon=True
        )
        self._worker.start()

    def _work(self, prompt: str) -> None:
        assert self.setup is not None
        try:
            self.setup.agent.send(prompt)
        except (AgentError, ConfigurationError) as error:
            self.console.print(Text(f"✗ {error}", style="bold red"))
        except Exception as error:  # a bug: say so, and keep the chat alive
            self.console.print(Text(f"✗ the agent failed: {type(error).__name__}: {error}", style="bold red"))
        finally:
            self._invalidate()

    def _interrupted(self) -> bool:
        """Ctrl-C: stop the run; at an idle prompt, a second one exits. True: exit now."""
        assert self.setup is not None
        agent = self.setup.agent
        if agent.running:
            if self._cancel_requested:
                return True
            self._cancel_requested = True
            self._armed = True
            agent.cancel("interrupted (Ctrl-C)")
            question = self._question
            if question is not None:
                question.answers.put(("cancel", None))
            self.console.print(Text("cancelling… (Ctrl-C again at the prompt exits)", style="magenta"))
            return False
        if self._armed:
            return True
        self._armed = True
        self.console.print(Text("(Ctrl-C again to exit, or /exit)", style="dim"))
        return False

    def _shutdown(self) -> None:
        assert self.setup is not None
        agent = self.setup.agent
        if agent.running:
            agent.cancel("the chat was closed")
            question = self._question
            if question is not None:
                question.answers.put(("cancel", None))
        if self._worker is not None:
            self._worker.join(5.0)
        self.setup.store.close()

    # ----------------------------------------------------------------------------------------
    # Questions from the agent's thread

    def _ask_limit(self, ask: Ask) -> Answer | None:
        question = _Question("limit", ask=ask)
        kind, value = self._wait(question)
        return value if kind == "answer" else None

    def _approve(self, command: str) -> bool:
        if self._always_approve:
            return True
        self.console.print(Text(f"⏸  the agent wants to run: {command}", style="bold yellow"))
        kind, value = self._wait(_Question("approve", command=command))
        return kind == "answer" and bool(value)

    def _wait(self, question: _Question) -> tuple[str, Any]:
        self._question = question
        self._invalidate()
        try:
            return question.answers.get()
        finally:
            self._question = None
            self._invalidate()

    def _answer(self, question: _Question, text: str) -> None:
        if question.kind == "approve":
            word = text.lower()
            if word in ("y", "yes", "a", "always"):
                self._always_approve = word in ("a", "always")
                question.answers.put(("answer", True))
            elif word in ("n", "no"):
                question.answers.put(("answer", False))
            else:
                self.console.print(Text("Please answer y (yes), n (no) or a (always).", style="red"))
            return
        assert question.ask is not None
        answer = parse_answer(text)
        if answer is None or answer.choice not in question.ask.choices:
            self.console.print(
                Text(f"Please answer: {CHOICES_LINE} (e.g. 'c', 'e 10', 'w', 'a')", style="red")
            )
            return
        question.answers.put(("answer", answer))

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
        rows = self.setup.store.runs(10)
        if not rows:
            self.console.print("no stored runs yet")
            return
        for run_id, prompt, status, reason in rows:
            shown = status or "unfinished"
            if reason and reason not in ("completed", status):
                shown += f" ({reason})"
            self.console.print(Text(f"{run_id}  {shown:<28} {prompt[:60]}"))

    # ----------------------------------------------------------------------------------------
    # The prompt and the widget

    def _message(self) -> str:
        question = self._question
        if question is None:
            return "› "
        if question.kind == "approve":
            return "run it? [y]es / [n]o / [a]lways › "
        return "continue / extend N / wrap up / abort › "

    def toolbar_text(self) -> str:
        """The widget: ``Turns: N/M │ tokens │ $``, and what the agent is doing."""
        assert self.setup is not None
        status = self.setup.agent.status()
        return status.widget() + _STATE.get(status.state, "")

    def _invalidate(self) -> None:
        session = self.session
        if session is not None:
            session.app.invalidate()

    # Listener: redraw the widget when the counts change.

    def status(self, status: AgentStatus) -> None:
        self._invalidate()

    def run_ended(self, outcome: Outcome) -> None:
        self._invalidate()


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

