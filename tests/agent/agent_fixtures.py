"""Fixtures for the agent's tests: a temporary workspace and store, no real user state, and
an endpoint that writes every character past ASCII as a JSON escape (``escaping_server``).

Every test talks to ``haltwise.testing.ScriptedServer`` through the real ``openai`` client; no
test reads the environment's keys, endpoints or the user's data directory. Each test module
loads them (``pytest_plugins = ["agent_fixtures"]``): a second ``conftest.py`` would clash with
``tests/conftest.py`` under mypy, as there are no ``__init__.py`` files.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import haltwise.testing.server

HERE = Path(__file__).resolve().parent


@pytest.fixture(autouse=True)
def isolated(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """No endpoint, key, limit or store from the environment; the data dir is a temp one.

    A plugin's autouse fixture reaches every test of the session: only this folder's are
    changed."""
    import os

    if HERE not in Path(str(request.node.path)).resolve().parents:
        return
    tmp_path: Path = request.getfixturevalue("tmp_path")

    for name in list(os.environ):
        if name.startswith(("HALTWISE_", "OPENAI_")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("PATH", os.environ.get("PATH", ""))  # restored after the demo's change
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    folder = tmp_path / "ws"
    folder.mkdir()
    (folder / "a.txt").write_text("alpha\nbeta\ngamma\n")
    (folder / "sub").mkdir()
    (folder / "sub" / "b.py").write_text("def f():\n    return 1  # beta\n")
    return folder


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    return tmp_path / "store" / "haltwise.db"


@pytest.fixture
def escaping_server(monkeypatch: pytest.MonkeyPatch) -> None:
    """``ScriptedServer`` writes its JSON as Python does by default, every character past
    ASCII as an escape: a lone surrogate in a script then goes out as JSON's ``"\\ud800"``,
    the way one reaches a client from a real endpoint (as UTF-8, it could not be sent)."""

    def dumps(value: object, **options: Any) -> str:
        return json.dumps(value, **{**options, "ensure_ascii": True})

    writer = SimpleNamespace(dumps=dumps, loads=json.loads)
    monkeypatch.setattr(haltwise.testing.server, "json", writer)
