"""``haltwise runs``: the live runs in the ledger (or recent ones, with their outcomes)."""

from __future__ import annotations

import argparse

HELP = "List the runs in the ledger: live ones (status, counts, heartbeat), or all recent ones."


def configure(parser: argparse.ArgumentParser) -> None:
    from ._fleet import add_ledger_option

    parser.add_argument("--all", action="store_true", help="recent runs too, with their outcome")
    parser.add_argument("--limit", default="50", metavar="N", help="at most N runs (default 50)")
    parser.add_argument("--json", action="store_true", help="JSON for scripts")
    add_ledger_option(parser)


def run(args: argparse.Namespace) -> int:
    import time
    from decimal import Decimal

    from ..config import parse_positive_count
    from ._fleet import age, ledger_from, ledger_name, print_json, print_table, run_row, usd

    limit = parse_positive_count("--limit", args.limit)
    ledger = ledger_from(args)
    try:
        runs = ledger.runs(live=not args.all, limit=limit)
        now = time.time()
        rows = [run_row(info, now, ledger.gone_after) for info in runs]
    finally:
        ledger.close()
    if args.json:
        print_json(rows)
        return 0
    table = []
    for row in rows:
        outcome = row["outcome"] or {}
        counts = outcome.get("usage") or row["counts"]
        # A gone run's question is closed: it is no longer waiting, whatever it last said.
        status = "gone" if row["gone"] else row["status"] + (" (stale)" if row["stale"] else "")
        cost = counts.get("cost")
        table.append(
            [
                row["run_id"],
                status if not outcome else f"{status}: {outcome.get('reason', '')}",
                f"{row['host']}:{row['pid']}" if row["host"] else "",
                str(counts.get("turns", 0)),
                str(counts.get("input_tokens", 0) + counts.get("output_tokens", 0)),
                "?" if cost is None else usd(Decimal(cost)),
                ", ".join(row["keys"]),
                age(row["heartbeat"], now),
            ]
        )
    title = "runs" if args.all else "live runs"
    columns = ["run", "status", "where", "turns", "tokens", "cost", "keys", "heard from"]
    print_table(f"{title} in {ledger_name(ledger)}", columns, table)
    return 0
