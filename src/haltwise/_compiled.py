"""Which of haltwise's modules are compiled, and whether the compiled build or the pure one is
in force.

The modules in ``MODULES`` (the events, the tallies, the governor and the dispatch that decides
an LLM call, the stuck detectors, which analyse every tool result, and the audit's readers and
replay, which feed them a recorded run's every step) are compiled by Cython from their own
``.py`` sources when haltwise is installed on a machine with a C compiler (``setup.py`` reads
the list from here). Each compiled module is a C extension beside its ``.py``
(``events.cpython-311-x86_64-linux-gnu.so`` beside ``events.py``), and Python's import prefers
an extension to a source of the same name: with nothing done, the compiled build is in force.

Why Cython (3, in its pure-Python mode: the same ``.py`` runs compiled or interpreted, with
``.pxd`` files beside it to type attributes): building an LLM call's two events by keyword, the
measure that matters for issue 15, took 147 ns compiled by Cython against 516 ns interpreted
(Python 3.11). mypyc gave nothing there (579 ns compiled against 567 for plain classes, 1,815
against 1,625 for frozen dataclasses), and a Rust extension (PyO3, maturin) cannot be built
here: crates.io is out of reach, and a wheel must build on a fresh machine from the project's
own files with only its C compiler and Python's headers.

``choose()``, run by ``haltwise/__init__.py`` before anything else is imported, puts the pure
build in force instead (every module in ``MODULES`` imported from its ``.py``, by a finder
placed ahead of Python's own) when:

- ``HALTWISE_PURE`` is set (to anything but ``""`` or ``0``): to run or test the pure build on
  a machine that has the compiled one;
- a module was not compiled (no C compiler, or no Cython, at install time);
- the sources changed since they were compiled (an editable install after an edit): the build
  records the digest of the sources it compiled (``_compiled.sha256``) and a mismatch means
  the extensions are stale.

It is all or nothing: the compiled modules read each other's types as C structs.
``BUILD`` says which is in force and ``REASON`` why, as ``haltwise --version`` shows.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import os
import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from pathlib import Path
from types import ModuleType

__all__ = ["BUILD", "DIGEST_FILE", "MODULES", "REASON", "choose", "source_digest"]

#: The modules compiled, by their import names. The one list: setup.py builds these.
MODULES = (
    "haltwise.engine.events",
    "haltwise.engine.state",
    "haltwise.engine.dispatch",
    "haltwise.engine.detectors._keys",
    "haltwise.engine.detectors._base",
    "haltwise.engine.detectors._tools",
    "haltwise.engine.detectors._text",
    "haltwise.engine.detectors._edits",
    "haltwise.engine.detectors._paging",
    "haltwise.engine.detectors._scan",
    # Compiled as they are written (no .pxd): Python objects throughout, a C call between them
    # rather than an interpreted frame.
    "haltwise.engine.governor",
    "haltwise.audit.readers",
    "haltwise.audit.replay",
)
#: The file, in the package, holding the digest of the sources the extensions were built from.
DIGEST_FILE = "_compiled.sha256"
#: "compiled" or "pure", once ``choose()`` has run.
BUILD = "pure"
#: Why the build in force is the one in force.
REASON = "not chosen yet"

_PACKAGE = Path(__file__).resolve().parent


def source_digest(package: Path) -> str:
    """The digest of the sources of ``MODULES`` (and their ``.pxd`` declarations) under the
    ``haltwise`` package directory ``package``."""
    digest = hashlib.sha256()
    for name in MODULES:
        base = package.joinpath(*name.split(".")[1:])
        for path in (base.with_suffix(".py"), base.with_suffix(".pxd")):
            digest.update(path.name.encode())
            digest.update(path.read_bytes() if path.exists() else b"")
    return digest.hexdigest()


def choose() -> None:
    """Put the compiled build in force if it is there, fresh and wanted; else the pure one."""
    global BUILD, REASON
    if os.environ.get("HALTWISE_PURE", "") not in ("", "0"):
        BUILD, REASON = "pure", "HALTWISE_PURE is set"
    elif not all(_extension(name) for name in MODULES):
        BUILD, REASON = "pure", "not compiled when installed"
    elif not _fresh():
        BUILD, REASON = "pure", "compiled from older sources: reinstall"
    else:
        BUILD, REASON = "compiled", "Cython"
        return
    if not any(isinstance(finder, _PureFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _PureFinder())


def _extension(name: str) -> Path | None:
    base = _PACKAGE.joinpath(*name.split(".")[1:])
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        path = base.with_name(base.name + suffix)
        if path.exists():
            return path
    return None


def _fresh() -> bool:
    recorded = _PACKAGE / DIGEST_FILE
    try:
        return recorded.read_text().strip() == source_digest(_PACKAGE)
    except OSError:
        return False


class _PureFinder:
    """Finds the modules of ``MODULES`` as their ``.py`` sources, even beside an extension."""

    def find_spec(
        self, name: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if name not in MODULES or not path:
            return None
        source = str(Path(path[0]) / (name.rpartition(".")[2] + ".py"))
        loader = importlib.machinery.SourceFileLoader(name, source)
        return importlib.util.spec_from_file_location(name, source, loader=loader)
