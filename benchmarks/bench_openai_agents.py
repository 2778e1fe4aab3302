"""What governing an OpenAI Agents SDK agent costs: the same run with and without haltwise.

The task: 5 turns of 2 parallel tool calls, then the answer (6 model requests, 10 tool calls),
by an SDK ``Agent`` whose ``OpenAIChatCompletionsModel`` talks real HTTP to ``ScriptedServer``.
Contenders, timed side by side in interleaved rounds, in one process and one event loop:

- ``Runner.run``: the agent alone;
- ``do-nothing hooks``: the same hooks as haltwise's, doing nothing: the model wrapped in a
  ``Model`` that only passes each call on, and a tool input and a tool output guardrail that
  only allow. What the SDK itself costs for these hooks: the floor of this integration;
- ``govern(agent, guard)``: an identical agent under ``max_turns(25) | max_tool_calls(50) |
  max_tokens(200_000) | max_cost("5.00") | timeout(minutes=30)``, priced from a table, so every
  request, response, tool call and tool result is reported and every limit checks it;
- ``govern at BASE``: the same with the adapter of another revision (``HALTWISE_BENCH_BASE``,
  by default ``main``), extracted with ``git archive`` and imported beside this one, so that a
  change to the adapter is measured before and after in the same run.

The added wall time is the median of the per-round ratios (the goal: under 2%), and per run. As a
diagnostic, the same pair runs on an in-process ``Model`` (no HTTP): there the SDK alone is the
floor, and the adapter's share is at its largest.

``python benchmarks/run.py openai_agents``; ``python benchmarks/bench_openai_agents.py
--instructions`` counts the instructions of the runs over HTTP instead, under Valgrind
(``instructions.py``): the same comparison, unmoved by the machine's load.
"""

from __future__ import annotations

import asyncio
import gc
import importlib
import os
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from agents import (
    Agent,
    FunctionTool,
    Model,
    ModelResponse,
    ModelSettings,
    OpenAIChatCompletionsModel,
    RunConfig,
    Runner,
    ToolGuardrailFunctionOutput,
    ToolInputGuardrail,
    ToolInputGuardrailData,
    ToolOutputGuardrail,
    ToolOutputGuardrailData,
    function_tool,
)
from agents.usage import Usage as SDKUsage
from openai import AsyncOpenAI
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

import instructions
from haltwise import Guard, Limit, Prices, max_cost, max_tokens, max_tool_calls, max_turns
from haltwise import timeout as time_limit
from haltwise.adapters import openai_agents as this_adapter
from haltwise.testing import Reply, ScriptedServer, reply, tool_call
from revisions import load_revision

MODEL = "scripted-model"
TURNS = 5
CALLS_PER_TURN = 2
REQUESTS_PER_RUN = TURNS + 1
ROUNDS = 120
RUNS_PER_BATCH = 1
LOCAL_ROUNDS = 150
LOCAL_RUNS_PER_BATCH = 2
#: Rounds between two garbage collections (outside the timings; a full one takes a while).
GC_EVERY = 20
GOAL = 0.02
#: ``--instructions``: phases per contender, and runs per phase (the counts barely move).
INSTRUCTION_ROUNDS = 2
INSTRUCTION_RUNS = 3
#: The revision whose adapter is timed beside this one's.
BASE_REVISION = os.environ.get("HALTWISE_BENCH_BASE", "main")
PRICES = Prices({MODEL: {"input": "0.15", "output": "0.60"}})
CONFIG = RunConfig(tracing_disabled=True)
ANSWER = "Everything was looked up."


def limits() -> Limit:
    return (
        max_turns(25)
        | max_tool_calls(50)
        | max_tokens(200_000)
        | max_cost("5.00")
        | time_limit(minutes=30)
    )


def base_guard(base: Any) -> Any:
    """The benchmark's guard, built with the base revision's package."""
    return base.Guard(
        base.max_turns(25)
        | base.max_tool_calls(50)
        | base.max_tokens(200_000)
        | base.max_cost("5.00")
        | base.timeout(minutes=30),
        pricer=base.Prices({MODEL: {"input": "0.15", "output": "0.60"}}),
    )


def turn_of(body: dict[str, Any]) -> int:
    return sum(1 for message in body["messages"] if message["role"] == "assistant")


def scripted(body: dict[str, Any]) -> Reply:
    """The next reply of the task, from how far the conversation has got."""
    turn = turn_of(body)
    if turn < TURNS:
        calls = [tool_call("lookup", {"key": f"k{turn}-{n}"}) for n in range(CALLS_PER_TURN)]
        return reply(tool_calls=calls, usage=(400 + 150 * turn, 30))
    return reply(ANSWER, usage=(400 + 150 * turn, 12))


class LocalModel(Model):
    """The same task in process: the SDK and the adapter with no HTTP under them."""

    model = MODEL

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        items = kwargs["input"] if "input" in kwargs else args[1]
        calls_made = sum(1 for item in items if _type_of(item) == "function_call")
        turn = calls_made // CALLS_PER_TURN
        usage = SDKUsage(requests=1, input_tokens=400 + 150 * turn, output_tokens=30)
        if turn < TURNS:
            calls: list[Any] = [
                ResponseFunctionToolCall(
                    type="function_call",
                    name="lookup",
                    arguments=f'{{"key": "k{turn}-{n}"}}',
                    call_id=f"call_{turn}_{n}",
                )
                for n in range(CALLS_PER_TURN)
            ]
            return ModelResponse(output=calls, usage=usage, response_id=None)
        text = ResponseOutputText(type="output_text", text=ANSWER, annotations=[])
        message = ResponseOutputMessage(
            id="msg", type="message", role="assistant", status="completed", content=[text]
        )
        return ModelResponse(output=[message], usage=usage, response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError


class PassThrough(Model):
    """A model wrapper that only passes each call on, as haltwise's does besides reporting."""

    def __init__(self, inner: Model) -> None:
        self.inner = inner

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        return await self.inner.get_response(*args, **kwargs)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        return self.inner.stream_response(*args, **kwargs)


_ALLOW = ToolGuardrailFunctionOutput.allow()


def _allow_input(data: ToolInputGuardrailData) -> ToolGuardrailFunctionOutput:
    return _ALLOW


async def _allow_output(data: ToolOutputGuardrailData) -> ToolGuardrailFunctionOutput:
    return _ALLOW


def with_idle_hooks(agent: Agent[Any]) -> Agent[Any]:
    """``agent`` with haltwise's hooks, doing nothing: a pass-through model, and a tool input
    guardrail (sync, as haltwise's) and a tool output guardrail (async) that only allow."""
    assert isinstance(agent.model, Model)
    agent.model = PassThrough(agent.model)
    for tool in agent.tools:
        assert isinstance(tool, FunctionTool)
        tool.tool_input_guardrails = [ToolInputGuardrail(_allow_input, name="idle")]
        tool.tool_output_guardrails = [ToolOutputGuardrail(_allow_output, name="idle")]
    return agent


def _type_of(item: Any) -> Any:
    return item.get("type") if isinstance(item, dict) else getattr(item, "type", None)


def lookup_tool() -> FunctionTool:
    @function_tool
    def lookup(key: str) -> str:
        """Look a key up."""
        return f"value of {key}"

    return lookup


def make_agent(model: Model) -> Agent[Any]:
    return Agent(
        name="looker",
        instructions="Look everything up.",
        model=model,
        model_settings=ModelSettings(max_tokens=1024),
        tools=[lookup_tool()],
    )


Contender = tuple[str, Callable[[], Awaitable[object]]]


def contenders(new_model: Callable[[], Model], base: Any) -> list[Contender]:
    """The bare run, the governed one, and the governed one at ``base`` (the base revision's
    package) unless it is a string: the reason it could not be loaded."""
    alone = make_agent(new_model())
    idle = with_idle_hooks(make_agent(new_model()))

    async def bare() -> object:
        result = await Runner.run(alone, "Look everything up.", run_config=CONFIG)
        assert result.final_output == ANSWER
        return result

    async def floor() -> object:
        return await Runner.run(idle, "Look everything up.", run_config=CONFIG)

    def governed_by(adapter: Any, guard: Any) -> Callable[[], Awaitable[object]]:
        governed = adapter.govern(make_agent(new_model()), guard)
        config = RunConfig(tracing_disabled=True)  # each adapter wraps its config's provider

        async def under_haltwise() -> object:
            done = await governed.run("Look everything up.", run_config=config)
            assert done.completed, done.outcome
            assert done.usage.tool_calls == TURNS * CALLS_PER_TURN
            return done

        return under_haltwise

    players = [
        ("Runner.run", bare),
        ("do-nothing hooks", floor),
        ("govern(agent, guard)", governed_by(this_adapter, Guard(limits(), pricer=PRICES))),
    ]
    if not isinstance(base, str):
        adapter = importlib.import_module(f"{base.__name__}.adapters.openai_agents")
        players.append((f"govern at {BASE_REVISION}", governed_by(adapter, base_guard(base))))
    return players


#: Per contender: (wall seconds per run, CPU seconds per run) of each round.
Samples = dict[str, list[tuple[float, float]]]


async def time_batch(run: Callable[[], Awaitable[object]], runs: int) -> tuple[float, float]:
    """Wall and CPU seconds per run over ``runs`` runs (the CPU time of the whole process,
    the scripted server's threads included: the same work for both contenders)."""
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(runs):
        await run()
    return (time.perf_counter() - wall) / runs, (time.process_time() - cpu) / runs


async def measure(players: list[Contender], rounds: int, runs: int) -> Samples:
    for _, run in players:  # warm-up: connections, prices and code paths
        await time_batch(run, 3)
    times: Samples = {name: [] for name, _ in players}
    for round_no in range(rounds):
        order = players if round_no % 2 == 0 else players[::-1]
        for name, run in order:
            times[name].append(await time_batch(run, runs))
        if round_no % GC_EVERY == GC_EVERY - 1:
            gc.collect()
    return times


def report(title: str, times: Samples) -> tuple[float, float]:
    """Print the contenders side by side; this revision's added share of wall time and of CPU
    time (the medians of the per-round ratios to the bare run)."""
    (_, bare), *others = times.items()
    shares: list[float] = []
    print(title)
    for clock, label in ((0, "wall"), (1, "CPU")):
        for name, samples in times.items():
            values = [sample[clock] for sample in samples]
            deciles = statistics.quantiles(values, n=10)
            print(
                f"  {label:5}{name:24}{statistics.median(values) * 1e3:>9.2f} ms/run"
                f"   p10-p90 {deciles[0] * 1e3:.2f}-{deciles[-1] * 1e3:.2f}"
            )
        for name, samples in others:
            ratio = statistics.median(
                mine[clock] / theirs[clock] for mine, theirs in zip(samples, bare, strict=True)
            )
            added = statistics.median(m[clock] for m in samples) - statistics.median(
                t[clock] for t in bare
            )
            print(
                f"  {label:5}added by {name}: {(ratio - 1) * 100:+.2f}% (median of per-round "
                f"ratios), {added * 1e6:+.0f} us/run, {added * 1e6 / REQUESTS_PER_RUN:+.0f} us "
                "per model request"
            )
            if name == "govern(agent, guard)":
                shares.append(ratio - 1)
    return shares[0], shares[1]


async def benchmark() -> tuple[float, float]:
    base = load_revision(BASE_REVISION, "haltwise_base")
    if isinstance(base, str):
        print(f"(the adapter at {BASE_REVISION} is not timed: {base})")
    with ScriptedServer([scripted], repeat_last=True) as server:
        client = AsyncOpenAI(base_url=server.base_url, api_key="test", max_retries=0)

        def over_http() -> Model:
            return OpenAIChatCompletionsModel(model=MODEL, openai_client=client)

        title = (
            f"{REQUESTS_PER_RUN} requests and {TURNS * CALLS_PER_TURN} tool calls a run, over "
            f"HTTP; median of {ROUNDS} interleaved rounds of {RUNS_PER_BATCH} runs"
        )
        shares = report(title, await measure(contenders(over_http, base), ROUNDS, RUNS_PER_BATCH))
        await client.close()
    local = await measure(contenders(LocalModel, base), LOCAL_ROUNDS, LOCAL_RUNS_PER_BATCH)
    report("diagnostic: the same, on an in-process Model (the SDK alone is the floor)", local)
    return shares


async def phases() -> None:
    """``--phases``, under callgrind (``count_instructions``): the runs over HTTP."""
    with ScriptedServer([scripted], repeat_last=True) as server:
        client = AsyncOpenAI(base_url=server.base_url, api_key="test", max_retries=0)

        def over_http() -> Model:
            return OpenAIChatCompletionsModel(model=MODEL, openai_client=client)

        base = load_revision(BASE_REVISION, "haltwise_base")
        await instructions.run_phases(
            contenders(over_http, base), INSTRUCTION_ROUNDS, INSTRUCTION_RUNS
        )
        await client.close()


def count_instructions() -> None:
    phases = instructions.counted(
        Path(__file__),
        f"one run ({REQUESTS_PER_RUN} requests and {TURNS * CALLS_PER_TURN} "
        "tool calls over HTTP, the scripted server's included), "
        f"{INSTRUCTION_ROUNDS} phases of {INSTRUCTION_RUNS} runs each",
    )
    if phases is None:
        return
    instructions.report(phases, INSTRUCTION_RUNS, lambda name: "Runner.run")


def main() -> None:
    wall, cpu = asyncio.run(benchmark())
    for label, share in (("wall", wall), ("CPU", cpu)):
        verdict = "within" if share < GOAL else "OVER"
        print(f"goal: under {GOAL:.0%} added over HTTP, {label} time: {verdict} ({share:+.2%})")
    print("(on a busy machine the wall-time ratio is noisy; haltwise does no I/O, so the")
    print(" CPU-time ratio is what the wall-time one is on an idle machine)")


if __name__ == "__main__":
    if "--instructions" in sys.argv:
        count_instructions()
    elif "--phases" in sys.argv:
        asyncio.run(phases())
    else:
        main()
