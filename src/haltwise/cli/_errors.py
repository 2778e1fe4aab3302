"""How a ``haltwise`` command fails: an optional extra that is not installed named with the
command that installs it, output paths checked before any work, a closed pipe ended quietly,
and our own bugs logged to a file while the user reads one line.

Nothing here imports more than the standard library.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path

from ..engine.errors import ConfigurationError

__all__ = [
    "EXIT_BROKEN_PIPE",
    "check_output_path",
    "crash_log_path",
    "log_crash",
    "require_extra",
    "say",
    "silence_stdout",
]

#: The exit code of a command whose output was closed by its reader (``| head``): 128 + SIGPIPE,
#: what a shell reports for a program that SIGPIPE ended.
EXIT_BROKEN_PIPE = 141
#: The file our tracebacks go to, in the store's folder.
LOG_NAME = "haltwise.log"
#: The optional extras (``pyproject.toml``) that commands and the Redis ledger check for, each
#: with the top-level modules its packages install (tests/test_packaging.py compares the two).
EXTRAS: dict[str, tuple[str, ...]] = {
    "agent": ("openai", "prompt_toolkit", "rich", "pydantic", "re2", "psutil"),
    "redis": ("redis",),
    "dashboard": ("starlette", "uvicorn", "sse_starlette"),
}


def say(line: str) -> None:
    """One line on stderr; nothing when stderr is gone too."""
    try:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def require_extra(extra: str, what: str) -> None:
    """A ``ConfigurationError`` (a command's exit 2) saying that ``what`` needs ``extra`` and
    how to install it, when a module of that extra is not installed; else nothing. The modules
    are looked for, not imported: a missing one is found before any work starts, wherever it
    would have been imported."""
    missing = [name for name in EXTRAS[extra] if importlib.util.find_spec(name) is None]
    if missing:
        verb = "is" if len(missing) == 1 else "are"
        raise ConfigurationError(
            f"{what} needs its extra ({', '.join(missing)} {verb} missing): "
            f'pip install "haltwise[{extra}]"'
        )


def silence_stdout() -> None:
    """The standard recipe after a ``BrokenPipeError``: point stdout at /dev/null, so that
    the flush at exit does not fail a second time and print a traceback of its own."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # a stdout with no file (tests capture it): nothing to do
        pass


def check_output_path(option: str, value: str) -> Path:
    """The file an option names for output, checked before any work starts: its folder exists
    and can be written to, and it is not a folder itself. ``ConfigurationError`` otherwise."""
    path = Path(value).expanduser()
    folder = path.parent
    fix = f"choose another path with {option}"
    if path.is_dir():
        raise ConfigurationError(f"{option} {value}: is a folder; name a file (in it) instead")
    if not folder.exists():
        raise ConfigurationError(
            f"{option} {value}: the folder {folder} does not exist; create it "
            f"(mkdir -p {folder}) or {fix}"
        )
    if not folder.is_dir():
        raise ConfigurationError(f"{option} {value}: {folder} is not a folder; {fix}")
    target = path if path.exists() else folder
    if not os.access(target, os.W_OK):
        raise ConfigurationError(f"{option} {value}: {target} is not writable; {fix}")
    return path


def crash_log_path(args: argparse.Namespace) -> Path:
    """Where our tracebacks go: next to the store the command uses."""
    from ..agent.store import default_store_path

    store = getattr(args, "store", None)
    store_file = Path(store).expanduser() if store else default_store_path()
    return store_file.absolute().parent / LOG_NAME


def log_crash(error: BaseException, path: Path) -> Path | None:
    """Append the traceback of ``error``, with the time, version and command line, to ``path``
    (else to a file in the temporary folder); the file it went to, or None when neither could
    be written.

    What UTF-8 cannot hold (a command line's bytes that were not UTF-8, kept by Python as lone
    surrogates, as in a message that quotes them) is written as a backslash escape: the log of
    a crash must not crash in turn."""
    from .. import __version__

    entry = "".join(
        [
            f"--- {time.strftime('%Y-%m-%d %H:%M:%S %z')} haltwise {__version__}\n",
            f"command: {' '.join(sys.argv)}\n",
            *traceback.format_exception(type(error), error, error.__traceback__),
        ]
    )
    fallback = Path(tempfile.gettempdir()) / f"haltwise-{os.getpid()}.log"
    for candidate in (path, fallback):
        try:
            candidate.parent.mkdir(parents=True, exist_ok=True)
            with candidate.open("a", encoding="utf-8", errors="backslashreplace") as log:
                log.write(entry)
        except OSError:
            continue
        return candidate
    return None
