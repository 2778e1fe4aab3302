"""How the agent's tests start ``python -m haltwise`` in a child process: with the haltwise under
test, and with the stop signals at their defaults whatever the parent's are."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import haltwise


def child_environ(**more: str) -> dict[str, str]:
    """This environment, with the haltwise under test first on the child's path (a relative
    PYTHONPATH would not reach it from the test's folder), and ``more``."""
    source = str(Path(haltwise.__file__).resolve().parents[1])
    path = os.pathsep.join([source, *filter(None, [os.environ.get("PYTHONPATH")])])
    return dict(os.environ, PYTHONPATH=path, PYTHONUNBUFFERED="1", **more)


def default_signals() -> None:
    """In the child, before haltwise starts: the stop signals at their defaults. A shell starts
    a background job (pytest's too) with SIGINT ignored, nohup ignores SIGHUP, and haltwise
    leaves an ignored signal ignored."""
    for number in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(number, signal.SIG_DFL)
