"""``haltwise audit`` as a user runs it: text, --json, --html, --suggest, --limits, --config."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from haltwise.cli import main
from haltwise.engine.detectors import DEFAULTS

DATA = Path(__file__).parent / "data"
GOOD = [str(DATA / name) for name in ("swe-agent", "mini", "tau", "openai", "haltwise")]


def test_text_report(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["audit", *GOOD, "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "runs replayed through stuck()" in out
    assert "Where runs would have stopped:" in out
    assert "demo__repo-1 (not solved): step 7 of 10, stuck.repeat" in out
    assert "By corpus" in out
    assert "By model" in out
    assert "In all" in out


def test_json_document(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["audit", *GOOD, "--json", "--limits", "max_turns(8) | stuck()"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["limits"] == "max_turns(8) | stuck()"
    runs = {record["run_id"]: record for record in document["runs"]}
    looping = runs["demo__repo-1"]
    for key in (
        "run_id",
        "corpus",
        "model",
        "steps",
        "resolved",
        "exit_status",
        "ended_on_limit",
        "stop_step",
        "stop_reason",
        "saved_steps",
        "saved_tokens",
        "saved_cost",
    ):
        assert key in looping
    assert looping["resolved"] is False
    assert looping["exit_status"] == "exit_cost"
    assert looping["ended_on_limit"] is True
    assert looping["stop_step"] == 7
    assert looping["stop_reason"] == "stuck.repeat"
    assert looping["saved_steps"] == 3
    assert runs["demo__repo-2"]["stop_step"] is None
    assert runs["demo__repo-2"]["resolved"] is True
    # tau-bench has no usage: its cost is unknown, never "0".
    assert runs["task7-trial0"]["cost"] is None
    assert set(document["corpora"]) == {"run1", "mini", "tau", "openai", "haltwise"}
    assert document["total"]["runs"] == 8
    assert document["errors"] == []


def test_html_page(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    page = tmp_path / "audit.html"
    assert main(["audit", *GOOD, "--html", str(page), "--no-progress"]) == 0
    html = page.read_text(encoding="utf-8")
    assert html.startswith("<!doctype html>")
    assert html.count("<svg") >= 3  # the trade-off curve and a spend chart per corpus
    assert "The trade-off as thresholds sweep" in html
    assert "where haltwise stops" in html
    assert "<script" not in html and "http" not in html.split("<body>")[1]
    assert f"Wrote {page}" in capsys.readouterr().out


def test_suggest(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["audit", *GOOD, "--suggest", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "Suggested limits" in out
    assert "fewer than 20 solved runs" in out


def test_malformed_files_are_named_and_the_rest_is_reported(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["audit", str(DATA), "--json"]) == 1
    captured = capsys.readouterr()
    document = json.loads(captured.out)
    assert len(document["errors"]) == 4
    assert document["total"]["runs"] == 17
    assert "truncated.traj at line 1, column" in captured.err


def test_an_event_log_python_cannot_decode_is_a_malformed_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Lists nested deeper than ``json`` recurses, an integer longer than Python converts: named
    at their line, as the audit's other readers name them, not an internal error."""
    start = '{"type": "RunStarted", "run_id": "r"}\n'
    (tmp_path / "deep.jsonl").write_text(start + "[" * 100_000 + "]" * 100_000 + "\n")
    (tmp_path / "long.jsonl").write_text(start + '{"type": "Progress", "n": ' + "9" * 5_000 + "}\n")
    assert main(["audit", str(tmp_path), "--json"]) == 1
    err = capsys.readouterr().err
    assert "internal error" not in err
    assert re.search(
        r"deep\.jsonl at line 2: .* \(bad JSON: lists or objects nested too deeply to decode\)", err
    )
    assert re.search(
        r"long\.jsonl at line 2: .* \(bad JSON: an integer of more than \d+ digits\)", err
    )


def test_a_profile_that_cannot_be_written_is_refused_before_the_replay(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """As ``--html`` is: not after the replay, with the report lost."""
    from haltwise.audit import jobs

    def replayed(*args: object, **options: object) -> None:
        raise AssertionError("the replay ran before --write-profile was checked")

    monkeypatch.setattr(jobs, "audit_files", replayed)
    missing = tmp_path / "nowhere" / "profile.json"
    assert main(["audit", *GOOD, "--suggest", "--write-profile", str(missing)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert f"--write-profile {missing}: the folder {missing.parent} does not exist" in captured.err


def test_a_bad_limit_expression_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["audit", *GOOD, "--limits", "__import__('os')"]) == 2
    assert "is not a limit factory" in capsys.readouterr().err


def test_the_trade_off_curve_scales_the_profile(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A profile that can never fire saves nothing at any point of the curve, not the defaults
    scaled (which a threshold given in the call would put in place of the file's)."""
    profile = tmp_path / "never.json"
    never = {name: 1000 for name, default in DEFAULTS.items() if default is not None}
    profile.write_text(json.dumps({"stuck": never}), encoding="utf-8")
    page = tmp_path / "audit.html"
    limits = f"stuck(profile={str(profile)!r})"
    assert main(["audit", *GOOD, "--limits", limits, "--html", str(page), "--no-progress"]) == 0
    capsys.readouterr()
    title = r"<title>(stuck\([^<]*\)): [^<]*% cut, ([^<]*)% saved</title>"
    points = re.findall(title, page.read_text(encoding="utf-8"))
    assert len(points) == 6
    assert all(saved == "0.0" for _, saved in points), points
    assert "stuck(repeat=500, same_error=500," in points[0][0]  # the profile's 1000 halved


def test_an_expression_that_does_not_parse_is_a_usage_error_with_html(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    page = tmp_path / "audit.html"
    assert main(["audit", *GOOD, "--limits", "max_turns(", "--html", str(page)]) == 2
    assert "never closed" in capsys.readouterr().err


def test_a_missing_path_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["audit", str(DATA / "nowhere")]) == 2
    assert "no such file or folder" in capsys.readouterr().err


def test_a_cost_limit_on_unpriced_runs_is_reported_per_run(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["audit", str(DATA / "haltwise"), "--limits", "max_cost('1')", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    # The log's responses carry their billed cost, so the limit can be kept.
    assert all(record["error"] is None for record in document["runs"])
    assert (
        main(
            [
                "audit",
                str(DATA / "swe-agent"),
                "--model",
                "no-such-model-9",
                "--json",
                "--limits",
                "max_cost('1')",
            ]
        )
        == 0
    )
    document = json.loads(capsys.readouterr().out)
    errors = [record["error"] for record in document["runs"]]
    assert all(error and "no-such-model-9" in error for error in errors)
    assert document["total"]["errors"] == 2


def test_config_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "haltwise.toml"
    config.write_text("max_turns = 4\n")
    assert main(["audit", *GOOD, "--config", str(config), "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert "max_turns(4)" in document["limits"]
    runs = {record["run_id"]: record for record in document["runs"]}
    assert runs["demo__repo-2"]["stop_reason"] == "turn_limit"
    assert runs["demo__repo-2"]["stop_step"] == 4


def test_the_progress_bar_and_its_plain_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    import io
    import sys

    from haltwise.audit.cli import _progress

    stream = io.StringIO()
    with _progress(3, True, stream) as tick:
        for name in ("a", "b", "c"):
            tick(name)
    monkeypatch.setitem(sys.modules, "rich.progress", None)
    plain = io.StringIO()
    with _progress(50, True, plain) as tick:
        for index in range(50):
            tick(str(index))
    assert "50/50 files" in plain.getvalue()
    quiet = io.StringIO()
    with _progress(5, False, quiet) as tick:
        tick("x")
    assert quiet.getvalue() == ""
