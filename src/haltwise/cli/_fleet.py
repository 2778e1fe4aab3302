"""What the fleet commands (``runs``, ``budgets``, ``approve``, ``stop``) share: which ledger,
and tables for people (rich, when it is installed) or JSON for scripts."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from decimal import Decimal
from typing import Any

from ..engine.ledger import GONE_SECONDS, Ledger, RunInfo

__all__ = [
    "STALE_SECONDS",
    "add_ledger_option",
    "age",
    "ledger_from",
    "ledger_name",
    "money",
    "print_json",
    "print_table",
    "run_row",
    "usd",
    "when",
]

#: A live run whose last heartbeat is older than this is shown as stale (its process may be gone).
STALE_SECONDS = 15.0


def add_ledger_option(parser: argparse.ArgumentParser) -> None:
    from ..agent.options import add_ledger_argument

    add_ledger_argument(parser)


def ledger_from(
    args: argparse.Namespace, environ: Mapping[str, str] | None = None, *, create: bool = False
) -> Ledger:
    """``--ledger``, else ``HALTWISE_LEDGER``, else ``ledger`` in haltwise.toml, else the
    agent's store (the ledger of this machine). A SQLite ledger named by a URL must exist
    unless ``create`` (the dashboard, which may be started before the fleet): a command that
    reads or answers runs makes no ledger where a mistyped path points. The store is made."""
    from .. import config
    from ..agent.store import default_store_path
    from ..ledgers import open_ledger

    environ = os.environ if environ is None else environ
    if getattr(args, "ledger", None):
        return open_ledger(args.ledger, source="--ledger", create=create)
    settings = config.load_config(getattr(args, "config", None), environ=environ)
    if settings.ledger is not None:
        source = settings.sources.get("ledger", "ledger")
        return open_ledger(settings.ledger, source=source, create=create)
    return open_ledger(f"sqlite://{default_store_path(environ).resolve()}", source="the store")


def ledger_name(ledger: Ledger) -> str:
    """The ledger as its URL says it, for titles: the SQLite and Redis ledgers' reprs are their
    URLs; the memory ledger has only ``object``'s (``<... object at 0x...>``)."""
    from ..engine.ledger import MemoryLedger

    return "memory:" if isinstance(ledger, MemoryLedger) else repr(ledger)


def usd(amount: Decimal) -> str:
    return f"${amount:.4f}" if amount < 1 else f"${amount:,.2f}"


def money(nano: int) -> str:
    """A ledger amount of money (nano-dollars) for people."""
    return usd(Decimal(nano) / 10**9)


def when(epoch: float | None) -> str:
    if epoch is None:
        return "never"
    return datetime.fromtimestamp(epoch, timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def age(epoch: float, now: float | None = None) -> str:
    seconds = max(0.0, (time.time() if now is None else now) - epoch)
    if seconds < 120:
        return f"{seconds:.0f}s ago"
    if seconds < 7200:
        return f"{seconds / 60:.0f}m ago"
    return f"{seconds / 3600:.1f}h ago"


def run_row(info: RunInfo, now: float, gone_after: float = GONE_SECONDS) -> dict[str, Any]:
    """A run as JSON for scripts (and the source of its table row): ``stale`` when it has
    not been heard from for a while, ``gone`` once its process must be (``RunInfo.gone``)."""
    data = info.to_dict()
    data["stale"] = info.live and now - info.heartbeat > STALE_SECONDS
    data["gone"] = info.gone(now, gone_after)
    return data


def print_table(title: str, columns: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """A table on stdout: rich's when it is installed, else aligned plain text; or a line
    saying there is nothing to show.

    The first column names each row (a run's id, a budget's key) as ``haltwise approve`` and
    ``haltwise stop`` take it, so it is never cut or wrapped: in a narrow terminal, and in a
    pipe (where rich assumes 80 columns), the other columns fold instead."""
    if not rows:
        print(f"{title}: none")
        return
    try:
        from rich.table import Table

        from ._console import PipeConsole
    except ImportError:  # pragma: no cover - rich comes with haltwise[agent]
        widths = [len(max(column, key=len)) for column in zip(columns, *rows, strict=True)]
        print(title)
        for row in (columns, *rows):
            print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)))
        return
    table = Table(title=title, title_justify="left")
    name, *others = columns
    widest = max(len(name), *(len(row[0]) for row in rows))
    table.add_column(name, no_wrap=True, min_width=widest)
    for column in others:
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*row)
    PipeConsole(highlight=False).print(table)


def print_json(data: Any) -> None:
    json.dump(data, sys.stdout, indent=2, default=str)
    sys.stdout.write("\n")
