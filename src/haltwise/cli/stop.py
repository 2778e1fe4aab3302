"""``haltwise stop RUN`` (or ``--all``): a live run stops at its next event, killed. A run that
is not live (it ended, or no run has that id: ids are given whole) is an error, exit 1, as
``haltwise approve`` of a run that is not running is."""

from __future__ import annotations

import argparse

HELP = "Stop a live run from anywhere (or --all, or --all --key K): it ends cancelled, killed."


def configure(parser: argparse.ArgumentParser) -> None:
    from ._fleet import add_ledger_option

    parser.add_argument("run_id", metavar="RUN", nargs="?", help="the run's id")
    parser.add_argument("--all", action="store_true", help="every live run")
    parser.add_argument("--key", metavar="K", help="with --all: the runs spending budget K")
    parser.add_argument("--reason", metavar="TEXT", default="", help="said in the outcome")
    add_ledger_option(parser)


def run(args: argparse.Namespace) -> int:
    from ..engine.errors import ConfigurationError, LedgerError
    from ._fleet import ledger_from

    if (args.run_id is None) == (not args.all):
        raise ConfigurationError("name one run (haltwise stop RUN) or say --all, not both")
    if args.key is not None and not args.all:
        raise ConfigurationError("--key goes with --all: haltwise stop --all --key team-a")
    ledger = ledger_from(args)
    try:
        reason = args.reason or "stopped with haltwise stop"
        told = ledger.kill(None if args.all else args.run_id, reason, key=args.key)
    finally:
        ledger.close()
    if not told and not args.all:
        raise LedgerError(
            f"run {args.run_id!r} is not live: it has ended, or no run has that id "
            "(see haltwise runs --all; give the id whole)"
        )
    if not told:
        print("no live run to stop")
    for run_id in told:
        print(f"{run_id}: told to stop ({reason})")
    return 0
