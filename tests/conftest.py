"""Shared fixtures: the real-trajectory corpus, which lives beside the repository."""

from __future__ import annotations

import itertools
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


#: Numbers the folders of ``_price_cache_of_its_own``.
_tests = itertools.count()


@pytest.fixture(autouse=True)
def _price_cache_of_its_own(
    monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Each test keeps genai-prices' resolutions on disk (``haltwise.pricing._DiskCache``) in a
    folder of its own, made only if it writes there: none finds a model another resolved, and
    none writes in the user's cache."""
    folder = tmp_path_factory.getbasetemp() / "price-caches" / str(next(_tests))
    monkeypatch.setenv("HALTWISE_CACHE_DIR", str(folder))
