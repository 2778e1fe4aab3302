"""The runnable example in docs/loops.md: it runs, and the docs show exactly its code."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from haltwise import Status

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "refine_loop.py"
DOCS = ROOT / "docs" / "loops.md"


def test_the_build_test_review_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    spec = importlib.util.spec_from_file_location("refine_loop_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)

    result = module.main()

    assert result.outcome.status is Status.COMPLETED
    assert result.value == "def add(a, b):\n    return a + b\n"
    assert [iteration.label for iteration in result.history] == ["test", "review"]
    assert result.outcome.usage.model_calls == 3
    assert result.outcome.usage.total_tokens == 244
    printed = capsys.readouterr().out.rstrip("\n") + "\n```"
    assert printed in DOCS.read_text(encoding="utf-8")  # the docs show what it prints


def test_the_docs_show_the_example_verbatim() -> None:
    code = EXAMPLE.read_text(encoding="utf-8")
    assert f"```python\n{code}```" in DOCS.read_text(encoding="utf-8")
