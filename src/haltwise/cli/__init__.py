"""The ``haltwise`` command. Each subcommand lives in its own module, imported only when run.

A subcommand module has ``HELP`` (one line), ``configure(parser)`` (its arguments; no heavy
imports) and ``run(args) -> int`` (the exit code). Add a subcommand by naming its module in
``COMMANDS``.

What every subcommand shares is here: a ``ConfigurationError`` is one line and exit 2, another
``HaltwiseError`` one line and exit 1; a closed pipe (``| head``) ends the command quietly with
141; a Ctrl-C the command does not handle itself with 130; an ``OSError`` (a full disk) is
one line and exit 1; anything else is a bug of ours, whose traceback goes to
``haltwise.log`` next to the store while the user reads one line naming that file.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from types import ModuleType

from .. import _compiled
from ..engine.errors import ConfigurationError, HaltwiseError
from ._errors import EXIT_BROKEN_PIPE, crash_log_path, log_crash, say, silence_stdout

__all__ = ["COMMANDS", "main"]

#: Subcommand name -> the module that implements it, within the package (a copy of haltwise
#: imported under another name, as a benchmark imports an older revision, runs its own).
COMMANDS: dict[str, str] = {
    "demo": ".cli.demo",
    "chat": ".cli.chat",
    "run": ".cli.run",
    "audit": ".audit.cli",
    "runs": ".cli.runs",
    "budgets": ".cli.budgets",
    "approve": ".cli.approve",
    "stop": ".cli.stop",
    "dashboard": ".cli.dashboard",
}
#: The package the names in ``COMMANDS`` are in: ``haltwise``.
_PACKAGE = __name__.rpartition(".")[0]

#: Exit codes shared by every subcommand.
EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
#: Interrupted (Ctrl-C) before the command could finish: 128 + SIGINT.
EXIT_INTERRUPTED = 130


def _load(name: str) -> ModuleType:
    return importlib.import_module(COMMANDS[name], _PACKAGE)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="haltwise",
        description="Make every LLM agent loop halt at the right moment, with nothing lost.",
    )
    parser.add_argument("--version", action=_Version, nargs=0, help="show the version and exit")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        module = _load(name)
        sub = commands.add_parser(name, help=module.HELP, description=module.HELP)
        module.configure(sub)
    return parser


class _Version(argparse.Action):
    """``--version``: the package's metadata is read only when it is asked for (importing
    ``importlib.metadata`` costs every command some 15 ms)."""

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
        from .. import __version__

        sys.stdout.write(f"haltwise {__version__} ({_compiled.BUILD}: {_compiled.REASON})\n")
        parser.exit()


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return EXIT_USAGE
    name = f"haltwise {args.command}"
    try:
        code: int = _load(args.command).run(args)
        # A reader that went away is noticed here, not in the flush at exit.
        sys.stdout.flush()
    except ConfigurationError as error:
        say(f"{name}: {error}")
        return EXIT_USAGE
    except HaltwiseError as error:
        say(f"{name}: {error}")
        return EXIT_ERROR
    except BrokenPipeError:
        silence_stdout()
        return EXIT_BROKEN_PIPE
    except KeyboardInterrupt:
        say(f"{name}: interrupted")
        return EXIT_INTERRUPTED
    except OSError as error:
        # The machine's answer (a full disk, a file gone), not a bug: its own words.
        told = f"{error.filename}: {error.strerror}" if error.filename else str(error)
        say(f"{name}: {told}")
        return EXIT_ERROR
    except Exception as error:
        logged = log_crash(error, crash_log_path(args))
        told = f"the traceback is in {logged}" if logged else "the traceback could not be saved"
        say(
            f"{name}: internal error ({type(error).__name__}: {error}); this is a bug in "
            f"haltwise, please report it: {told}"
        )
        return EXIT_ERROR
    return code


if __name__ == "__main__":
    sys.exit(main())
