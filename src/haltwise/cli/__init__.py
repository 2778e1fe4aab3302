"""The ``haltwise`` command. Each subcommand lives in its own module, imported only when run.

A subcommand module has ``HELP`` (one line), ``configure(parser)`` (its arguments; no heavy
imports) and ``run(args) -> int`` (the exit code). Add a subcommand by naming its module in
``COMMANDS``.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from types import ModuleType

from ..engine.errors import ConfigurationError, HaltwiseError

__all__ = ["COMMANDS", "main"]

#: Subcommand name -> the module that implements it.
COMMANDS: dict[str, str] = {
    "demo": "haltwise.cli.demo",
    "chat": "haltwise.cli.chat",
    "run": "haltwise.cli.run",
    "audit": "haltwise.audit.cli",
    "runs": "haltwise.cli.runs",
    "budgets": "haltwise.cli.budgets",
    "approve": "haltwise.cli.approve",
    "stop": "haltwise.cli.stop",
    "dashboard": "haltwise.cli.dashboard",
}

#: Exit codes shared by every subcommand.
EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2


def _load(name: str) -> ModuleType:
    return importlib.import_module(COMMANDS[name])


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="haltwise",
        description="Make every LLM agent loop halt at the right moment, with nothing lost.",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        module = _load(name)
        sub = commands.add_parser(name, help=module.HELP, description=module.HELP)
        module.configure(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return EXIT_USAGE
    try:
        code: int = _load(args.command).run(args)
    except ConfigurationError as error:
        print(f"haltwise {args.command}: {error}", file=sys.stderr)
        return EXIT_USAGE
    except HaltwiseError as error:
        print(f"haltwise {args.command}: {error}", file=sys.stderr)
        return EXIT_ERROR
    return code


if __name__ == "__main__":
    sys.exit(main())
