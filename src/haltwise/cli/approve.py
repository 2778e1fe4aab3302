"""``haltwise approve RUN``: answer the question a run waits on, from anywhere. A run that is
not running (it ended, its process is gone without ending it, or no run has that id) is an
error, exit 1, saying which: its question, if any, is closed. A ledger whose write lock another
process holds (a SQLite file) is waited for a second, then is an error too, exit 1: the question
is still open, and the same command can be given again."""

from __future__ import annotations

import argparse

HELP = "Answer a run waiting at a limit: --continue, --extend N, --wrap-up or --abort."


def configure(parser: argparse.ArgumentParser) -> None:
    from ._fleet import add_ledger_option

    parser.add_argument("run_id", metavar="RUN", help="the run's id (see `haltwise runs`)")
    choice = parser.add_mutually_exclusive_group(required=True)
    choice.add_argument("--continue", dest="choice", action="store_const", const="continue")
    choice.add_argument("--extend", metavar="N", help="raise the limit that tripped by N and go on")
    choice.add_argument("--wrap-up", dest="choice", action="store_const", const="wrap_up")
    choice.add_argument("--abort", dest="choice", action="store_const", const="abort")
    add_ledger_option(parser)


def run(args: argparse.Namespace) -> int:
    from ..config import parse_positive_count
    from ._fleet import ledger_from

    # Bounded as a limit in haltwise.toml is: the raised limit stays a count the ledger holds.
    extend = None if args.extend is None else parse_positive_count("--extend", args.extend)
    choice = "extend" if extend is not None else args.choice
    ledger = ledger_from(args)
    try:
        answered = ledger.answer(args.run_id, choice, extend)
    finally:
        ledger.close()
    told = f"extend by {answered.amount}" if choice == "extend" else choice.replace("_", " ")
    print(f"{args.run_id}: {told} (to {answered.question!r})")
    return 0
