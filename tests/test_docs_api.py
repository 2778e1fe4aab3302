"""Every public name is documented in docs/: a name added to an ``__all__`` without a word in
the API reference (``docs/api.md``) fails here."""

from __future__ import annotations

import importlib
import re
from functools import cache
from pathlib import Path
from typing import Any

import pytest

DOCS = Path(__file__).resolve().parents[1] / "docs"

#: The modules whose ``__all__`` is the public surface: ``haltwise`` and its public subpackages
#: (``haltwise.policies`` is ``haltwise.engine.policies``).
PUBLIC = (
    "haltwise",
    "haltwise.drivers",
    "haltwise.engine.detectors",
    "haltwise.engine.policies",
    "haltwise.ledgers",
    "haltwise.loops",
    "haltwise.testing",
)


@cache
def documented() -> frozenset[str]:
    """The identifiers written as code (between backticks) anywhere in docs/: a name that only
    turns up in prose, or in an example's code block, is not documented."""
    names: set[str] = set()
    for page in DOCS.rglob("*.md"):
        for span in re.findall(r"`([^`\n]+)`", page.read_text(encoding="utf-8")):
            names.update(re.findall(r"[A-Za-z_]\w*", span))
    return frozenset(names)


def public_names() -> list[Any]:
    return [
        pytest.param(module, name, id=f"{module}.{name}")
        for module in PUBLIC
        for name in importlib.import_module(module).__all__
    ]


@pytest.mark.parametrize(("module", "name"), public_names())
def test_every_public_name_is_documented(module: str, name: str) -> None:
    assert name in documented(), (
        f"{module}.{name} is public (in {module}.__all__) but docs/ never mentions it as code: "
        f"add a line for `{name}` in its section of docs/api.md"
    )
