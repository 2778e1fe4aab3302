"""How a run looks on a terminal: a ``Listener`` that prints with rich.

Used by the chat (above its prompt), by the demo, and by ``haltwise run`` (on stderr, so that
stdout keeps only the answer). Model text is printed line by line as it streams: a partial line
would collide with the chat's prompt, which is redrawn below the output.

Whatever came from outside (the model's text, a tool call's name and arguments, a tool's output,
an endpoint's error) passes through ``printable`` before it is printed: a terminal obeys the
escape sequences in what it is sent (clear the screen, move the cursor up, set the window
title), so text a model wrote could otherwise rewrite what the person reads, and disguise the
command they are asked to approve.
"""

from __future__ import annotations

import json
import re
import unicodedata
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.text import Text

from ..engine.decisions import Ask, Decision, Stop
from ..engine.events import Event, TurnStarting
from ..engine.outcome import Outcome, Status
from .loop import AgentStatus, Listener, without_lone_surrogates
from .tools import ToolError, ToolOutput, _decode

if TYPE_CHECKING:
    from collections.abc import Callable

    from .sandbox import Sandbox

__all__ = ["MARK", "TerminalView", "describe_outcome", "printable", "sandbox_line", "short"]

_STATUS_STYLE = {
    Status.COMPLETED: "bold green",
    Status.COMPLETED_WITH_WARNINGS: "bold yellow",
    Status.ABANDONED: "bold red",
    Status.TIMED_OUT: "bold red",
    Status.CANCELLED: "bold magenta",
}

#: The prompt's mark (a single right-pointing angle quotation mark).
MARK = "\u203a"
CHOICES_LINE = "[c]ontinue  ·  [e]xtend N  ·  [w]rap up  ·  [a]bort"


#: What a terminal acts on instead of showing: the C0 controls but newline and tab (ESC starts
#: every escape sequence), DEL, and the C1 controls (U+009B is an ESC [ of its own).
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
#: Where text must read exactly as it is (a command to approve), also newline and tab, and what
#: shows as nothing or moves other text: format characters (bidi overrides and isolates,
#: zero-width characters, tag characters) and the line and paragraph separators.
_HIDDEN = frozenset({"Cc", "Cf", "Zl", "Zp"})
_NAMED = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}


def printable(text: str, *, exact: bool = False) -> str:
    """``text`` safe to print: each control character written out as an escape (``\\x1b``,
    ``\\r``, ``\\x9b``), so that it shows instead of acting; newlines and tabs kept. With
    ``exact``, newlines, tabs and the invisible format characters (``\\u202e``) are written out
    too: the text shows on one line, every character of it visible."""
    text = without_lone_surrogates(text)
    if exact:
        if text.isprintable():  # the common case, checked at C speed
            return text
        return "".join(
            _escape(char) if unicodedata.category(char) in _HIDDEN else char for char in text
        )
    if _CONTROLS.search(text) is None:
        return text
    return _CONTROLS.sub(lambda match: _escape(match.group()), text)


def _escape(char: str) -> str:
    named = _NAMED.get(char)
    if named is not None:
        return named
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def short(text: str, limit: int = 100) -> str:
    """One line of at most ``limit`` characters."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def sandbox_line(sandbox: Sandbox) -> Text:
    """The sandbox in force, for the run's header and ``/limits``: a warning when ``auto``
    found no working bubblewrap."""
    warn = not sandbox.confined and sandbox.mode == "auto"
    return Text(f"sandbox: {sandbox.describe()}", style="bold yellow" if warn else "dim")


def _arguments(raw: str) -> str:
    """A tool call's arguments on one line: ``name=value, ...``, decoded as the tool decodes
    them; what the tool cannot decode (not JSON, nested too deeply, not an object) as it came.
    A value may hold a lone surrogate (JSON's ``"\\ud800"``), which no terminal can print, or
    an escape sequence (JSON's ``"\\u001b"``): both are written out (``printable``)."""
    try:
        arguments = _decode(raw)
        # Encoding a value again may recurse deeper than decoding it did.
        shown = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in arguments.items())
    except (ToolError, RecursionError):
        shown = raw
    # Cut before writing out: a write_file call's arguments may be megabytes long.
    return short(printable(short(shown, 90), exact=True), 90)


class TerminalView(Listener):
    """Prints a run as it happens.

    ``widget_lines``: print the ``Turns: N/M`` widget at each turn (where there is no toolbar
    to show it: the demo, ``haltwise run``). ``show_text``: print the model's text.
    """

    def __init__(
        self,
        console: Console,
        *,
        widget_lines: bool = False,
        show_text: bool = True,
        resume_hint: Callable[[str], str] | None = None,
    ) -> None:
        self.console = console
        self.widget_lines = widget_lines
        self.show_text = show_text
        self.resume_hint = resume_hint
        self._line = ""
        self._turn_began = False
        self._synthesizing = False
        self._refused: set[str] = set()

    # Text, line by line.

    def text(self, delta: str) -> None:
        if not self.show_text:
            return
        self._line += delta
        if "\n" in self._line:
            done, self._line = self._line.rsplit("\n", 1)
            for line in done.split("\n"):
                self._print_text(line)

    def text_done(self) -> None:
        if self._line:
            self._print_text(self._line)
        self._line = ""

    def _print_text(self, line: str) -> None:
        style = "italic" if self._synthesizing else ""
        # A line that ended in CRLF keeps its CR here: that one is a line break, not text.
        self.console.print(Text(printable(line.removesuffix("\r")), style=style), soft_wrap=True)

    # The rest.

    def status(self, status: AgentStatus) -> None:
        if self._turn_began and self.widget_lines:
            self.console.print(Text(status.widget(), style="bold cyan"))
        self._turn_began = False

    def event(self, event: Event, decision: Decision) -> None:
        if type(event) is TurnStarting and not isinstance(decision, Stop):
            self._turn_began = True

    def tool_started(self, name: str, arguments: str, call_id: str) -> None:
        line = Text("  ⚙ ", style="blue")
        line.append(printable(name, exact=True), style="bold blue")
        line.append(f"({_arguments(arguments)})", style="blue")
        self.console.print(line, soft_wrap=True)

    def tool_finished(self, name: str, output: ToolOutput, call_id: str) -> None:
        if call_id in self._refused:
            self._refused.discard(call_id)
            return
        first = printable(short(_gist(output) or "(no output)", 110))
        if output.is_error:
            self.console.print(Text(f"    ✗ {first}", style="red"), soft_wrap=True)
        else:
            lines = output.content.strip().count("\n") + 1
            more = f"  (+{lines - 1} lines)" if lines > 1 else ""
            self.console.print(Text(f"    ✓ {short(first, 80)}{more}", style="dim"), soft_wrap=True)

    def blocked(self, name: str, reason: str, call_id: str = "") -> None:
        self._refused.add(call_id)
        self.console.print(
            Text(
                f"    ⛔ haltwise refused {printable(name, exact=True)}: {printable(reason)}",
                style="bold red",
            )
        )

    def note(self, text: str) -> None:
        self.console.print(Text(f"  ⚠ haltwise → model: {printable(text)}", style="bold yellow"))

    def warning(self, text: str) -> None:
        self.console.print(Text(f"  ⚠ {printable(text)}", style="yellow"), soft_wrap=True)

    def injected(self, text: str) -> None:
        self.console.print(
            Text(f"  ↳ you, mid-run (no count reset): {printable(short(text))}", style="cyan")
        )

    def asking(self, ask: Ask) -> None:
        title = ask.reason.replace("_", " ").capitalize()
        self.console.print(
            Text(f"⏸  {title} reached — {printable(ask.question)}", style="bold yellow")
        )
        self.console.print(Text(f"   {CHOICES_LINE}", style="yellow"))

    def synthesizing(self, reason: str) -> None:
        self._synthesizing = True
        self.console.print(
            Text(
                "  ✎ wrapping up: a tools-free pass writes the best answer from what was gathered",
                style="bold yellow",
            )
        )

    def run_ended(self, outcome: Outcome) -> None:
        self._synthesizing = False
        for line in describe_outcome(outcome, self.resume_hint):
            self.console.print(line, soft_wrap=True)


def _gist(output: ToolOutput) -> str:
    """The line of a tool's output that says the most: for a failed command, its last line."""
    text = output.content.strip()
    if output.is_error and "\n" in text:
        lines = [line for line in text.splitlines() if line.strip() and not line.startswith("[")]
        if lines:
            return lines[-1]
    return text


def describe_outcome(
    outcome: Outcome, resume_hint: Callable[[str], str] | None = None
) -> list[Any]:
    """The outcome as a few lines: status and reason, the message, the usage, what next."""
    usage = outcome.usage
    head = Text("■ ", style=_STATUS_STYLE.get(outcome.status, "bold"))
    head.append(str(outcome.status), style=_STATUS_STYLE.get(outcome.status, "bold"))
    if outcome.reason not in ("completed", str(outcome.status)):
        head.append(f" ({outcome.reason})", style="bold")
    head.append(f"  run {outcome.run_id}", style="dim")
    lines: list[Any] = [head]
    if outcome.status is not Status.COMPLETED:
        lines.append(Text(f"  {printable(outcome.message)}"))
    cost = "unknown" if usage.cost is None else f"${usage.cost:.4f}"
    lines.append(
        Text(
            f"  {_count(usage.turns, 'turn')} · {_count(usage.model_calls, 'model call')} · "
            f"{_count(usage.tool_calls, 'tool call')} · {usage.total_tokens:,} tokens · {cost} · "
            f"{usage.elapsed:.1f}s",
            style="dim",
        )
    )
    for suggestion in outcome.suggestions:
        if suggestion.startswith("Resume from checkpoint"):
            continue
        lines.append(Text(f"  → {printable(suggestion)}", style="dim"))
    if outcome.checkpoint is not None and resume_hint is not None:
        lines.append(Text(f"  → {resume_hint(outcome.run_id)}", style="dim"))
    return lines


def _count(number: int, thing: str) -> str:
    return f"{number} {thing}" if number == 1 else f"{number:,} {thing}s"
