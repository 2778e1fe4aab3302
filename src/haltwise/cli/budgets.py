"""``haltwise budgets``: each shared budget in the ledger: spent, held, limit, window. The
current windows by default; ``--all`` adds the windows that have reset, which the ledger keeps
for a while (``haltwise.engine.ledger``: 7 days) before it drops them."""

from __future__ import annotations

import argparse

HELP = "List the shared budgets in the ledger: spent, reserved, limit, period and when it resets."


def configure(parser: argparse.ArgumentParser) -> None:
    from ._fleet import add_ledger_option

    parser.add_argument(
        "--all", action="store_true", help="past windows too (kept 7 days after they reset)"
    )
    parser.add_argument("--json", action="store_true", help="JSON for scripts")
    add_ledger_option(parser)


def run(args: argparse.Namespace) -> int:
    import time

    from ._fleet import ledger_from, ledger_name, money, print_json, print_table, when

    ledger = ledger_from(args)
    try:
        kept = ledger.budgets()
    finally:
        ledger.close()
    now = time.time()
    states = [state for state in kept if args.all or not state.budget.ended(now)]
    if args.json:
        print_json(
            [
                {
                    "key": state.budget.key,
                    "metric": state.budget.metric,
                    "window": state.budget.window,
                    "resets_at": state.budget.resets_at,
                    "spent": state.spent,
                    "reserved": state.reserved,
                    "limit": state.limit,
                    "unit": "nano_usd" if state.budget.metric == "nano_usd" else "count",
                }
                for state in states
            ]
        )
        return 0

    def shown(metric: str, amount: int | None) -> str:
        if amount is None:
            return "-"
        return money(amount) if metric == "nano_usd" else f"{amount:,}"

    rows = [
        [
            state.budget.key,
            "dollars" if state.budget.metric == "nano_usd" else state.budget.metric,
            state.budget.window,
            shown(state.budget.metric, state.spent),
            shown(state.budget.metric, state.reserved),
            shown(state.budget.metric, state.limit),
            when(state.budget.resets_at),
        ]
        for state in states
    ]
    columns = ["key", "counts", "window", "spent", "reserved", "limit", "resets"]
    past = len(kept) - len(states)
    title = f"budgets in {ledger_name(ledger)}"
    if past:
        title += f" (current windows; --all for {past} past)"
    print_table(title, columns, rows)
    return 0
