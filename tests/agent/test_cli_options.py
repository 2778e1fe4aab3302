"""Numbers and settings the ``haltwise`` commands once let through to a crash or a paid call:
each is now one line and exit 2 before anything is opened or sent. Also what the fleet commands
print (a run id whole at any width, the memory ledger by its URL), and the demo run past its
recording."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from haltwise.cli import main
from haltwise.cli._fleet import print_table
from haltwise.engine.ledger import RunInfo
from haltwise.ledgers import open_ledger
from haltwise.testing import ScriptedServer

#: The workspace, the store and the isolation from the user's environment.
pytest_plugins = ["agent_fixtures"]

HUGE = "99999999999999999999"
COUNT = "expected a whole number from 1 to 1,000,000,000,000"
PORT = "expected a port from 1 to 65535, or 0 for any free one"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["runs", "--limit", HUGE], f"haltwise runs: --limit='{HUGE}' is not valid: {COUNT}"),
        (["runs", "--all", "--limit", "0"], f"haltwise runs: --limit='0' is not valid: {COUNT}"),
        (["runs", "--limit", "x"], f"haltwise runs: --limit='x' is not valid: {COUNT}"),
        (
            ["approve", "r1", "--extend", HUGE],
            f"haltwise approve: --extend='{HUGE}' is not valid: {COUNT}",
        ),
        # Within SQLite's integers, but past the cap haltwise.toml puts on every count.
        (
            ["approve", "r1", "--extend", "9223372036854775807"],
            f"haltwise approve: --extend='9223372036854775807' is not valid: {COUNT}",
        ),
        (
            ["approve", "r1", "--extend", "0"],
            f"haltwise approve: --extend='0' is not valid: {COUNT}",
        ),
        (
            ["dashboard", "--port", "99999"],
            f"haltwise dashboard: --port='99999' is not valid: {PORT}",
        ),
        (["dashboard", "--port", "-1"], f"haltwise dashboard: --port='-1' is not valid: {PORT}"),
        (
            ["dashboard", "--port", HUGE],
            f"haltwise dashboard: --port='{HUGE}' is not valid: {PORT}",
        ),
    ],
)
def test_a_number_out_of_range_is_one_line_and_nothing_is_opened(
    args: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(args) == 2
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == ("", message + "\n")
    # The ledger (the store, by default) is not opened: no file is made for it.
    assert not (tmp_path / "data").exists()


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        (
            "haltwise.toml",
            "warn_at = nan\n",
            "haltwise run: haltwise.toml: warn_at=nan is not valid: expected a fraction",
        ),
        (
            "pyproject.toml",
            'tool = "x"\n# our settings: [tool.haltwise]\n',
            "haltwise run: pyproject.toml: tool='x' is not valid: expected a table",
        ),
        (
            "haltwise.toml",
            '[prices."scripted-model"]\ninput = 1e30\noutput = "0.60"\n',
            "haltwise run: haltwise.toml: prices['scripted-model'].input=1E+30 is not valid: "
            "expected at most 5,551,115 USD per million tokens",
        ),
    ],
)
def test_a_bad_config_file_stops_the_run_before_any_call(
    name: str,
    text: str,
    message: str,
    workspace: Path,
    store_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    Path(name).write_text(text)
    with ScriptedServer(["Done."], model="scripted-model") as server:
        args = ["run", "Hi.", "--base-url", server.base_url, "--model", "scripted-model", "-q"]
        code = main([*args, "--workspace", str(workspace), "--store", str(store_path)])
        assert server.requests == []
    assert code == 2
    err = capsys.readouterr().err
    assert err.startswith(message) and err.count("\n") == 1, err


def test_the_run_id_column_is_never_cut(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Rich takes 80 columns in a pipe and cut the id to ``f20c7e6…``, which approve and stop
    cannot take; the other columns fold instead."""
    run_id = "f20c7e6d9a41b3c8"
    status = "completed_with_warnings: time_limit"
    for width in ("80", "40"):
        monkeypatch.setenv("COLUMNS", width)
        print_table("runs", ["run", "status", "where"], [[run_id, status, "build-host-7:41234"]])
        out = capsys.readouterr().out
        assert re.search(rf"│ {run_id} │", out), out
        assert "…" not in out
        # Nothing of the other cells is lost either: folded over lines, not cut.
        cells = [line.split("│")[2] for line in out.splitlines() if line.startswith("│")]
        assert "".join(cells).replace(" ", "") == status.replace(" ", ""), out


def test_runs_shows_the_whole_id_at_80_columns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite://{tmp_path / 'fleet.db'}"
    ledger = open_ledger(url)
    ids = ["f20c7e6d9a41b3c8", "0a1b2c3d4e5f6a7b"]
    for run_id in ids:
        ledger.register(RunInfo(run_id, host="a-build-host.example.com", pid=4242, keys=("t",)))
    ledger.close()
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["runs", "--ledger", url]) == 0
    out = capsys.readouterr().out
    assert all(f"│ {run_id} │" in out for run_id in ids), out


@pytest.mark.parametrize(
    ("command", "shown"), [("runs", "live runs in memory:"), ("budgets", "budgets in memory:")]
)
def test_the_memory_ledger_is_named_by_its_url(
    command: str, shown: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # It was <haltwise.engine.ledger.MemoryLedger object at 0x...>.
    assert main([command, "--ledger", "memory:"]) == 0
    assert capsys.readouterr().out == f"{shown}: none\n"


@pytest.mark.parametrize("max_turns", ["45", "unlimited"])
def test_the_demo_with_no_stop_ends_when_its_recording_does(
    max_turns: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Past its 40 recorded turns the scripted server answered HTTP 500 and the run ended
    abandoned; now the recorded model gives up at its last turn and the demo says what a run
    with no stop cost."""
    assert main(["demo", "--max-turns", max_turns, "--no-stuck"]) == 0
    captured = capsys.readouterr()
    assert "■ completed" in captured.out and "40 turns · 40 model calls" in captured.out
    assert "What no stop costs" in captured.out and "What the stop saved" not in captured.out
    assert "Nothing stopped the recording: its model made all 40 calls ($" in captured.out
    assert "HTTP 500" not in captured.err + captured.out


def test_the_demo_stopped_at_its_last_recorded_turn_says_what_it_saved(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["demo", "--max-turns", "39", "--no-stuck"]) == 0
    out = capsys.readouterr().out
    assert "abandoned (turn_limit)" in out
    assert "haltwise stopped it after 39 model calls" in out and "Not spent: 1 model calls" in out
