"""The agent's own costs, with a scripted model (``haltwise.testing.ScriptedServer``) and the
real ``openai`` client, streaming:

1. **Overhead per turn.** The same scripted session (each turn: a streamed reply with one tool
   call that reads a small file) is driven side by side, in interleaved rounds, by
   - ``bare loop``: the openai stream consumed and the tool call assembled and run by hand,
     no governor;
   - ``Agent``: ``haltwise.agent.Agent`` with the chat's default limits (``max_turns(25,
     warn_at=0.8) | stuck()``, unlimited turns here so the session runs to its end), no store;
   - ``Agent + store``: the same with the SQLite store checkpointing every turn.
   The difference per turn is what the agent adds: the governor's events, the stream's helper
   thread, the listener, the conversation bookkeeping (and the checkpoint).
2. **Last token to widget.** ``haltwise chat``'s run path (``ChatApp.run_prompt``, its live
   widget rendered by rich into memory) on single-turn replies: the time from the last streamed
   text delta reaching the agent to the widget having been redrawn with that reply's tokens.

``python benchmarks/run.py agent``
"""

from __future__ import annotations

import argparse
import io
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import openai
from rich.console import Console

from haltwise.agent.chat import ChatApp
from haltwise.agent.loop import Agent, AgentStatus, Fanout, Listener
from haltwise.agent.options import Endpoint, Setup, agent_limits
from haltwise.agent.render import TerminalView
from haltwise.agent.store import Store
from haltwise.agent.tools import Toolbox
from haltwise.config import Settings
from haltwise.testing import ScriptedServer, ScriptEntry, reply, tool_call

MODEL = "gpt-4o-mini"
TURNS = 60
ROUNDS = 5
WIDGET_RUNS = 60


def session(turns: int) -> list[ScriptEntry]:
    script: list[ScriptEntry] = [
        reply(
            f"Reading file {i}, as the plan says.",
            tool_calls=[tool_call("read_file", {"path": f"f{i}.txt"})],
            usage=(1000 + 50 * i, 20),
        )
        for i in range(turns - 1)
    ]
    script.append(reply("All files read.", usage=(1000 + 50 * turns, 5)))
    return script


def bare_loop(client: Any, toolbox: Toolbox) -> None:
    """The same session, by hand: no governor."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Read every file."}]
    tools = toolbox.schemas()
    while True:
        stream = client.chat.completions.create(
            model=MODEL,
            messages=messages,
            tools=tools,
            stream=True,
            stream_options={"include_usage": True},
        )
        text = ""
        calls: dict[int, dict[str, str]] = {}
        for chunk in stream:
            for choice in chunk.choices:
                delta = choice.delta
                text += delta.content or ""
                for part in delta.tool_calls or ():
                    call = calls.setdefault(part.index, {"id": "", "name": "", "arguments": ""})
                    call["id"] = part.id or call["id"]
                    if part.function is not None:
                        call["name"] = call["name"] or part.function.name or ""
                        call["arguments"] += part.function.arguments or ""
        assistant: dict[str, Any] = {"role": "assistant", "content": text or None}
        if calls:
            assistant["tool_calls"] = [
                {
                    "id": c["id"],
                    "type": "function",
                    "function": {"name": c["name"], "arguments": c["arguments"]},
                }
                for c in calls.values()
            ]
        messages.append(assistant)
        if not calls:
            return
        for c in calls.values():
            output = toolbox.call(c["name"], c["arguments"])
            messages.append({"role": "tool", "tool_call_id": c["id"], "content": output.content})


def unlimited_limits() -> Any:
    return agent_limits(Settings(max_turns=None), interactive=True)


def overhead() -> None:
    with tempfile.TemporaryDirectory() as folder:
        workspace = Path(folder) / "ws"
        workspace.mkdir()
        for i in range(TURNS):
            (workspace / f"f{i}.txt").write_text(f"file {i}\n" * 20)
        toolbox = Toolbox(workspace)

        def timed(run: Callable[[Any], None]) -> float:
            with ScriptedServer(session(TURNS), model=MODEL) as server:
                client = openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0)
                started = time.perf_counter()
                run(client)
                elapsed = time.perf_counter() - started
                assert server.responses_served == TURNS, server.responses_served
                client.close()
            return elapsed / TURNS

        def agent_run(store: Store | None) -> Callable[[Any], None]:
            def run(client: Any) -> None:
                agent = Agent(client, MODEL, toolbox, limits=unlimited_limits(), store=store)
                outcome = agent.send("Read every file.")
                assert outcome.usage.turns == TURNS, outcome

            return run

        results: dict[str, list[float]] = {"bare loop": [], "Agent": [], "Agent + store": []}
        with Store(Path(folder) / "bench.db") as store:
            contenders: dict[str, Callable[[Any], None]] = {
                "bare loop": lambda client: bare_loop(client, toolbox),
                "Agent": agent_run(None),
                "Agent + store": agent_run(store),
            }
            for run in contenders.values():  # warm up
                timed(run)
            for _ in range(ROUNDS):
                for name, run in contenders.items():
                    results[name].append(timed(run))
    base = statistics.median(results["bare loop"])
    print(f"1. per turn, {TURNS}-turn scripted session, median of {ROUNDS} interleaved rounds")
    print(f"   {'contender':<16}{'ms/turn':>10}{'added ms/turn':>16}")
    for name, times in results.items():
        median = statistics.median(times)
        added = "" if name == "bare loop" else f"{(median - base) * 1000:>16.2f}"
        print(f"   {name:<16}{median * 1000:>10.2f}{added}")


class _TimedChat(ChatApp):
    """The chat, timing the widget's redraw after the last streamed delta."""

    def __init__(self, args: argparse.Namespace, console: Console) -> None:
        super().__init__(args, console=console)
        self.last_delta = 0.0
        self.latencies: list[float] = []
        self._tokens_seen = -1

    def status(self, status: AgentStatus) -> None:
        super().status(status)  # redraws the live widget (refresh=True): rendered on return
        if status.tokens != self._tokens_seen and self.last_delta:
            self.latencies.append(time.perf_counter() - self.last_delta)
            self.last_delta = 0.0
        self._tokens_seen = status.tokens


class _LastDelta(Listener):
    def __init__(self, chat: _TimedChat) -> None:
        self.chat = chat

    def text(self, delta: str) -> None:
        self.chat.last_delta = time.perf_counter()


def widget_latency() -> None:
    words = " ".join(f"word{i}" for i in range(60))
    script: list[ScriptEntry] = [reply(words, usage=(500, 60)) for _ in range(WIDGET_RUNS + 5)]
    sink = io.StringIO()
    console = Console(file=sink, force_terminal=True, width=100)
    with tempfile.TemporaryDirectory() as folder, ScriptedServer(script, model=MODEL) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0)
        chat = _TimedChat(argparse.Namespace(resume=None), console)
        agent = Agent(
            client,
            MODEL,
            Toolbox(folder),
            limits=agent_limits(Settings(), interactive=True),
            listener=Fanout(_LastDelta(chat), TerminalView(console), chat),
        )
        chat.setup = Setup(
            agent, Store(Path(folder) / "s.db"), Endpoint(server.base_url, "x", MODEL), Settings()
        )
        for _ in range(5):
            chat.run_prompt("Say it.")
        chat.latencies.clear()
        for _ in range(WIDGET_RUNS):
            chat.run_prompt("Say it.")
        chat.setup.store.close()
        client.close()
    latencies = sorted(chat.latencies)
    assert len(latencies) == WIDGET_RUNS, len(latencies)
    p95 = latencies[int(0.95 * (len(latencies) - 1))]
    print(f"2. last streamed token to widget redrawn, {WIDGET_RUNS} chat runs")
    print(
        f"   median {statistics.median(latencies) * 1000:.2f} ms   p95 {p95 * 1000:.2f} ms   "
        f"max {latencies[-1] * 1000:.2f} ms"
    )


def main() -> None:
    overhead()
    widget_latency()


if __name__ == "__main__":
    main()
