"""What the terminal view prints of the model's and the tools' text: never a character the
terminal would act on (an escape sequence, a C1 control) or hide (a bidi override in a command).

The same in a real terminal: ``test_chat_tmux.py``.
"""

from __future__ import annotations

import io
import json
import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console

from haltwise.agent.render import TerminalView, describe_outcome, printable
from haltwise.agent.tools import ToolOutput
from haltwise.engine.outcome import Outcome, Status, Usage

pytest_plugins = ["agent_fixtures"]

ESC = "\x1b"


def _acts(char: str) -> bool:
    """Whether a terminal acts on ``char`` instead of showing it."""
    return unicodedata.category(char) == "Cc" and char not in "\n\t"


@given(st.text())
def test_printable_text_holds_no_control_but_newline_and_tab(text: str) -> None:
    assert not any(_acts(char) for char in printable(text))


@given(st.text())
def test_exact_text_is_one_line_and_every_character_of_it_shows(text: str) -> None:
    shown = printable(text, exact=True)
    hidden = {"Cc", "Cf", "Zl", "Zp", "Cs"}
    assert not any(unicodedata.category(char) in hidden for char in shown)


@given(st.text(alphabet=st.characters(blacklist_categories=("Cc", "Cf", "Zl", "Zp", "Cs"))))
def test_text_with_nothing_to_hide_is_shown_as_it_is(text: str) -> None:
    assert printable(text) == text
    assert printable(text, exact=True) == text


@pytest.mark.parametrize(
    ("text", "shown", "exact"),
    [
        (f"{ESC}]0;title{ESC}\\ {ESC}[2J", "\\x1b]0;title\\x1b\\ \\x1b[2J", "same"),
        ("\x9b2J and \x07 and \x7f", "\\x9b2J and \\x07 and \\x7f", "same"),
        ("a\r\nb\tc", "a\\r\nb\tc", "a\\r\\nb\\tc"),
        ("rm -rf \u202e/ txt", "rm -rf \u202e/ txt", "rm -rf \\u202e/ txt"),
        ("tag \U000e0041 zw\u200b", "tag \U000e0041 zw\u200b", "tag \\U000e0041 zw\\u200b"),
        ("lone \ud800", "lone \ufffd", "lone \ufffd"),
    ],
)
def test_what_is_written_out(text: str, shown: str, exact: str) -> None:
    assert printable(text) == shown
    assert printable(text, exact=True) == (shown if exact == "same" else exact)


def _view() -> tuple[TerminalView, io.StringIO]:
    sink = io.StringIO()
    console = Console(file=sink, force_terminal=True, color_system=None, width=200)
    return TerminalView(console), sink


def test_the_view_prints_no_escape_sequence_from_the_model_or_a_tool() -> None:
    view, sink = _view()
    view.text(f"hello {ESC}]0;PWNED{ESC}\\ {ESC}[2J")
    view.text(f"\r\nsecond \x9b2J line{ESC}[1A")
    view.text_done()
    arguments = json.dumps({"command": f"touch EVIL; {ESC}[2K\u202e echo harmless"})
    view.tool_started(f"run_command{ESC}[1A", arguments, "1")
    view.tool_started("run_command", f"not json {ESC}[2K", "2")
    view.tool_finished("run_command", ToolOutput(f"{ESC}]0;PWNED{ESC}\x07 out"), "1")
    view.tool_finished("run_command", ToolOutput(f"failed\n{ESC}[31mboom", True), "2")
    view.blocked(f"x{ESC}[2K", f"because {ESC}[2K", "3")
    view.note(f"note {ESC}[2J")
    view.warning(f"warning {ESC}[2J")
    view.injected(f"typed {ESC}[2J")
    printed = sink.getvalue()
    assert ESC not in printed and "\x9b" not in printed and "\x07" not in printed
    for expected in (
        "hello \\x1b]0;PWNED\\x1b\\ \\x1b[2J",
        "second \\x9b2J line\\x1b[1A",  # the CR of CRLF ended the line: not written out
        "run_command\\x1b[1A(",
        "\\u202e echo harmless",
        "not json \\x1b[2K",
        "\\x1b]0;PWNED\\x1b\\x07 out",
        "✗ \\x1b[31mboom",
        "refused x\\x1b[2K: because \\x1b[2K",
    ):
        assert expected in printed
    assert "hello" in printed.splitlines()[0] and "\\r" not in printed


def test_an_outcome_from_an_endpoint_is_printed_written_out() -> None:
    outcome = Outcome(
        status=Status.ABANDONED,
        reason="error",
        message=f"the endpoint said {ESC}[2J{ESC}]0;PWNED\x07",
        usage=Usage(),
        suggestions=(f"try {ESC}[2J",),
    )
    sink = io.StringIO()
    console = Console(file=sink, force_terminal=True, color_system=None, width=200)
    for line in describe_outcome(outcome):
        console.print(line)
    printed = sink.getvalue()
    assert ESC not in printed and "\x07" not in printed
    assert "the endpoint said \\x1b[2J\\x1b]0;PWNED\\x07" in printed
    assert "try \\x1b[2J" in printed
