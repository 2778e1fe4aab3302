"""The page, in Chromium, over ledgers that are not as tidy as a demo's: run ids with slashes,
ids a path cannot hold as they are ("." and "..") and ids with characters that would disguise
them, text too long for a card, runs whose process is gone, more live runs than the dashboard
reads, a ledger whose reads hang, and one whose write lock another process holds.

Each test serves a real ``haltwise dashboard`` process over a SQLite file, except the one whose
ledger must hang on cue: that app is served on a thread of this process.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Any

from haltwise.dashboard.app import create_app
from haltwise.engine.ledger import Budget, RunInfo
from haltwise.ledgers.sqlite import SqliteLedger

from .conftest import CHOICES, DashboardProcess, ServedApp, Stuck, clean_env, gone_fleet

TOKEN = "a-token-for-these-tests-only"


def wait_for(check: Any, seconds: float = 10.0) -> Any:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError("timed out")


def test_a_run_whose_id_has_slashes_is_opened_answered_and_stopped(
    tmp_path: Path, browser: Any
) -> None:
    path = tmp_path / "fleet.db"
    ledger = SqliteLedger(path)
    ledger.register(RunInfo("team-a/job-42", keys=("team-a",)))
    ledger.heartbeat("team-a/job-42", {"turns": 2}, "waiting")
    ledger.ask("team-a/job-42", "Turn limit reached (2/2). Go on?", CHOICES)
    dashboard = DashboardProcess(f"sqlite://{path}", clean_env(tmp_path))
    page = browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    try:
        page.goto(dashboard.url)
        page.locator("#approvals .card a").click()
        page.wait_for_url("**/runs/team-a%2Fjob-42")
        page.locator("#run-title").get_by_text("team-a/job-42", exact=True).wait_for()
        page.locator("#run-status").get_by_text("waiting").wait_for()
        page.locator("#run-approval").get_by_role("button", name="Continue").click()
        wait_for(lambda: ledger.pending("team-a/job-42")[0].answer == "continue")
        page.locator("#run-stop").click()
        wait_for(lambda: ledger.killed("team-a/job-42") == "stopped from the dashboard")
        page.reload()  # its address, as the browser keeps it, names the run whole
        page.locator("#run-title").get_by_text("team-a/job-42", exact=True).wait_for()
    finally:
        page.close()
        dashboard.stop()
        ledger.close()
    assert errors == []


def test_runs_whose_ids_are_dots_are_opened_answered_and_stopped(
    tmp_path: Path, browser: Any
) -> None:
    path = tmp_path / "fleet.db"
    ledger = SqliteLedger(path)
    for run_id in (".", ".."):
        ledger.register(RunInfo(run_id))
        ledger.heartbeat(run_id, {"turns": 2}, "waiting")
        ledger.ask(run_id, f"Go on with {run_id}?", CHOICES)
    dashboard = DashboardProcess(f"sqlite://{path}", clean_env(tmp_path))
    page = browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    try:
        page.goto(dashboard.url)
        # From the fleet: ".." answered on its card, "." stopped in its row.
        card = page.locator("#approvals .card", has=page.locator('a[href="/runs/~.."]'))
        card.get_by_role("button", name="Continue").click()
        wait_for(lambda: ledger.pending("..")[0].answer == "continue")
        page.locator('#live tr[data-key="."]').get_by_role("button", name="Stop").click()
        wait_for(lambda: ledger.killed(".") == "stopped from the dashboard")
        # "."'s page, from its link: answered there, and found again by its address.
        page.locator('#live tr[data-key="."] a').click()
        page.wait_for_url(f"{dashboard.base}/runs/~.")
        page.locator("#run-title").get_by_text(".", exact=True).wait_for()
        page.locator("#run-approval").get_by_role("button", name="Continue").click()
        wait_for(lambda: ledger.pending(".")[0].answer == "continue")
        page.reload()
        page.locator("#run-title").get_by_text(".", exact=True).wait_for()
        # ".."'s page, by its address: stopped there.
        page.goto(f"{dashboard.base}/runs/~..")
        page.locator("#run-title").get_by_text("..", exact=True).wait_for()
        page.locator("#run-status").get_by_text("waiting").wait_for()
        page.locator("#run-stop").click()
        wait_for(lambda: ledger.killed("..") == "stopped from the dashboard")
        assert page.url == f"{dashboard.base}/runs/~.."
    finally:
        page.close()
        dashboard.stop()
        ledger.close()
    assert errors == []


def test_a_stop_while_another_process_holds_the_write_lock_says_so_and_can_be_clicked_again(
    tmp_path: Path, browser: Any
) -> None:
    path = tmp_path / "fleet.db"
    ledger = SqliteLedger(path)
    ledger.register(RunInfo("r1"))
    dashboard = DashboardProcess(f"sqlite://{path}", clean_env(tmp_path))
    page = browser.new_page()
    locker = sqlite3.connect(path, isolation_level=None)  # another process, on the same file
    try:
        page.goto(dashboard.url)
        row = page.locator('#live tr[data-key="r1"]')
        row.get_by_role("button", name="Stop", exact=True).wait_for()
        locker.execute("BEGIN IMMEDIATE")  # it writes, for longer than a stop waits
        row.get_by_role("button", name="Stop", exact=True).click()
        banner = page.locator("#banner")
        banner.get_by_text("is busy: another process holds its write lock").wait_for(timeout=5_000)
        assert banner.inner_text().endswith("nothing was changed, try again")
        assert row.get_by_role("button", name="Stop", exact=True).is_enabled()
        locker.execute("ROLLBACK")
        assert ledger.killed("r1") is None
        row.get_by_role("button", name="Stop", exact=True).click()
        wait_for(lambda: ledger.killed("r1") == "stopped from the dashboard")
        row.get_by_role("button", name="Stopping…").wait_for()
    finally:
        if locker.in_transaction:
            locker.execute("ROLLBACK")
        locker.close()
        page.close()
        dashboard.stop()
        ledger.close()


def test_ids_cannot_pass_for_others_and_long_text_stays_in_its_card(
    tmp_path: Path, browser: Any
) -> None:
    path = tmp_path / "fleet.db"
    disguised = "\u202eevil\u202c-job"  # shown as it is, it would read "live-job"
    key = "k-" + "B" * 2000
    ledger = SqliteLedger(path)
    ledger.register(RunInfo(disguised, keys=(key,)))
    ledger.ask(disguised, "Go on? " + "Q" * 3000, CHOICES)
    ledger.charge(Budget(key, "turns"), 1, 5)
    ledger.register(RunInfo("A" * 600))
    ledger.ask("A" * 600, "Q" * 3000, CHOICES)
    dashboard = DashboardProcess(f"sqlite://{path}", clean_env(tmp_path))
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    try:
        page.goto(dashboard.url)
        page.locator("#approvals .card").nth(1).wait_for()
        page.locator("#budgets .meter").wait_for()
        links = page.locator("#live a.run-id").all_inner_texts()
        assert "⟨U+202E⟩evil⟨U+202C⟩-job" in links
        # Isolated: whatever an id holds cannot reorder the text around it.
        assert page.locator("#live a.run-id bdi").count() == 2
        overflowing = page.evaluate(
            """() => [...document.querySelectorAll('.card, .card .question, .meter')]
                .filter((node) => node.scrollWidth > node.clientWidth + 1
                    || node.getBoundingClientRect().right > window.innerWidth)
                .map((node) => node.className)"""
        )
        assert overflowing == []
        page.screenshot(path=str(tmp_path / "hostile.png"))
        page.locator("#live a.run-id", has_text="evil").click()
        page.locator("#run-title").get_by_text("⟨U+202E⟩evil⟨U+202C⟩-job").wait_for()
        page.screenshot(path=str(tmp_path / "hostile-run.png"))
    finally:
        page.close()
        dashboard.stop()
        ledger.close()


def test_a_gone_run_shows_gone_after_the_others_with_no_stop(tmp_path: Path, browser: Any) -> None:
    path = tmp_path / "fleet.db"
    ledger = gone_fleet(path)
    dashboard = DashboardProcess(f"sqlite://{path}", clean_env(tmp_path))
    page = browser.new_page()
    try:
        page.goto(dashboard.url)
        rows = page.locator("#live tbody tr")
        dead = page.locator('#live tr[data-key="dead"]')
        dead.locator(".badge", has_text="gone 2m").wait_for()
        assert rows.evaluate_all("rows => rows.map(row => row.dataset.key)") == ["alive", "dead"]
        assert dead.get_by_role("button", name="Stop").is_disabled()
        assert page.locator('#live tr[data-key="alive"]').get_by_role("button").is_enabled()
        assert page.locator("#live-count").inner_text() == "2 · 1 gone"
        assert page.locator("#approvals .card").count() == 0
        dead.locator("a").click()
        page.locator("#run-status", has_text="gone").wait_for()
        assert page.locator("#run-stop").is_hidden()
    finally:
        page.close()
        dashboard.stop()
        ledger.close()


def test_more_live_runs_than_the_dashboard_reads_are_counted_and_said_cut(
    tmp_path: Path, browser: Any
) -> None:
    path = tmp_path / "fleet.db"
    with SqliteLedger(path) as ledger:
        for index in range(10_001):
            ledger.register(RunInfo(f"run-{index:05d}", started=1_000.0 + index))
    dashboard = DashboardProcess(f"sqlite://{path}", clean_env(tmp_path))
    page = browser.new_page()
    try:
        page.goto(dashboard.url)
        page.locator("#live-cut").wait_for(timeout=30_000)
        assert page.locator("#live-count").inner_text() == "10,001 (10,000 read)"
        assert page.locator("#live-cut").inner_text() == (
            "The list is cut: 10,001 runs are live, and the dashboard reads the 10,000 that "
            "started last (the rest: haltwise runs --limit 10001)."
        )
        assert page.locator("#totals").inner_text() == "10,001 live"
    finally:
        page.close()
        dashboard.stop()


def test_a_ledger_that_stops_answering_is_flagged_stale(browser: Any) -> None:
    ledger = Stuck()
    ledger.register(RunInfo("r1"))
    served = ServedApp(create_app(ledger, token=TOKEN, interval=0.1))
    page = browser.new_page()
    try:
        page.goto(f"{served.base}/#token={TOKEN}")
        pill = page.locator("#connection")
        pill.get_by_text("live", exact=True).wait_for()
        banner = page.locator("#banner")
        time.sleep(6)  # longer than it takes to flag a ledger stale: a quiet one is not
        assert banner.is_hidden()
        ledger.hang.clear()  # a read hangs, as on a SQLite file locked by another process
        banner.get_by_text("has not answered for").wait_for(timeout=15_000)
        assert "what this page shows is stale" in banner.inner_text()
        assert banner.get_attribute("class") == "banner warn"
        assert pill.inner_text() == "ledger not answering"
        ledger.hang.set()
        pill.get_by_text("live", exact=True).wait_for(timeout=10_000)
        assert banner.is_hidden()
    finally:
        ledger.hang.set()
        page.close()
        served.stop()
