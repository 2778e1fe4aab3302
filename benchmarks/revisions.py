"""Another revision of haltwise, imported beside this one, so that a benchmark times both in one
run (the machines are shared and noisy: only side-by-side ratios hold)."""

from __future__ import annotations

import importlib.util
import io
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any


def load_revision(revision: str, name: str) -> Any:
    """The ``haltwise`` package at git ``revision``, extracted with ``git archive`` and imported
    as ``name``; or the reason it cannot be (not a git checkout, no such revision)."""
    root = Path(__file__).resolve().parents[1]
    try:
        archive = subprocess.run(
            ["git", "-C", str(root), "archive", revision, "src/haltwise"],
            capture_output=True,
            check=True,
        )
    except (OSError, subprocess.CalledProcessError) as error:
        stderr = getattr(error, "stderr", b"") or b""
        return f"no revision {revision}: {stderr.decode().strip() or error}"
    target = Path(tempfile.mkdtemp(prefix="haltwise-base-"))
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(target, filter="data")
    package = target / "src" / "haltwise"
    spec = importlib.util.spec_from_file_location(
        name, package / "__init__.py", submodule_search_locations=[str(package)]
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
