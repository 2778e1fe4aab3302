"""``haltwise run`` against a model and tools that take too long: the run's time limit stops
what is in flight (a hung reply, a slow reply, a slow shell command) within a second of the
deadline, ends ``timed_out`` with its checkpoint, and counts every call it let through. Through
the real ``openai`` client against ScriptedServer, and real shell commands."""

from __future__ import annotations

import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import openai
import pytest
from test_agent_cli import MODEL, json_lines, read, run_args

import haltwise
from haltwise.agent.loop import Agent
from haltwise.agent.store import Store
from haltwise.agent.tools import Toolbox
from haltwise.cli import main
from haltwise.testing import ScriptedServer, reply, tool_call

pytest_plugins = ["agent_fixtures"]

#: How late after its deadline a run may stop (the issue's bound).
WITHIN = 1.0


def run_timed(args: list[str]) -> tuple[int, float]:
    started = time.monotonic()
    code = main(args)
    return code, time.monotonic() - started


def label_of(capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    label: dict[str, Any] = json_lines(capsys.readouterr().out)[-1]
    return label


def test_a_hung_model_stops_at_the_deadline(
    workspace: Path, store_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with ScriptedServer([read(), reply("never", delay=30)], model=MODEL) as server:
        args = run_args(server, workspace, store_path, "Go.", "--timeout", "1", "--json", "-q")
        code, took = run_timed(args)
        sent = len(server.requests)
    label = label_of(capsys)
    assert code == 3
    assert took < 1 + WITHIN, f"stopped {took:.2f}s after the start of a 1s run"
    outcome = label["outcome"]
    assert outcome["status"] == "timed_out" and outcome["reason"] == "time_limit"
    assert "passed while a call was running" in outcome["message"]
    assert outcome["checkpoint"] is not None
    assert outcome["partial_output"] == "Reading a.txt."  # the last text is kept
    # Both requests reached the server; both are counted (the hung one at its reservation).
    assert sent == 2 and outcome["usage"]["model_calls"] == 2
    with Store(store_path) as store:
        record = store.load_run(outcome["run_id"])
    assert record.status == "timed_out"
    assert record.checkpoint is not None and record.checkpoint["run"]["model_calls"] == 2


def test_a_slow_reply_ends_timed_out_never_completed(
    workspace: Path, store_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with ScriptedServer([reply("Done, at last.", delay=3)], model=MODEL) as server:
        args = run_args(server, workspace, store_path, "Go.", "--timeout", "1", "--json", "-q")
        code, took = run_timed(args)
    outcome = label_of(capsys)["outcome"]
    assert code == 3 and outcome["status"] == "timed_out"
    assert took < 1 + WITHIN


def test_a_slow_shell_command_is_killed_at_the_deadline(
    workspace: Path, store_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sleeper = reply(tool_calls=[tool_call("run_command", {"command": "sleep 20"})])
    with ScriptedServer([sleeper, reply("unreachable")], model=MODEL) as server:
        args = run_args(
            server, workspace, store_path, "Go.", "--timeout", "1", "--yes", "--json", "-q"
        )
        code, took = run_timed(args)
    lines = json_lines(capsys.readouterr().out)
    outcome = lines[-1]["outcome"]
    assert code == 3 and outcome["status"] == "timed_out"
    assert took < 1 + WITHIN, f"the 20s command ran {took:.2f}s under a 1s limit"
    results = [line for line in lines if line.get("type") == "ToolResult"]
    assert "the run's time limit was reached: the command was killed" in results[0]["content"]
    assert "while the tool run_command was running" in outcome["message"]


def agent_for(server: ScriptedServer, workspace: Path, limits: haltwise.Limit, **kw: Any) -> Agent:
    client = openai.OpenAI(base_url=server.base_url, api_key="test", max_retries=0)
    prices = haltwise.Prices({MODEL: {"input": "100", "output": "200"}})
    return Agent(client, MODEL, Toolbox(workspace), limits=limits, pricer=prices, **kw)


def test_token_limits_lower_the_request_max_tokens(workspace: Path) -> None:
    with ScriptedServer([reply("Short.", usage=(50, 3))], model=MODEL) as server:
        agent = agent_for(server, workspace, haltwise.max_tokens(output=100), max_output_tokens=500)
        outcome = agent.send("Go.")
        agent.client.close()
        sent = server.requests[0]["max_tokens"]
    assert outcome.status is haltwise.Status.COMPLETED
    assert sent == 100


def test_the_synthesis_pass_is_counted_in_the_outcome(workspace: Path) -> None:
    script = [
        reply(tool_calls=[tool_call("list_dir")], usage=(100, 10)),
        reply("From what I saw: two files.", usage=(180, 19)),
    ]
    with ScriptedServer(script, model=MODEL) as server:
        limits = haltwise.max_turns(1, on_limit="synthesize")
        agent = agent_for(server, workspace, limits)
        outcome = agent.send("Go.")
        agent.client.close()
    assert outcome.status is haltwise.Status.COMPLETED_WITH_WARNINGS
    assert outcome.partial_output == "From what I saw: two files."
    # Both calls the server billed: 100+180 in, 10+19 out.
    assert (outcome.usage.input_tokens, outcome.usage.output_tokens) == (280, 29)
    assert outcome.usage.model_calls == 2
    assert outcome.usage.cost == (Decimal(100) * 280 + Decimal(200) * 29) / 10**6


def test_a_synthesis_with_no_budget_left_keeps_the_partial_output(workspace: Path) -> None:
    script = [
        reply("Looking.", tool_calls=[tool_call("list_dir")], usage=(100, 10)),
        reply("never sent"),
    ]
    with ScriptedServer(script, model=MODEL) as server:
        # The first request's worst case ($0.10) fits; after it ($0.012 spent) the next one's
        # (100 tokens in, 500 out: $0.11) does not, and neither does a final answer's.
        limits = haltwise.max_cost("0.105", on_limit="synthesize")
        agent = agent_for(server, workspace, limits, max_output_tokens=500)
        outcome = agent.send("Go.")
        agent.client.close()
        requests = len(server.requests)
    assert requests == 1
    assert "No final answer was written" in outcome.message
    assert outcome.partial_output == "Looking."
    assert outcome.usage.model_calls == 1
