"""``haltwise chat``: the agent in a terminal REPL (see ``haltwise.agent.chat``)."""

from __future__ import annotations

import argparse

HELP = "Chat with a tool-using agent, with a Turns: N/M widget, /turn-limit and a dialog at limits."


def configure(parser: argparse.ArgumentParser) -> None:
    from ..agent.options import add_agent_arguments

    parser.add_argument(
        "--resume",
        metavar="RUN_ID",
        nargs="?",
        const="last",
        help="continue a stored run with its conversation and counts (no id: the latest)",
    )
    add_agent_arguments(parser)


def run(args: argparse.Namespace) -> int:
    from ._errors import require_extra

    require_extra("agent", "the agent")
    from ..agent.chat import main

    return main(args)
