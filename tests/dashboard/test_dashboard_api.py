"""The dashboard's HTTP surface and its guard: the token on every read and action, POST only,
nothing done without it; loopback by default and no other address without a chosen token; a
ledger that is down said plainly. Starlette's test client drives the app in this process."""

from __future__ import annotations

import argparse
import re
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from starlette.testclient import TestClient

from haltwise.cli import dashboard as command
from haltwise.dashboard import watch
from haltwise.dashboard.app import STATIC, TOKEN_HEADER, create_app
from haltwise.engine.errors import ConfigurationError, LedgerError
from haltwise.engine.ledger import MemoryLedger, Pending, RunInfo
from haltwise.ledgers.sqlite import SqliteLedger

from .conftest import CHOICES, DashboardProcess, Stuck, clean_env, gone_fleet, run_path

TOKEN = "a-token-for-these-tests-only"


@pytest.fixture
def ledger() -> MemoryLedger:
    """A fleet of two: ``waits`` asks at its limit, ``works`` goes on."""
    made = MemoryLedger()
    for run_id in ("waits", "works"):
        made.register(RunInfo(run_id, host="box", pid=1, keys=("team-a",)))
        made.heartbeat(run_id, {"turns": 2, "activity": {"turn_limit": 2}}, "running")
    made.ask("waits", "Turn limit reached (2/2). Go on?", CHOICES)
    return made


@pytest.fixture
def client(ledger: MemoryLedger) -> Iterator[TestClient]:
    with TestClient(create_app(ledger, token=TOKEN, interval=0.05)) as made:
        wait_for(
            lambda: (
                made.get("/api/state", headers={TOKEN_HEADER: TOKEN})
                .json()
                .get("state", {})
                .get("ok")
            )
        )
        yield made


def wait_for(check: Any, seconds: float = 5.0) -> Any:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError("timed out")


@pytest.mark.parametrize("given", [None, "", "wrong", TOKEN + "x", TOKEN.upper()])
def test_no_read_and_no_action_without_the_token(
    client: TestClient, ledger: MemoryLedger, given: str | None
) -> None:
    headers = {} if given is None else {TOKEN_HEADER: given}
    reads = ["/api/state", "/api/runs/waits", f"/api/events?token={given or ''}"]
    for path in reads:
        assert client.get(path, headers=headers).status_code == 403, path
    actions: list[tuple[str, dict[str, Any]]] = [
        ("/api/runs/waits/answer", {"choice": "extend", "amount": 2}),
        ("/api/runs/works/stop", {}),
        ("/api/stop", {"key": "team-a"}),
    ]
    for path, body in actions:
        refused = client.post(path, json=body, headers=headers)
        assert refused.status_code == 403, path
        assert "token" in refused.json()["error"]
    # The token in the query string is for the event stream only: an action ignores it.
    assert client.post(f"/api/runs/works/stop?token={TOKEN}").status_code == 403
    (question,) = ledger.pending("waits")
    assert question.answer is None
    assert ledger.killed("waits") is None
    assert ledger.killed("works") is None


def test_with_the_token_the_actions_reach_the_ledger(
    client: TestClient, ledger: MemoryLedger
) -> None:
    headers = {TOKEN_HEADER: TOKEN}
    answered = client.post(
        "/api/runs/waits/answer", json={"choice": "extend", "amount": 2}, headers=headers
    )
    assert answered.status_code == 200, answered.text
    assert (ledger.pending("waits")[0].answer, ledger.pending("waits")[0].amount) == ("extend", 2)
    again = client.post("/api/runs/waits/answer", json={"choice": "abort"}, headers=headers)
    assert again.status_code == 409
    assert "the first answer wins" in again.json()["error"]
    assert client.post("/api/runs/works/stop", headers=headers).json() == {"told": ["works"]}
    assert ledger.killed("works") == "stopped from the dashboard"
    assert ledger.killed("waits") is None
    assert sorted(
        client.post("/api/stop", json={"key": "team-a"}, headers=headers).json()["told"]
    ) == [
        "waits",
        "works",
    ]
    timeline = client.get("/api/runs/works", headers=headers).json()["timeline"]
    assert [entry["kind"] for entry in timeline][-2:] == ["stop", "stop"]


@pytest.mark.parametrize(
    "body",
    [
        {"choice": "extend"},
        {"choice": "extend", "amount": 0},
        {"choice": "extend", "amount": "2"},
        {"choice": "extend", "amount": 2.5},
        {"choice": "go on"},
        ["extend", 2],
    ],
)
def test_a_bad_answer_is_refused_and_changes_nothing(
    client: TestClient, ledger: MemoryLedger, body: Any
) -> None:
    refused = client.post("/api/runs/waits/answer", json=body, headers={TOKEN_HEADER: TOKEN})
    assert refused.status_code == 400
    assert ledger.pending("waits")[0].answer is None


def test_stopping_a_run_that_is_not_live_is_refused_and_says_so(
    client: TestClient, ledger: MemoryLedger
) -> None:
    headers = {TOKEN_HEADER: TOKEN}
    ledger.finish("works", {"status": "completed", "reason": "completed"})
    for run_id in ("works", "work", "never-ran"):
        refused = client.post(f"/api/runs/{run_id}/stop", headers=headers)
        assert refused.status_code == 409, run_id
        assert refused.json()["error"] == (
            f"run {run_id!r} is not live: it has ended, or no run has that id"
        )
        assert ledger.killed(run_id) is None


def test_a_body_nested_too_deep_is_a_bad_request(client: TestClient, ledger: MemoryLedger) -> None:
    deep = "[" * 100_000 + "]" * 100_000
    headers = {TOKEN_HEADER: TOKEN, "content-type": "application/json"}
    for path in ("/api/stop", "/api/runs/waits/answer"):
        assert client.post(path, content=deep, headers=headers).status_code == 400, path
    assert ledger.killed("works") is None
    assert ledger.pending("waits")[0].answer is None


def test_actions_are_post_only(client: TestClient, ledger: MemoryLedger) -> None:
    headers = {TOKEN_HEADER: TOKEN}
    for path in ("/api/runs/works/stop", "/api/runs/waits/answer", "/api/stop"):
        for method in ("GET", "PUT", "DELETE"):
            assert client.request(method, path, headers=headers).status_code == 405, (method, path)
    assert ledger.killed("works") is None
    assert ledger.pending("waits")[0].answer is None


def test_the_page_holds_no_data_and_runs_only_its_own_script(client: TestClient) -> None:
    page = client.get("/")
    assert page.status_code == 200
    assert "waits" not in page.text
    policy = page.headers["content-security-policy"]
    assert "default-src 'self'" in policy
    assert "frame-ancestors 'none'" in policy
    assert page.headers["referrer-policy"] == "no-referrer"
    assert client.get("/runs/waits").text == page.text
    assert client.get("/static/app.js").status_code == 200
    # Every script and style the page loads is served from here.
    assert not re.search(r"(src|href)=\"(https?:)?//", page.text)


def test_run_text_never_becomes_html() -> None:
    script = (STATIC / "app.js").read_text()
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("):
        assert sink not in script, sink


def test_an_unreachable_ledger_is_said_plainly() -> None:
    ledger = Flaky()
    ledger.register(RunInfo("r1"))
    with TestClient(create_app(ledger, token=TOKEN, interval=0.05)) as client:
        headers = {TOKEN_HEADER: TOKEN}
        wait_for(
            lambda: client.get("/api/state", headers=headers).json().get("state", {}).get("ok")
        )
        ledger.down = True
        state = wait_for(
            lambda: (
                (s := client.get("/api/state", headers=headers).json()["state"])["ok"] is False
                and s
            )
        )
        assert "connection refused" in state["error"]
        assert [run["run_id"] for run in state["live"]] == ["r1"]  # what it said last
        stopped = client.post("/api/runs/r1/stop", headers=headers)
        assert stopped.status_code == 409
        assert "connection refused" in stopped.json()["error"]
        ledger.down = False
        assert wait_for(
            lambda: client.get("/api/state", headers=headers).json().get("state", {}).get("ok")
        )


class Flaky(MemoryLedger):
    """A memory ledger that fails every read and kill while ``down``."""

    down = False

    def _check(self) -> None:
        if self.down:
            raise LedgerError("the ledger redis://fleet:6379/0 failed: connection refused")

    def runs(self, *, live: bool = True, limit: int = 100) -> list[RunInfo]:
        self._check()
        return super().runs(live=live, limit=limit)

    def kill(self, run_id: str | None, reason: str, *, key: str | None = None) -> list[str]:
        self._check()
        return super().kill(run_id, reason, key=key)


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    command.configure(parser)
    return parser.parse_args(argv)


def test_the_app_does_not_start_without_a_token() -> None:
    with pytest.raises(ConfigurationError, match="needs a token"):
        create_app(MemoryLedger(), token="")


def test_loopback_by_default_with_a_fresh_token_each_start() -> None:
    assert parse().host == "127.0.0.1"
    first, second = command.choose_token("127.0.0.1", {}), command.choose_token("127.0.0.1", {})
    assert first != second
    assert len(first) >= 32


@pytest.mark.parametrize("host", ["0.0.0.0", "192.168.1.20", "::", "fleet.example.com"])
def test_another_address_needs_a_chosen_token(host: str) -> None:
    with pytest.raises(ConfigurationError, match="HALTWISE_DASHBOARD_TOKEN"):
        command.choose_token(host, {})
    with pytest.raises(ConfigurationError, match="at least 16"):
        command.choose_token(host, {"HALTWISE_DASHBOARD_TOKEN": "short"})
    chosen = "x" * 16
    assert command.choose_token(host, {"HALTWISE_DASHBOARD_TOKEN": chosen}) == chosen


def test_the_command_refuses_another_address_without_a_token(tmp_path: Path) -> None:
    refused = subprocess.run(
        [sys.executable, "-m", "haltwise", "dashboard", "--host", "0.0.0.0", "--port", "0"],
        capture_output=True,
        text=True,
        env=clean_env(tmp_path),
        timeout=60,
    )
    assert refused.returncode == 2
    assert refused.stdout == ""
    assert "HALTWISE_DASHBOARD_TOKEN" in refused.stderr


def test_the_command_serves_on_loopback_and_prints_its_url(tmp_path: Path) -> None:
    ledger = f"sqlite://{tmp_path / 'fleet.db'}"
    served = DashboardProcess(ledger, clean_env(tmp_path))
    try:
        assert served.base.startswith("http://127.0.0.1:")
        assert httpx.get(served.base + "/api/state").status_code == 403
        state = httpx.get(served.base + "/api/state", headers={TOKEN_HEADER: served.token})
        assert state.status_code == 200
        # Stopped with a page watching, it ends the page's stream and shuts down cleanly (then
        # uvicorn raises the signal again, so the exit status says SIGTERM).
        stream = f"{served.base}/api/events?token={served.token}"
        with httpx.stream("GET", stream, timeout=30) as events:
            lines = events.iter_lines()
            assert next(lines) == "event: state"
            assert served.stop() == -signal.SIGTERM
            assert [line for line in lines if line.startswith("event:")] == []
    finally:
        served.stop()
    assert "ERROR" not in served.stderr


def test_a_missing_extra_is_one_clear_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "uvicorn", None)
    with pytest.raises(ConfigurationError, match=r'pip install "haltwise\[dashboard\]"'):
        command.run(parse("--ledger", "memory:"))


# --- what the dashboard shows of the ledger, on a real SQLite file ----------------------------


def sqlite_client(path: Path) -> tuple[SqliteLedger, TestClient]:
    """A dashboard over the SQLite ledger in ``path`` (its own ledger object, as the command
    opens one), once it has read the ledger."""
    watched = SqliteLedger(path)
    client = TestClient(create_app(watched, token=TOKEN, interval=0.05))
    client.__enter__()
    wait_for(lambda: state_of(client).get("ok"))
    return watched, client


def state_of(client: TestClient) -> dict[str, Any]:
    shown: dict[str, Any] = (
        client.get("/api/state", headers={TOKEN_HEADER: TOKEN}).json().get("state", {})
    )
    return shown


def test_a_run_that_ended_after_fifty_newer_ones_is_recently_finished_with_its_page(
    tmp_path: Path,
) -> None:
    path = tmp_path / "fleet.db"
    ledger = SqliteLedger(path)
    started = time.time() - 3600
    ledger.register(RunInfo("long", started=started))
    for number in range(60):
        ledger.register(RunInfo(f"short-{number:02d}", started=started + 600 + number))
        ledger.finish(f"short-{number:02d}", {"status": "completed", "reason": "completed"})
    watched, client = sqlite_client(path)
    headers = {TOKEN_HEADER: TOKEN}
    try:
        ledger.finish("long", {"status": "abandoned", "reason": "cost_limit", "message": "$40"})
        recent = wait_for(
            lambda: (
                (ids := [run["run_id"] for run in state_of(client)["recent"]])[0] == "long" and ids
            )
        )
        assert recent[:3] == ["long", "short-59", "short-58"]
        assert len(recent) == 50
        page = client.get("/api/runs/long", headers=headers)
        assert page.status_code == 200, page.text
        assert page.json()["run"]["outcome"]["reason"] == "cost_limit"
        # A run that ended before the fifty shown has its page too, from the ledger's record.
        older = client.get("/api/runs/short-00", headers=headers)
        assert older.status_code == 200, older.text
        assert (older.json()["run"]["status"], older.json()["pending"]) == ("completed", None)
        missing = client.get("/api/runs/short", headers=headers)
        assert missing.status_code == 404
        assert "not in the ledger" in missing.json()["error"]
    finally:
        client.__exit__(None, None, None)
        watched.close()
        ledger.close()


def test_an_id_with_slashes_is_opened_answered_and_stopped_whole(tmp_path: Path) -> None:
    path = tmp_path / "fleet.db"
    ledger = SqliteLedger(path)
    for run_id in ("team-a/job-42", "team-a/job-42/stop", "job"):
        ledger.register(RunInfo(run_id, keys=("k",)))
        ledger.ask(run_id, f"Go on with {run_id}?", CHOICES)
    watched, client = sqlite_client(path)
    headers = {TOKEN_HEADER: TOKEN}
    try:
        for run_id in ("team-a/job-42", "team-a/job-42/stop"):
            encoded = quote(run_id, safe="")
            assert client.get(f"/runs/{encoded}").status_code == 200  # the page
            detail = client.get(f"/api/runs/{encoded}", headers=headers)
            assert detail.status_code == 200, detail.text
            assert detail.json()["run"]["run_id"] == run_id
            assert detail.json()["pending"]["question"] == f"Go on with {run_id}?"
            answered = client.post(
                f"/api/runs/{encoded}/answer", json={"choice": "continue"}, headers=headers
            )
            assert answered.json() == {"run_id": run_id, "answer": "continue", "amount": None}
            assert ledger.pending(run_id)[0].answer == "continue"
            stopped = client.post(f"/api/runs/{encoded}/stop", headers=headers)
            assert stopped.json() == {"told": [run_id]}
            assert ledger.killed(run_id) == "stopped from the dashboard"
        # An action's path with another method is still no run's page.
        for method in ("GET", "PUT"):
            assert client.request(method, "/api/runs/job/stop", headers=headers).status_code == 405
        assert ledger.killed("job") is None
    finally:
        client.__exit__(None, None, None)
        watched.close()
        ledger.close()


def test_ids_a_path_cannot_hold_as_they_are_are_opened_answered_and_stopped(
    tmp_path: Path,
) -> None:
    # Written as they are, "." and ".." are resolved away by browsers and URL libraries (httpx
    # too: /api/runs/../stop would be /api/stop), and "" names no run: they, and the ids that
    # start with the escape, are written with it.
    path = tmp_path / "fleet.db"
    ledger = SqliteLedger(path)
    ids = (".", "..", "", "~", "~..", "~x/..", "./x")
    for run_id in ids:
        ledger.register(RunInfo(run_id, keys=("k",)))
        ledger.ask(run_id, f"Go on with {run_id}?", CHOICES)
    watched, client = sqlite_client(path)
    headers = {TOKEN_HEADER: TOKEN}
    try:
        for run_id in ids:
            written = run_path(run_id)
            assert written not in ("", ".", "..")
            assert client.get(f"/runs/{written}").status_code == 200  # the page
            detail = client.get(f"/api/runs/{written}", headers=headers)
            assert detail.status_code == 200, (run_id, detail.text)
            assert detail.json()["run"]["run_id"] == run_id
            assert detail.json()["pending"]["question"] == f"Go on with {run_id}?"
            answered = client.post(
                f"/api/runs/{written}/answer", json={"choice": "continue"}, headers=headers
            )
            assert answered.json() == {"run_id": run_id, "answer": "continue", "amount": None}
            assert ledger.pending(run_id)[0].answer == "continue"
            stopped = client.post(f"/api/runs/{written}/stop", headers=headers)
            assert stopped.json() == {"told": [run_id]}
            assert ledger.killed(run_id) == "stopped from the dashboard"
    finally:
        client.__exit__(None, None, None)
        watched.close()
        ledger.close()


def test_an_action_while_another_process_holds_the_write_lock_is_503_and_changes_nothing(
    tmp_path: Path,
) -> None:
    path = tmp_path / "fleet.db"
    ledger = SqliteLedger(path)
    ledger.register(RunInfo("waits", keys=("team-a",)))
    ledger.ask("waits", "Go on?", CHOICES)
    watched, client = sqlite_client(path)
    headers = {TOKEN_HEADER: TOKEN}
    locker = sqlite3.connect(path, isolation_level=None)  # another process, on the same file
    actions: list[tuple[str, dict[str, Any]]] = [
        ("/api/runs/waits/stop", {}),
        ("/api/runs/waits/answer", {"choice": "continue"}),
        ("/api/stop", {"key": "team-a"}),
    ]
    try:
        locker.execute("BEGIN IMMEDIATE")  # it writes, for longer than any action waits
        for action, body in actions:
            started = time.monotonic()
            busy = client.post(action, json=body, headers=headers)
            assert time.monotonic() - started < 3.0, action
            assert busy.status_code == 503, busy.text
            assert busy.headers["retry-after"] == "1"
            assert busy.json()["error"] == (
                f"the SQLite ledger {str(path)!r} is busy: another process holds its write "
                "lock (waited 1s); nothing was changed, try again"
            )
        assert state_of(client)["ok"]  # the page goes on showing the fleet meanwhile
        locker.execute("ROLLBACK")
        assert ledger.killed("waits") is None
        assert ledger.pending("waits")[0].answer is None
        # Tried again once the lock is let go of, each is taken.
        for action, body in actions[:2]:
            assert client.post(action, json=body, headers=headers).status_code == 200, action
        assert ledger.killed("waits") == "stopped from the dashboard"
        assert ledger.pending("waits")[0].answer == "continue"
    finally:
        if locker.in_transaction:
            locker.execute("ROLLBACK")
        locker.close()
        client.__exit__(None, None, None)
        watched.close()
        ledger.close()


def test_every_ledger_error_is_a_conflict_saying_why() -> None:
    broken = Broken()
    broken.register(RunInfo("r1", keys=("team-a",)))
    broken.ask("r1", "Go on?", CHOICES)
    with TestClient(create_app(broken, token=TOKEN, interval=0.05)) as client:
        headers = {TOKEN_HEADER: TOKEN}
        wait_for(lambda: state_of(client).get("ok"))
        broken.down = True
        calls = [
            client.get("/api/runs/elsewhere", headers=headers),  # not in the snapshot
            client.post("/api/runs/r1/answer", json={"choice": "continue"}, headers=headers),
            client.post("/api/runs/r1/stop", headers=headers),
            client.post("/api/stop", json={"key": "team-a"}, headers=headers),
        ]
        for call in calls:
            assert call.status_code == 409, call.text
            assert call.json()["error"] == "the ledger redis://fleet:6379/0 failed: timeout"


def test_a_deleted_sqlite_ledger_is_unreachable_and_the_new_file_is_shown(
    tmp_path: Path,
) -> None:
    path = tmp_path / "fleet.db"
    with SqliteLedger(path) as before:
        before.register(RunInfo("old-run"))
    watched, client = sqlite_client(path)
    headers = {TOKEN_HEADER: TOKEN}
    try:
        assert [run["run_id"] for run in state_of(client)["live"]] == ["old-run"]
        for leftover in tmp_path.iterdir():
            leftover.unlink()
        down = wait_for(lambda: (s := state_of(client))["ok"] is False and s)
        assert f"the SQLite ledger {str(path)!r} was deleted" in down["error"]
        with SqliteLedger(path) as after:  # the fleet goes on in a new file
            after.register(RunInfo("new-run"))
        back = wait_for(lambda: (s := state_of(client))["ok"] and s)
        assert [run["run_id"] for run in back["live"]] == ["new-run"]
        stopped = client.post("/api/runs/new-run/stop", headers=headers)
        assert stopped.json() == {"told": ["new-run"]}
    finally:
        client.__exit__(None, None, None)
        watched.close()


def test_the_page_is_told_when_the_ledger_last_answered(tmp_path: Path) -> None:
    stuck = Stuck()
    stuck.register(RunInfo("r1"))
    with TestClient(create_app(stuck, token=TOKEN, interval=0.05)) as client:
        headers = {TOKEN_HEADER: TOKEN}
        first = wait_for(
            lambda: (
                (news := client.get("/api/state", headers=headers).json())
                .get("state", {})
                .get("ok")
                and news
            )
        )
        assert first["interval"] == 0.05
        # Nothing changes, but the ledger answers: when it did keeps up with the time.
        time.sleep(0.5)
        again = client.get("/api/state", headers=headers).json()
        assert again["state"] == first["state"]
        assert again["read_at"] > first["read_at"] + 0.3
        assert again["now"] - again["read_at"] < 0.3
        # A read that hangs (a ledger locked elsewhere): the time goes on, the answer does not.
        stuck.hang.clear()
        time.sleep(0.5)
        hung = client.get("/api/state", headers=headers).json()
        time.sleep(0.5)
        later = client.get("/api/state", headers=headers).json()
        assert later["read_at"] == hung["read_at"]
        assert later["now"] - later["read_at"] > 0.9
        assert later["state"]["ok"]  # it has not failed: it is stale, and the page says so
        stuck.hang.set()
        wait_for(lambda: client.get("/api/state", headers=headers).json()["read_at"] > later["now"])


def test_a_gone_run_shows_gone_last_and_a_stop_says_so(tmp_path: Path) -> None:
    path = tmp_path / "fleet.db"
    ledger = gone_fleet(path)
    watched, client = sqlite_client(path)
    try:
        shown = state_of(client)
        assert [(run["run_id"], run["status"], run["gone"]) for run in shown["live"]] == [
            ("alive", "running", False),
            ("dead", "gone", True),
        ]
        assert shown["pending"] == []
        refused = client.post("/api/runs/dead/stop", headers={TOKEN_HEADER: TOKEN})
        assert refused.status_code == 409
        assert re.fullmatch(
            r"run 'dead' is gone: it has not been heard from for 12\ds \(more than 60s\), so "
            r"its process is not running to hear a stop",
            refused.json()["error"],
        )
        assert ledger.killed("dead") is None
    finally:
        client.__exit__(None, None, None)
        watched.close()
        ledger.close()


def test_live_runs_past_the_cap_are_counted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(watch, "MAX_LIVE", 5)
    path = tmp_path / "fleet.db"
    ledger = SqliteLedger(path)
    for number in range(8):
        ledger.register(RunInfo(f"r{number}", started=1_000.0 + number))
    watched, client = sqlite_client(path)
    try:
        shown = state_of(client)
        assert (len(shown["live"]), shown["live_total"]) == (5, 8)
        ledger.finish("r7", {"status": "completed", "reason": "completed"})
        ledger.finish("r6", {"status": "completed", "reason": "completed"})
        ledger.finish("r5", {"status": "completed", "reason": "completed"})
        shown = wait_for(lambda: (s := state_of(client))["live_total"] == 5 and s)
        assert [run["run_id"] for run in shown["live"]] == ["r4", "r3", "r2", "r1", "r0"]
    finally:
        client.__exit__(None, None, None)
        watched.close()
        ledger.close()


class Broken(MemoryLedger):
    """A memory ledger whose every read and action fails while ``down`` (its poller's reads
    too: the snapshot says it is unreachable)."""

    down = False

    def _check(self) -> None:
        if self.down:
            raise LedgerError("the ledger redis://fleet:6379/0 failed: timeout")

    def runs(self, *, live: bool = True, limit: int = 100) -> list[RunInfo]:
        self._check()
        return super().runs(live=live, limit=limit)

    def run_info(self, run_id: str) -> RunInfo | None:
        self._check()
        return super().run_info(run_id)

    def answer(self, run_id: str, choice: str, amount: int | None = None) -> Pending:
        self._check()
        return super().answer(run_id, choice, amount)

    def kill(self, run_id: str | None, reason: str, *, key: str | None = None) -> list[str]:
        self._check()
        return super().kill(run_id, reason, key=key)
