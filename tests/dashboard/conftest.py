"""The dashboard under test: a real ``haltwise dashboard`` process, and Debian's Chromium
driven by Playwright for Python.

``scripts/test.sh`` installs both (``chromium`` from apt, ``playwright`` with the dev extra; no
browser is downloaded). Where either is missing the browser tests skip saying so, unless
``CI_REQUIRE_BROWSER=1`` (CI), where they fail.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette", reason="the dashboard's extra is not installed")


def _unavailable(why: str) -> None:
    if os.environ.get("CI_REQUIRE_BROWSER") == "1":
        pytest.fail(f"{why} (scripts/test.sh installs it)")
    pytest.skip(why)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Chromium for one test module: Playwright's synchronous API keeps an event loop running
    on this thread while it is open, which other tests' ``asyncio.run`` would trip over."""
    chromium = shutil.which("chromium")
    if chromium is None:
        _unavailable("chromium is not installed: `apt-get install chromium` to run these")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("playwright is not installed: `pip install playwright` to run these")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=chromium, args=["--no-sandbox"] if os.geteuid() == 0 else []
        )
        yield launched
        launched.close()


class DashboardProcess:
    """``python -m haltwise dashboard`` on a free port, until ``stop``."""

    def __init__(self, ledger: str, env: dict[str, str]) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "haltwise", "dashboard", "--ledger", ledger, "--port", "0"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert self.process.stdout is not None
        first = self._first_line()
        found = re.search(r"(http://127\.0\.0\.1:\d+)/#token=(\S+)", first)
        assert found, f"no URL in {first!r}: {self.process.stderr and self.process.stderr.read()}"
        #: The server's root, and the token it printed.
        self.base = found[1]
        self.token = found[2]
        self.url = found[0]

    def _first_line(self) -> str:
        got: list[str] = []
        reader = threading.Thread(target=lambda: got.append(self.process.stdout.readline()))  # type: ignore[union-attr]
        reader.start()
        reader.join(timeout=30)
        if not got:
            self.stop()
            raise AssertionError("haltwise dashboard printed nothing in 30 s")
        return got[0]

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        #: What it wrote to stderr, once stopped.
        self.stderr = self.process.communicate()[1]
        return self.process.returncode


def clean_env(tmp_path: Path) -> dict[str, str]:
    """This environment without haltwise's or OpenAI's settings, its data under ``tmp_path``."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("HALTWISE_", "OPENAI_"))
    }
    env.update(XDG_DATA_HOME=str(tmp_path / "data"), PYTHONUNBUFFERED="1")
    return env
