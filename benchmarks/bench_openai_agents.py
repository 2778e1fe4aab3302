"""What governing an OpenAI Agents SDK agent costs: the same run with and without haltwise.

The task: 5 turns of 2 parallel tool calls, then the answer (6 model requests, 10 tool calls),
by an SDK ``Agent`` whose ``OpenAIChatCompletionsModel`` talks real HTTP to ``ScriptedServer``.
Contenders, timed side by side in interleaved rounds, in one process and one event loop:

- ``Runner.run``: the agent alone;
- ``govern(agent, guard)``: an identical agent under ``max_turns(25) | max_tool_calls(50) |
  max_tokens(200_000) | max_cost("5.00") | timeout(minutes=30)``, priced from a table, so every
  request, response, tool call and tool result is reported and every limit checks it.

The added wall time is the median of the per-round ratios (the goal: under 2%), and per run. As a
diagnostic, the same pair runs on an in-process ``Model`` (no HTTP): there the SDK alone is the
floor, and the adapter's share is at its largest.

``python benchmarks/run.py openai_agents``
"""

from __future__ import annotations

import asyncio
import gc
import statistics
import time
from collections.abc import Awaitable, Callable
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
    function_tool,
)
from agents.usage import Usage as SDKUsage
from openai import AsyncOpenAI
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

from haltwise import Guard, Limit, Prices, max_cost, max_tokens, max_tool_calls, max_turns
from haltwise import timeout as time_limit
from haltwise.adapters.openai_agents import govern
from haltwise.testing import Reply, ScriptedServer, reply, tool_call

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


def contenders(new_model: Callable[[], Model]) -> list[Contender]:
    alone = make_agent(new_model())
    governed = govern(make_agent(new_model()), Guard(limits(), pricer=PRICES))

    async def bare() -> object:
        result = await Runner.run(alone, "Look everything up.", run_config=CONFIG)
        assert result.final_output == ANSWER
        return result

    async def under_haltwise() -> object:
        done = await governed.run("Look everything up.", run_config=CONFIG)
        assert done.completed, done.outcome
        assert done.usage.tool_calls == TURNS * CALLS_PER_TURN
        return done

    return [("Runner.run", bare), ("govern(agent, guard)", under_haltwise)]


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
    """Print the contenders side by side; the added share of wall time and of CPU time (the
    medians of the per-round ratios)."""
    (_, bare), (_, governed) = times.items()
    shares = []
    print(title)
    for clock, label in ((0, "wall"), (1, "CPU")):
        for name, samples in times.items():
            values = [sample[clock] for sample in samples]
            deciles = statistics.quantiles(values, n=10)
            print(
                f"  {label:5}{name:24}{statistics.median(values) * 1e3:>9.2f} ms/run"
                f"   p10-p90 {deciles[0] * 1e3:.2f}-{deciles[-1] * 1e3:.2f}"
            )
        ratio = statistics.median(
            mine[clock] / theirs[clock] for mine, theirs in zip(governed, bare, strict=True)
        )
        added = statistics.median(m[clock] for m in governed) - statistics.median(
            t[clock] for t in bare
        )
        print(
            f"  {label:5}added by haltwise: {(ratio - 1) * 100:+.2f}% (median of per-round "
            f"ratios), {added * 1e6:+.0f} us/run, {added * 1e6 / REQUESTS_PER_RUN:+.0f} us "
            "per model request"
        )
        shares.append(ratio - 1)
    return shares[0], shares[1]


async def benchmark() -> tuple[float, float]:
    with ScriptedServer([scripted], repeat_last=True) as server:
        client = AsyncOpenAI(base_url=server.base_url, api_key="test", max_retries=0)

        def over_http() -> Model:
            return OpenAIChatCompletionsModel(model=MODEL, openai_client=client)

        title = (
            f"{REQUESTS_PER_RUN} requests and {TURNS * CALLS_PER_TURN} tool calls a run, over "
            f"HTTP; median of {ROUNDS} interleaved rounds of {RUNS_PER_BATCH} runs"
        )
        shares = report(title, await measure(contenders(over_http), ROUNDS, RUNS_PER_BATCH))
        await client.close()
    local = await measure(contenders(LocalModel), LOCAL_ROUNDS, LOCAL_RUNS_PER_BATCH)
    report("diagnostic: the same, on an in-process Model (the SDK alone is the floor)", local)
    return shares


def main() -> None:
    wall, cpu = asyncio.run(benchmark())
    for label, share in (("wall", wall), ("CPU", cpu)):
        verdict = "within" if share < GOAL else "OVER"
        print(f"goal: under {GOAL:.0%} added over HTTP, {label} time: {verdict} ({share:+.2%})")
    print("(on a busy machine the wall-time ratio is noisy; haltwise does no I/O, so the")
    print(" CPU-time ratio is what the wall-time one is on an idle machine)")


if __name__ == "__main__":
    main()
