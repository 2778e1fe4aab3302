"""The fleet end to end: ``haltwise run`` processes on one ledger, answered and stopped from a
third process with ``haltwise approve`` and ``haltwise stop``, seen with ``haltwise runs``.

Every process is real (``python -m haltwise``), talking to the scripted server over HTTP and to
one SQLite ledger file.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from haltwise.engine.ledger import RunInfo
from haltwise.ledgers.sqlite import SqliteLedger
from haltwise.testing import ScriptedServer, reply, tool_call

MODEL = "scripted-model"


def haltwise(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "haltwise", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )


def agent(server: ScriptedServer, tmp: Path, name: str, env: dict[str, str], *limits: str) -> Any:
    workspace = tmp / name
    workspace.mkdir()
    (workspace / "notes.txt").write_text("".join(f"line {n}\n" for n in range(1, 501)))
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "haltwise",
            "run",
            f"Task {name}.",
            "--base-url",
            server.base_url,
            "--model",
            MODEL,
            "--workspace",
            str(workspace),
            "--store",
            str(tmp / f"{name}.db"),
            "--json",
            *limits,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def runs(env: dict[str, str]) -> list[dict[str, Any]]:
    listed = haltwise("runs", "--json", env=env)
    if listed.returncode == 2 and "there is no SQLite ledger" in listed.stderr:
        return []  # no agent has made the ledger yet: reading makes none
    assert listed.returncode == 0, listed.stderr
    found: list[dict[str, Any]] = json.loads(listed.stdout)
    return found


def wait_until(check: Any, what: str, seconds: float = 30.0) -> Any:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def outcome_of(process: Any) -> tuple[int, dict[str, Any]]:
    out, err = process.communicate(timeout=60)
    lines = [json.loads(line) for line in out.splitlines() if line.strip()]
    assert lines, err
    return process.returncode, lines[-1]


def fleet_env(tmp: Path) -> dict[str, str]:
    """This machine's environment, with the fleet's ledger in ``tmp`` and nothing of the user's."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("HALTWISE_", "OPENAI_"))
    }
    ledger = f"sqlite://{tmp / 'fleet.db'}"
    env.update(HALTWISE_LEDGER=ledger, XDG_DATA_HOME=str(tmp / "data"), PYTHONUNBUFFERED="1")
    return env


def test_stop_refuses_a_run_that_is_not_live(tmp_path: Path) -> None:
    with SqliteLedger(tmp_path / "fleet.db") as ledger:
        ledger.register(RunInfo("c2e94760a1b2c3d4"))
        ledger.register(RunInfo("ended"))
        ledger.finish("ended", {"status": "completed", "reason": "completed"})
    env = fleet_env(tmp_path)
    for run_id in ("c2e94760", "ended"):  # a shortened id; a run that is over
        refused = haltwise("stop", run_id, env=env)
        assert refused.returncode == 1
        assert f"run {run_id!r} is not live: it has ended, or no run has that id" in refused.stderr
        assert refused.stdout == ""
    told = haltwise("stop", "c2e94760a1b2c3d4", "--reason", "enough", env=env)
    assert (told.returncode, told.stdout) == (0, "c2e94760a1b2c3d4: told to stop (enough)\n")
    with SqliteLedger(tmp_path / "fleet.db") as ledger:
        assert ledger.killed("ended") is None


def test_approve_refuses_a_run_whose_process_is_gone_and_runs_shows_it_gone(
    tmp_path: Path,
) -> None:
    # Two runs asked two minutes ago; "dead" has not been heard from since (its process was
    # killed), "alive" beats on.
    asked = time.time() - 120
    with SqliteLedger(tmp_path / "fleet.db", clock=lambda: asked) as then:
        for run_id in ("dead", "alive"):
            then.register(RunInfo(run_id, host="box", pid=1, interval=2.0))
            then.ask(run_id, "Go on?", ("continue", "abort"))
            then.heartbeat(run_id, {"turns": 2}, "waiting")
    with SqliteLedger(tmp_path / "fleet.db") as ledger:
        ledger.heartbeat("alive", {"turns": 2}, "waiting")
    env = fleet_env(tmp_path)
    refused = haltwise("approve", "dead", "--continue", env=env)
    assert refused.returncode == 1
    assert refused.stdout == ""
    assert re.fullmatch(
        r"haltwise approve: run 'dead' is not running: it has not been heard from for 12\ds "
        r"\(more than 60s\): its process is gone, and its question with it\n",
        refused.stderr,
    )
    listed = {row["run_id"]: row for row in runs(env)}
    assert (listed["dead"]["gone"], listed["alive"]["gone"]) == (True, False)
    table = haltwise("runs", env=env).stdout
    assert "gone" in next(line for line in table.splitlines() if "dead" in line)
    assert "waiting" in next(line for line in table.splitlines() if "alive" in line)
    with SqliteLedger(tmp_path / "fleet.db") as ledger:
        assert [p.run_id for p in ledger.pending()] == ["alive"]
    told = haltwise("approve", "alive", "--continue", env=env)
    assert (told.returncode, told.stdout) == (0, "alive: continue (to 'Go on?')\n")


def test_stop_refuses_a_run_whose_process_is_gone(tmp_path: Path) -> None:
    # "dead" last beat two minutes ago (its process was killed); "alive" beats on.
    then = time.time() - 120
    with SqliteLedger(tmp_path / "fleet.db", clock=lambda: then) as before:
        for run_id in ("dead", "alive"):
            before.register(RunInfo(run_id, interval=2.0))
            before.heartbeat(run_id, {"turns": 2}, "waiting")
    with SqliteLedger(tmp_path / "fleet.db") as ledger:
        ledger.heartbeat("alive", {"turns": 2}, "running")
    env = fleet_env(tmp_path)
    refused = haltwise("stop", "dead", env=env)
    assert refused.returncode == 1
    assert refused.stdout == ""
    assert re.fullmatch(
        r"haltwise stop: run 'dead' is gone: it has not been heard from for 12\ds \(more than "
        r"60s\), so its process is not running to hear a stop \(see haltwise runs\)\n",
        refused.stderr,
    )
    with SqliteLedger(tmp_path / "fleet.db") as ledger:
        assert ledger.killed("dead") is None
    told = haltwise("stop", "--all", "--reason", "enough", env=env)
    assert told.returncode == 0
    assert sorted(told.stdout.splitlines()) == [
        "alive: told to stop (enough)",
        "dead: gone (its process is not heard from): it stops if it comes back",
    ]


def test_stop_and_approve_say_a_busy_ledger_is_busy_and_change_nothing(tmp_path: Path) -> None:
    path = tmp_path / "fleet.db"
    with SqliteLedger(path) as ledger:
        ledger.register(RunInfo("waits"))
        ledger.ask("waits", "Go on?", ("continue", "abort"))
    env = fleet_env(tmp_path)
    busy = (
        f"the SQLite ledger {str(path)!r} is busy: another process holds its write lock "
        "(waited 1s); nothing was changed, try again"
    )
    locker = sqlite3.connect(path, isolation_level=None)  # another process, on the same file
    try:
        locker.execute("BEGIN IMMEDIATE")  # it writes, for longer than any command waits
        for command in (["stop", "waits"], ["stop", "--all"], ["approve", "waits", "--continue"]):
            started = time.monotonic()
            refused = haltwise(*command, env=env)
            assert time.monotonic() - started < 10, command  # a second's wait, and Python's start
            assert (refused.returncode, refused.stdout) == (1, ""), command
            assert refused.stderr == f"haltwise {command[0]}: {busy}\n"
    finally:
        locker.execute("ROLLBACK")
        locker.close()
    with SqliteLedger(path) as ledger:
        assert ledger.killed("waits") is None
        assert ledger.pending("waits")[0].answer is None
    # Run again once the lock is let go of, each is taken.
    approved = haltwise("approve", "waits", "--continue", env=env)
    assert (approved.returncode, approved.stdout) == (0, "waits: continue (to 'Go on?')\n")
    told = haltwise("stop", "waits", "--reason", "enough", env=env)
    assert (told.returncode, told.stdout) == (0, "waits: told to stop (enough)\n")


def test_commands_that_read_runs_make_no_ledger_where_a_mistyped_path_points(
    tmp_path: Path,
) -> None:
    env = fleet_env(tmp_path)
    mistyped = tmp_path / "no such folder" / "fleet.db"
    for command in (["runs"], ["budgets"], ["stop", "--all"], ["approve", "r1", "--abort"]):
        refused = haltwise(*command, "--ledger", f"sqlite://{mistyped}", env=env)
        assert refused.returncode == 2, command
        assert f"there is no SQLite ledger '{mistyped}': check the path" in refused.stderr
    assert not mistyped.parent.exists()


def test_approve_and_stop_runs_from_another_process(tmp_path: Path) -> None:
    env = fleet_env(tmp_path)

    def reading(delay: float) -> Any:
        """Reads the notes a line further each turn: progress, never a loop."""

        def answer(body: dict[str, Any]) -> Any:
            turn = sum(1 for message in body["messages"] if message["role"] == "assistant")
            arguments = {"path": "notes.txt", "offset": turn + 1, "limit": 1}
            return reply("Reading.", tool_calls=[tool_call("read_file", arguments)], delay=delay)

        return answer

    with (
        ScriptedServer([reading(0.0)], model=MODEL, repeat_last=True) as fast_server,
        ScriptedServer([reading(0.3)], model=MODEL, repeat_last=True) as slow_server,
    ):
        waits = agent(fast_server, tmp_path, "waits", env, "--max-turns", "2", "--on-limit", "ask")
        stopped = agent(slow_server, tmp_path, "stopped", env, "--max-turns", "100")
        try:
            live = wait_until(
                lambda: [r for r in runs(env) if r["status"] == "waiting"], "a run to wait"
            )
            (waiting,) = live
            assert waiting["counts"]["turns"] == 2
            requests_before = len(fast_server.requests)
            approved = haltwise("approve", waiting["run_id"], "--extend", "2", env=env)
            assert approved.returncode == 0, approved.stderr
            assert "extend by 2" in approved.stdout
            # Two more turns, then it waits again at the extended limit: abort it there.
            wait_until(
                lambda: [
                    r
                    for r in runs(env)
                    if r["run_id"] == waiting["run_id"]
                    and r["status"] == "waiting"
                    and r["counts"]["turns"] == 4
                ],
                "the run to wait again after two more turns",
            )
            assert len(fast_server.requests) == requests_before + 2
            assert haltwise("approve", waiting["run_id"], "--abort", env=env).returncode == 0
            code, last = outcome_of(waits)
            assert code == 3
            assert last["outcome"]["reason"] == "declined"
            assert last["outcome"]["usage"]["turns"] == 4
            late = haltwise("approve", waiting["run_id"], "--continue", env=env)
            assert late.returncode == 1
            assert f"run {waiting['run_id']!r} is not running: it has ended" in late.stderr

            other = wait_until(
                lambda: [r for r in runs(env) if r["run_id"] != waiting["run_id"]],
                "the other run to be live",
            )[0]
            told = haltwise("stop", other["run_id"], "--reason", "budget review", env=env)
            assert told.returncode == 0, told.stderr
            code, last = outcome_of(stopped)
            assert code == 130
            assert last["outcome"]["status"] == "cancelled"
            assert last["outcome"]["reason"] == "killed"
            assert "budget review" in last["outcome"]["message"]
        finally:
            for process in (waits, stopped):
                if process.poll() is None:
                    process.kill()
                    process.communicate()
    assert runs(env) == []
    ended = {
        r["run_id"]: r["outcome"]["reason"]
        for r in json.loads(haltwise("runs", "--all", "--json", env=env).stdout)
    }
    assert sorted(ended.values()) == ["declined", "killed"]
