"""haltwise beside its peers, agentarmor, agentguard47 and pydantic-ai, each as it ships.

The peers are installed into a virtualenv of their own, ``benchmarks/.peers-venv`` (built once,
rebuilt when the pinned versions change), with haltwise installed from this checkout
(editable), so that every contender runs in one process and is timed side by side in
interleaved rounds; ``benchmarks/peers/measure.py`` does the timing in that venv and prints the
tables. Each figure is ns per call (median over the rounds) and the median of the per-round
ratios against haltwise. When the venv cannot be built (no package index), one line says why.

Every contender gets the same limit set as far as it has each limit: 25 turns (model
requests), 50 tool calls, 200,000 tokens, $5.00, 30 minutes; the model is gpt-4o, and each run
of 20 calls starts afresh (untimed), as ``bench_governor``'s one-LLM-call loop does.

**One LLM call, recorded and checked**:

- ``haltwise Governor``: a ``ModelRequest`` and a ``ModelResponse`` built and handled per call
  by a ``Governor`` with ``max_turns | max_tool_calls | max_tokens | max_cost | timeout``. The
  request is checked before it is sent (deadline, tokens, and a worst-case cost reserved for
  its prompt and ``max_tokens``), the response is priced by haltwise itself (cache reads at
  their own rate) and counted. Diagnostic: the same with the response's cost given.
- ``agentarmor``: its patched ``chat.completions.create`` (``ArmorCore._wrap_sync`` inside
  ``_with_sdk_flag``, as ``ArmorCore.patch`` installs it) with ``budget="$5.00"`` and
  ``rate_limit="25/hour"``, the SDK method underneath returning a prebuilt response. Its hooks
  build a ``RequestContext`` and ``ResponseContext``; the budget estimates the prompt's cost from
  the characters of every message (so it grows with the conversation: the row sends the
  messages an agent has at each call, two tool results per earlier call), then prices the
  response's input and output tokens from its table, in floats. It has no turn cap (the rate
  limit, a sliding one-hour window, acts as one only for runs shorter than an hour), no
  tool-call cap, no token cap, no time limit, no reservation of the output's worst case, and
  no price for cached input. Diagnostic: the same with a two-message prompt.
- ``pydantic-ai UsageLimits (cost given)``: where pydantic-ai's agent graph checks:
  ``check_before_request`` before the request, then the model's ``RequestUsage`` (built per
  call, its cost given as a provider that bills it would) added to the run's ``RunUsage``, then
  ``check_tokens`` and ``check_cost``. No time limit and no worst-case cost before a request.
- ``agentguard47``: its patched ``chat.completions.create`` (``instrument._traced_chat_method``,
  as ``patch_openai`` installs it) with the tracer and guards ``agentguard.init(budget_usd=5)``
  builds (``default`` profile: ``LoopGuard(5)``, a ``BudgetGuard`` warning at 80%), the budget
  given the token and call caps too, and a started ``TimeoutGuard`` among the tracer's guards;
  its sink drops events (``init``'s default appends each to a JSONL file). Per call: a span,
  ``BudgetGuard.check`` before the request (exhausted or not: no reservation), the cost
  resolved from the response's usage by its price table, an ``llm.result`` event (every event
  runs the tracer's guards), ``BudgetGuard.consume``. No tool-call cap.

**One tool call and its result** (a 3-line test-runner result, and a 1 KB one; every result
different, so no content cache helps; three tools in turn, their arguments varied):

- ``haltwise``: ``ToolCall`` + ``ToolResult`` through a Governor with the limits above and the
  full default ``stuck()`` (repeats, no progress, cycles, same errors, scattered, paging, ...),
  which reads both the call and its result. Diagnostic: ``stuck()`` alone.
- ``pydantic-ai``: ``tool_calls`` counted and ``check_before_tool_call``: no loop detection,
  the result is not looked at.
- ``agentguard47 trace_tool``: the tool wrapped by ``trace_tool`` (a span and a ``tool.result``
  event with the result's first 500 characters, each event through the tracer's guards). Its
  ``LoopGuard`` compares event names and data, not the call's arguments.
- ``agentguard47 LoopGuard+FuzzyLoopGuard``: the two loop guards called by hand before each
  call, as its README shows: the same name and arguments 3 times in a row; one tool 5 times in
  10 calls, or A-B-A-B-A-B. Neither sees the result.
- agentarmor has no per-tool-call hook (its tool firewall checks tool names in the model's
  response, inside the LLM call row), so it has no row here.

What stays unfair: the peers are timed through their SDK patches with a stand-in SDK method (one
Python call, ~50 ns, that haltwise's rows do not pay), and haltwise's events are built in the
timed loop while the SDK's response objects the peers read are prebuilt; agentguard's sink is
cheaper than any it ships; pydantic-ai's agent also deep-copies ``RunUsage`` before each batch
of tool calls, not counted.

    python benchmarks/run.py peers
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
VENV = HERE / ".peers-venv"
SCRIPT = HERE / "peers" / "measure.py"
#: The versions compared (pydantic-ai-slim: the one the adapter tests run).
PINS = ("agentarmor==1.6.3", "agentguard47==2.0.0", "pydantic-ai-slim==2.68.0")
#: Written last when the venv is complete: the pins it was built with, and the digest of
#: haltwise's ``pyproject.toml`` (a dependency haltwise gains is installed with it).
STAMP = VENV / "haltwise-peers.txt"
#: agentguard47 2.0.0 requires it.
PYTHON = (3, 11)


def venv_python() -> Path:
    return VENV / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def _failure(step: str, error: BaseException) -> str:
    stderr = getattr(error, "stderr", None) or ""
    lines = [line for line in str(stderr).splitlines() if line.strip()]
    return f"{step} failed: {lines[-1] if lines else error}"


def ensure_venv() -> str | None:
    """Build ``.peers-venv`` unless it is complete with today's pins; the reason it cannot be
    built, or None."""
    project = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()
    wanted = "\n".join(PINS) + f"\npyproject.toml {project}\n"
    if STAMP.is_file() and STAMP.read_text() == wanted and venv_python().is_file():
        return None
    if sys.version_info < PYTHON:
        needed = ".".join(map(str, PYTHON))
        return f"agentguard47 needs Python {needed}+, this is {sys.version.split()[0]}"
    print(f"(building {VENV.relative_to(ROOT)}: {', '.join(PINS)}, haltwise editable)")
    shutil.rmtree(VENV, ignore_errors=True)
    python = str(venv_python())
    steps = [
        ("creating the venv", [sys.executable, "-m", "venv", str(VENV)]),
        ("installing the peers", [python, "-m", "pip", "install", "--quiet", *PINS]),
        ("installing haltwise", [python, "-m", "pip", "install", "--quiet", "-e", str(ROOT)]),
    ]
    for step, command in steps:
        try:
            subprocess.run(command, check=True, capture_output=True, text=True, timeout=600)
        except (OSError, subprocess.SubprocessError) as error:
            shutil.rmtree(VENV, ignore_errors=True)
            return _failure(step, error)
    STAMP.write_text(wanted)
    return None


def main() -> None:
    reason = ensure_venv()
    if reason is not None:
        print(f"skipped: the peers' venv cannot be built ({reason})")
        return
    sys.stdout.flush()
    done = subprocess.run([str(venv_python()), str(SCRIPT)], check=False)
    if done.returncode:
        print(f"the measuring script failed (exit {done.returncode})")


if __name__ == "__main__":
    main()
