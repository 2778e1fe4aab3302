"""Shared fixtures: the real-trajectory corpus, which lives beside the repository."""

from __future__ import annotations

from pathlib import Path

import pytest

#: ``../shared/traces`` next to the checkout: real runs of other people's agents.
TRACES = Path(__file__).resolve().parents[1].parent / "shared" / "traces"


@pytest.fixture(scope="session")
def traces_dir() -> Path:
    """The trace corpus; tests that need it skip, saying why, where it is absent."""
    if not TRACES.is_dir():
        pytest.skip(f"the trace corpus is absent: expected it at {TRACES} (../shared/traces)")
    return TRACES
