"""``haltwise demo``: the real agent against a scripted model that gets stuck. Offline, keyless.

A recorded session of our own making plays on ``haltwise.testing``'s scripted server: the model
runs the failing test, reads the file, then tries the same edit (whose text does not match the
file) again and again, and at its 40th turn gives up, the bug still there. The real agent (the
one behind ``haltwise chat`` and ``haltwise run``) works in a temporary workspace with its
default limits; the demo shows the widget counting, the nudge, the stop, the outcome, and what
the stop saved, and ends with how to point ``haltwise chat`` at a real endpoint.

A turn limit past the recording (``--max-turns 100 --no-stuck``, or ``unlimited``) is taken, not
refused: whoever turns every stop off asks to see what a run with none costs, and the demo shows
it, every recorded call spent for nothing, rather than an error from a script that ran out.
"""

from __future__ import annotations

import argparse

HELP = "Watch haltwise stop a stuck agent (offline: a scripted model, no API key)."

#: The model the recording is priced as.
MODEL = "gpt-4.1"
#: How long the recorded session goes on when nothing stops it: its last turn gives up.
RECORDED_TURNS = 40

CALC = """\
def add(a, b):
    return a - b  # TODO: check the sign


def mul(a, b):
    return a * b
"""

TEST = """\
from calc import add, mul

assert mul(2, 3) == 6
assert add(2, 3) == 5, f"add(2, 3) returned {add(2, 3)}, expected 5"
print("all tests passed")
"""

#: The recorded model's last turn.
GIVING_UP = "The edit never applies and I have run out of ideas: add() in calc.py still subtracts."

POINTER = """\
Point it at a real model:
  OPENAI_API_KEY=sk-... haltwise chat                         # OpenAI (gpt-4o-mini)
  haltwise chat --base-url http://localhost:11434/v1 --model qwen2.5-coder      # Ollama
  haltwise chat --base-url http://localhost:8000/v1 --model MODEL   # vLLM, llama.cpp...
  haltwise run "make the tests pass" --yes --json             # no UI: scripts and CI"""


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--max-turns",
        default="25",
        metavar="N",
        help=(
            "the turn limit (default 25, as the agent's; with 4 the turn limit stops the run; "
            f"past {RECORDED_TURNS} with --no-stuck nothing does, and the recording runs out)"
        ),
    )
    parser.add_argument(
        "--no-stuck",
        action="store_true",
        help="leave stuck detection out, so that only the turn limit can stop the run",
    )


def recording() -> list[object]:
    """The stuck session, one reply per turn, with the usage a real model would report; the
    last one gives up, so that a run nothing stops ends as a model that runs out of ideas does
    (``completed``), not with an error from a script that ran out of replies."""
    from haltwise.testing import reply, tool_call

    def usage(turn: int) -> tuple[int, int]:
        return (2400 + 380 * turn, 70)

    edit = tool_call(
        "edit_file", {"path": "calc.py", "old_text": "return a-b", "new_text": "return a+b"}
    )
    script: list[object] = [
        reply(
            "I'll run the tests first.",
            tool_calls=[tool_call("run_command", {"command": "python test_calc.py"})],
            usage=usage(0),
        ),
        reply(
            "add() looks wrong. Let me read calc.py.",
            tool_calls=[tool_call("read_file", {"path": "calc.py"})],
            usage=usage(1),
        ),
        reply("add() subtracts. Fixing the sign.", tool_calls=[edit], usage=usage(2)),
    ]
    retries = ["Let me apply the fix again.", "Retrying the edit.", "Applying the fix to add()."]
    for turn in range(3, RECORDED_TURNS - 1):
        script.append(reply(retries[turn % len(retries)], tool_calls=[edit], usage=usage(turn)))
    last = RECORDED_TURNS - 1
    script.append(reply(GIVING_UP, usage=usage(last)))
    return script


def run(args: argparse.Namespace) -> int:
    import os
    import sys
    import tempfile
    from dataclasses import replace
    from decimal import Decimal
    from pathlib import Path

    from ._errors import require_extra

    require_extra("agent", "the agent")
    from openai import OpenAI
    from rich.text import Text

    from haltwise.agent.headless import run_to_end
    from haltwise.agent.loop import Agent
    from haltwise.agent.options import DEFAULT_WARN_AT, agent_limits
    from haltwise.agent.render import MARK, TerminalView
    from haltwise.agent.store import Store
    from haltwise.agent.tools import Toolbox
    from haltwise.config import Settings, parse_count
    from haltwise.pricing import Prices
    from haltwise.testing import Reply, ScriptedServer

    from ._console import PipeConsole

    max_turns = parse_count("--max-turns", args.max_turns)
    settings = Settings(max_turns=max_turns)
    limits = agent_limits(settings, interactive=False)
    if args.no_stuck:
        limits = replace(settings, warn_at=DEFAULT_WARN_AT).limits()
    console = PipeConsole(highlight=False, soft_wrap=True)
    script = recording()
    # The recorded commands say "python": make it this interpreter.
    os.environ["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")
    with tempfile.TemporaryDirectory(prefix="haltwise-demo-") as folder:
        workspace = Path(folder) / "workspace"
        workspace.mkdir()
        (workspace / "calc.py").write_text(CALC)
        (workspace / "test_calc.py").write_text(TEST)
        store = Store(Path(folder) / "haltwise.db")
        with ScriptedServer(script, model=MODEL) as server:  # type: ignore[arg-type]
            console.print(
                Text(
                    "haltwise demo: the real agent, a scripted model that gets stuck "
                    "(offline, no API key)",
                    style="bold",
                )
            )
            console.print(
                Text(
                    f"workspace  {workspace}  (calc.py has a bug; test_calc.py fails)\n"
                    f"model      a recorded session served as {MODEL!r} at {server.base_url}:\n"
                    f"           it tries the same failing edit again and again, for "
                    f"{RECORDED_TURNS} turns if nothing stops it\n"
                    f"limits     {limits!r}",
                    style="dim",
                )
            )
            task = "Make the tests in test_calc.py pass."
            console.print(Text(f"\nyou {MARK} {task}", style="bold"))
            client = OpenAI(base_url=server.base_url, api_key="not-needed", max_retries=0)
            agent = Agent(
                client,
                MODEL,
                Toolbox(workspace, approver=lambda command: True, command_timeout=30),
                limits=limits,
                store=store,
                listener=TerminalView(console, widget_lines=True),
                base_url=server.base_url,
            )
            outcome = run_to_end(agent, task, stderr=sys.stderr).outcome
            served = server.responses_served
        store.close()
    left = [entry for entry in script[served:] if isinstance(entry, Reply)]
    prices = Prices()
    usages = [e.usage for e in left if e.usage is not None]
    tokens = sum(u.total_tokens for u in usages)
    dollars = Decimal(0)
    for u in usages:
        cost = prices.cost(MODEL, input_tokens=u.prompt_tokens, output_tokens=u.completion_tokens)
        dollars += cost or Decimal(0)
    spent = outcome.usage.cost
    paid = f" (${spent:.4f} spent)" if spent is not None else ""
    console.print()
    if not left:
        console.print(Text("What no stop costs", style="bold"))
        console.print(
            Text(
                f"  Nothing stopped the recording: its model made all {served} calls{paid} "
                "and gave up,\n  the bug still there. Without --no-stuck, or with --max-turns "
                f"below {RECORDED_TURNS}, haltwise\n  stops it sooner: run `haltwise demo`.",
            )
        )
    else:
        console.print(Text("What the stop saved", style="bold"))
        console.print(
            Text(
                f"  The recording goes on for {RECORDED_TURNS} turns; haltwise stopped it after "
                f"{served} model calls{paid}.\n"
                f"  Not spent: {len(left)} model calls, {tokens:,} tokens, ${dollars:.2f} at "
                f"{MODEL} prices, and the minutes they take.\n"
                "  A real run is checkpointed like this one, its conversation and counts after "
                "every turn,\n  and resumes where it stopped (haltwise run --resume RUN); the "
                "demo's store and workspace\n  were temporary and are gone.",
            )
        )
    console.print()
    console.print(Text(POINTER, style="cyan"))
    return 0
