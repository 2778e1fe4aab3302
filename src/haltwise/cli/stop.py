"""``haltwise stop RUN`` (or ``--all``): a live run stops at its next event, killed. A run that
is not live (it ended, or no run has that id: ids are given whole) is an error, exit 1, as
``haltwise approve`` of a run that is not running is; so is a run that is gone (not heard from
for a minute: its process died without ending it), which nothing would hear. ``--all`` tells
every live run, and says which of them are gone. A ledger whose write lock another process
holds (a SQLite file) is waited for a second, then is an error too, exit 1, as for ``haltwise
approve``: no run was told, and the same command can be given again."""

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
    import sys
    import time

    from ..engine.errors import ConfigurationError, LedgerError
    from ..engine.ledger import unheard
    from ._fleet import ledger_from

    if args.run_id is None and not args.all:
        raise ConfigurationError(
            "say which runs to stop: a run's id (haltwise stop RUN; haltwise runs lists them), "
            "--all for every live run, or --all --key K for those spending budget K"
        )
    if args.run_id is not None and args.all:
        raise ConfigurationError("name one run (haltwise stop RUN) or say --all, not both")
    if args.key is not None and not args.all:
        raise ConfigurationError("--key goes with --all: haltwise stop --all --key team-a")
    ledger = ledger_from(args)
    try:
        reason = args.reason or "stopped with haltwise stop"
        if not args.all:
            info = ledger.run_info(args.run_id)
            now = time.time()
            if info is not None and info.gone(now, ledger.gone_after):
                raise LedgerError(
                    f"run {args.run_id!r} is gone: {unheard(info, now, ledger.gone_after)}, so "
                    "its process is not running to hear a stop (see haltwise runs)"
                )
        told = ledger.kill(None if args.all else args.run_id, reason, key=args.key)
        # Of the runs told, those gone: flagged all the same, in case one is only stalled.
        gone = set()
        if args.all and told:
            now = time.time()
            live = ledger.runs(live=True, limit=sys.maxsize)
            gone = {info.run_id for info in live if info.gone(now, ledger.gone_after)}
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
        if run_id in gone:
            print(f"{run_id}: gone (its process is not heard from): it stops if it comes back")
        else:
            print(f"{run_id}: told to stop ({reason})")
    return 0
