"""``haltwise run "TASK"``: the agent with no UI (see ``haltwise.agent.headless``)."""

from __future__ import annotations

import argparse

HELP = "Run the agent on one task with no UI: at a limit it stops (or synthesizes, by policy)."


def configure(parser: argparse.ArgumentParser) -> None:
    from ..agent.options import add_agent_arguments

    parser.add_argument("task", metavar="TASK", help='what the agent should do ("-": read stdin)')
    parser.add_argument(
        "--json", action="store_true", help="one JSON event per line on stdout, then the outcome"
    )
    parser.add_argument("--quiet", "-q", action="store_true", help="no progress on stderr")
    parser.add_argument(
        "--resume",
        metavar="RUN_ID",
        help="continue a stored run with the counts it had ('last': the latest run)",
    )
    add_agent_arguments(parser)
    parser.epilog = (
        "exit codes: 0 completed, 3 stopped at a limit, 1 error, 2 bad option; cancelled: 130 "
        "Ctrl-C, 143 SIGTERM, 129 SIGHUP, 141 output closed (| head)"
    )


def run(args: argparse.Namespace) -> int:
    from ._errors import require_extra

    require_extra("agent", "the agent")
    from ..agent.headless import main

    return main(args)
