"""The dashboard end to end, in a real browser: ``haltwise run`` processes on one SQLite ledger,
``haltwise dashboard`` serving it, and Chromium clicking.

A run that waits at its limit is given "Extend 2" and goes on for exactly two turns; another
is stopped with its "Stop" button and ends ``killed``; a request without the token changes
nothing. A screenshot of the page is kept in the test's temporary folder.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from haltwise.engine.ledger import Budget, RunInfo
from haltwise.ledgers.sqlite import SqliteLedger
from haltwise.testing import ScriptedServer, reply, tool_call

from .conftest import DashboardProcess, clean_env

MODEL = "scripted-model"


def agent(server: ScriptedServer, tmp: Path, name: str, env: dict[str, str], *limits: str) -> Any:
    workspace = tmp / name
    workspace.mkdir()
    (workspace / "notes.txt").write_text("".join(f"line {n}\n" for n in range(1, 501)))
    return subprocess.Popen(
        [
            *(sys.executable, "-m", "haltwise", "run", f"Task {name}."),
            *("--base-url", server.base_url, "--model", MODEL),
            *("--workspace", str(workspace), "--store", str(tmp / f"{name}.db"), "--json"),
            *limits,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def reading(delay: float) -> Any:
    """Reads the notes a line further each turn: progress, never a loop."""

    def answer(body: dict[str, Any]) -> Any:
        turn = sum(1 for message in body["messages"] if message["role"] == "assistant")
        arguments = {"path": "notes.txt", "offset": turn + 1, "limit": 1}
        return reply("Reading.", tool_calls=[tool_call("read_file", arguments)], delay=delay)

    return answer


def outcome_of(process: Any) -> tuple[int, dict[str, Any]]:
    out, err = process.communicate(timeout=60)
    lines = [json.loads(line) for line in out.splitlines() if line.strip()]
    assert lines, err
    return process.returncode, lines[-1]


def test_extend_and_stop_runs_from_the_browser(tmp_path: Path, browser: Any) -> None:
    ledger_file = tmp_path / "fleet.db"
    ledger = f"sqlite://{ledger_file}"
    env = {**clean_env(tmp_path), "HALTWISE_LEDGER": ledger}
    dashboard = DashboardProcess(ledger, env)
    page = browser.new_page(viewport={"width": 1440, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    with (
        ScriptedServer([reading(0.0)], model=MODEL, repeat_last=True) as fast_server,
        ScriptedServer([reading(0.3)], model=MODEL, repeat_last=True) as slow_server,
    ):
        waits = agent(fast_server, tmp_path, "waits", env, "--max-turns", "2", "--on-limit", "ask")
        stopped = agent(slow_server, tmp_path, "stopped", env, "--max-turns", "100")
        try:
            page.goto(dashboard.url)
            assert "#token" not in page.url  # the token leaves the address bar at once
            card = page.locator("#approvals .card")
            card.wait_for(timeout=30_000)
            waiting_id = card.locator("a").inner_text()
            row = page.locator(f'#live tr[data-key="{waiting_id}"]')
            row.get_by_text("Turns 2/2").wait_for(timeout=10_000)
            other_id = next(
                key
                for key in page.locator("#live tbody tr").evaluate_all(
                    "rows => rows.map(row => row.dataset.key)"
                )
                if key != waiting_id
            )

            # Without the token, nothing happens.
            for headers in ({}, {"X-Haltwise-Token": "wrong"}):
                refused = page.request.post(
                    f"{dashboard.base}/api/runs/{other_id}/stop", headers=headers
                )
                assert refused.status == 403
            assert SqliteLedger(ledger_file).killed(other_id) is None

            requests_before = len(fast_server.requests)
            card.get_by_role("button", name="Extend 2").click()
            # Two more turns, then it waits again at the extended limit (the question comes
            # once the fourth turn's request is answered; the count as soon as it starts).
            page.locator("#approvals .card", has_text="4 turns").wait_for(timeout=30_000)
            row.get_by_text("Turns 4/4").wait_for(timeout=10_000)
            assert len(fast_server.requests) == requests_before + 2

            # A change in the ledger shows within a second, with no reload (the best of three,
            # so that a moment's load on a shared machine does not decide it).
            delays = []
            for attempt in range(3):
                changed = time.monotonic()
                SqliteLedger(ledger_file).charge(Budget(f"watched-{attempt}", "turns"), 3, 10)
                meter = f'#budgets [data-key="watched-{attempt}|turns|forever"]'
                page.locator(meter).wait_for(timeout=5_000)
                delays.append(time.monotonic() - changed)
            assert min(delays) < 1.0, delays

            page.locator(f'#live tr[data-key="{other_id}"]').get_by_role(
                "button", name="Stop"
            ).click()
            code, last = outcome_of(stopped)
            assert code == 130
            assert (last["outcome"]["status"], last["outcome"]["reason"]) == ("cancelled", "killed")
            assert "stopped from the dashboard" in last["outcome"]["message"]
            recent = page.locator(f'#recent tr[data-key="{other_id}"]')
            recent.get_by_text("cancelled: killed").wait_for(timeout=10_000)

            page.screenshot(path=str(tmp_path / "dashboard.png"), full_page=True)

            # The waiting run's own page: its timeline, then abort it from there.
            page.locator(f'#live a[href="/runs/{waiting_id}"]').click()
            timeline = page.locator("#run-timeline")
            timeline.locator(".answered", has_text="extend 2").wait_for(timeout=10_000)
            assert timeline.get_by_text("ToolCall").count() >= 4
            assert page.locator("#run-chart svg").count() == 1
            page.screenshot(path=str(tmp_path / "dashboard-run.png"), full_page=True)
            page.locator("#run-approval").get_by_role("button", name="Abort").click()
            code, last = outcome_of(waits)
            assert code == 3
            assert (last["outcome"]["reason"], last["outcome"]["usage"]["turns"]) == ("declined", 4)
            page.locator("#run-status").get_by_text("declined").wait_for(timeout=10_000)
        finally:
            for process in (waits, stopped):
                if process.poll() is None:
                    process.kill()
                    process.communicate()
            page.close()
            dashboard.stop()
    assert errors == []


def test_an_unreachable_ledger_is_said_plainly_on_the_page(tmp_path: Path, browser: Any) -> None:
    pytest.importorskip("redis", reason="the Redis ledger's extra is not installed")
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    dashboard = DashboardProcess(f"redis://127.0.0.1:{port}/0", clean_env(tmp_path))
    page = browser.new_page()
    try:
        page.goto(dashboard.url)
        banner = page.locator("#banner")
        banner.get_by_text("is unreachable").wait_for(timeout=10_000)
        assert f"redis://127.0.0.1:{port}/0" in banner.inner_text()
        assert "refused" in banner.inner_text().lower()
        assert page.locator("#connection").inner_text() == "ledger unreachable"
        stranger = browser.new_page()  # a new browser context: no token kept
        stranger.goto(dashboard.base + "/")
        stranger.locator("#banner").get_by_text("needs its token").wait_for(timeout=10_000)
        stranger.close()
    finally:
        page.close()
        dashboard.stop()


def test_a_large_fleet_shows_its_first_rows_waiting_ones_first(
    tmp_path: Path, browser: Any
) -> None:
    ledger_file = tmp_path / "fleet.db"
    ledger = SqliteLedger(ledger_file)
    for index in range(205):
        ledger.register(RunInfo(f"run-{index:03d}", started=1_000.0 + index))
    ledger.ask("run-000", "Go on?", ("continue", "abort"))
    ledger.heartbeat("run-000", {"turns": 1}, "waiting")
    dashboard = DashboardProcess(f"sqlite://{ledger_file}", clean_env(tmp_path))
    page = browser.new_page()
    try:
        page.goto(dashboard.url)
        rows = page.locator("#live tbody tr")
        page.get_by_role("button", name="Show all 205 (200 shown)").wait_for(timeout=10_000)
        assert rows.count() == 200
        keys = rows.evaluate_all("rows => rows.map(row => row.dataset.key)")
        assert keys[:3] == ["run-000", "run-204", "run-203"]  # the oldest, since it waits
        page.get_by_role("button", name="Show all 205").click()
        page.get_by_role("button", name="Show the first 200 only").wait_for(timeout=10_000)
        assert rows.count() == 205
    finally:
        page.close()
        dashboard.stop()
        ledger.close()
