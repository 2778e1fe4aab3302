"""``haltwise demo``: a governed tool loop against the scripted server, offline and keyless.

The scripted model is stuck: it runs the failing tests again and again. The turn limit warns
the model, then stops the run; the demo shows each step and what the stop saved.
"""

from __future__ import annotations

import argparse

HELP = "Watch haltwise stop a stuck agent (offline: a scripted model, no API key)."


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--max-turns", type=int, default=5, help="the turn limit to demonstrate (default 5)"
    )


def run(args: argparse.Namespace) -> int:
    from decimal import Decimal

    from openai import OpenAI

    import haltwise
    from haltwise.examples.tool_loop import solve
    from haltwise.testing import ScriptedServer, reply, tool_call

    stuck_for = 30
    script = [
        reply(tool_calls=[tool_call("run_tests", {})], usage=(1500 + 400 * i, 60))
        for i in range(stuck_for)
    ]
    model = "gpt-4o-mini"
    limits = haltwise.max_turns(args.max_turns, warn_at=0.6) | haltwise.max_cost("0.50")
    guard = haltwise.Guard(limits)
    print(f"limits: {limits!r}")
    print(f"task:   the scripted model will call run_tests {stuck_for} times if nothing stops it\n")
    with ScriptedServer(script, model=model) as server:
        client = OpenAI(base_url=server.base_url, api_key="not-needed", max_retries=0)
        outcome = solve(client, model, "Make the parser tests pass.", guard)
        served = server.responses_served
    usage = outcome.usage
    print(f"Turns: {usage.turns}/{args.max_turns}  tokens: {usage.total_tokens}")
    print(f"cost:  ${usage.cost}")
    print(f"outcome: {outcome.status} ({outcome.reason})")
    print(f"  {outcome.message}")
    for suggestion in outcome.suggestions:
        print(f"  - {suggestion}")
    left = stuck_for - served
    prices = haltwise.Prices()
    saved = sum(
        (prices.cost(model, input_tokens=1500 + 400 * i, output_tokens=60) or Decimal(0))
        for i in range(served, stuck_for)
    )
    print(f"\nsaved: {left} model calls the stuck agent would have made (${saved:.4f}, {model})")
    return 0
