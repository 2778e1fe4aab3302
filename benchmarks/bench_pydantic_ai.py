"""What governing a pydantic-ai agent costs: the same run with and without haltwise.

One pydantic-ai ``Agent`` (its OpenAI chat model, over real HTTP to ``ScriptedServer``) runs the
same task: 5 turns of 2 parallel tool calls, then the answer (6 model requests, 10 tool calls).
Contenders, timed side by side in interleaved rounds in one process and one event loop:

- ``pydantic-ai``: ``agent.run(prompt)``;
- ``govern(agent, guard)``: ``govern(agent, guard).run(prompt)``, with ``max_turns(25) |
  max_tool_calls(50) | max_tokens(200_000) | max_cost("5.00") | timeout(minutes=30)`` priced
  from a table, so that every hook reports and every limit checks;
- ``+ a do-nothing capability``: ``agent.run(prompt, capabilities=[...])`` with a capability
  that overrides the same five hooks and does nothing in them. pydantic-ai does work of its own
  for every run that has a capability (binding, combining, a context per hook call); this row is
  that floor, which any hook-based integration pays, so that haltwise's own share shows;
- ``+ an empty capability``: a capability that overrides no hook at all. pydantic-ai calls every
  hook of every capability of a run, with a context of its own for each call, so this costs
  what the do-nothing one does: the floor belongs to having a capability, not to the hooks;
- ``model wrapped, no capability``: ``agent.run(prompt, model=WrapperModel(model))``, the model
  behind pydantic-ai's pass-through wrapper: what a capability-free integration would pay for
  the model side. (pydantic-ai offers no capability-free way to wrap the agent's own tools,
  which haltwise must refuse before they run: ``get_wrapper_toolset`` is a capability's.)
- ``govern at BASE``: ``govern(agent, guard)`` with the adapter of another revision
  (``HALTWISE_BENCH_BASE``, by default ``main``), extracted with ``git archive`` and imported
  beside this one, so that a change to the adapter is measured before and after in one run.

The added wall time is the median of the per-round ratios to the bare run (the goal: under 2%);
the CPU time of the process (the server's thread included) is shown beside it, as it is steadier
on a busy machine.
As a diagnostic, the same three also run on pydantic-ai's in-process ``FunctionModel`` (no
HTTP), where the framework alone is the denominator and every share is at its largest.

``python benchmarks/run.py pydantic_ai``; ``python benchmarks/bench_pydantic_ai.py
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

from pydantic_ai import Agent, RunContext
from pydantic_ai.capabilities import (
    AbstractCapability,
    RawOutput,
    ValidatedToolArgs,
    WrapOutputValidateHandler,
    WrapToolExecuteHandler,
)
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models import Model, ModelRequestContext
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.models.wrapper import WrapperModel
from pydantic_ai.output import OutputContext
from pydantic_ai.providers.openai import OpenAIProvider
from pydantic_ai.tools import ToolDefinition

import instructions
from haltwise import Guard, Limit, Prices, max_cost, max_tokens, max_tool_calls, max_turns
from haltwise import timeout as time_limit
from haltwise.adapters.pydantic_ai import govern
from haltwise.testing import Reply, ScriptedServer, reply, tool_call
from revisions import load_revision

MODEL = "scripted-model"
TURNS = 5
CALLS_PER_TURN = 2
REQUESTS_PER_RUN = TURNS + 1
#: One run's wall time scatters by several percent on a busy machine: at 80 rounds the median
#: ratio still moved by 2 to 3 points from one invocation to the next, as much as the goal.
ROUNDS = 200
RUNS_PER_BATCH = 1
LOCAL_ROUNDS = 150
LOCAL_RUNS_PER_BATCH = 1
GOAL = 0.02
#: ``--instructions``: phases per contender, and runs per phase (the counts barely move).
INSTRUCTION_ROUNDS = 2
INSTRUCTION_RUNS = 3
#: The revision whose adapter is timed beside this one's.
BASE_REVISION = os.environ.get("HALTWISE_BENCH_BASE", "main")
PRICES = Prices({MODEL: {"input": "0.15", "output": "0.60"}})


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


def scripted(body: dict[str, Any]) -> Reply:
    """The next reply of the task, from how far the conversation has got."""
    turn = sum(1 for message in body["messages"] if message["role"] == "assistant")
    if turn < TURNS:
        calls = [tool_call("lookup", {"key": f"k{turn}-{n}"}) for n in range(CALLS_PER_TURN)]
        return reply(tool_calls=calls, usage=(400 + 150 * turn, 30))
    return reply("Everything was looked up.", usage=(400 + 150 * turn, 12))


def scripted_locally(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    turn = sum(1 for message in messages if isinstance(message, ModelResponse))
    if turn < TURNS:
        calls = [ToolCallPart("lookup", {"key": f"k{turn}-{n}"}) for n in range(CALLS_PER_TURN)]
        return ModelResponse(parts=calls)
    return ModelResponse(parts=[TextPart("Everything was looked up.")])


def make_agent(model: Model) -> Agent[None, str]:
    # Named: an unnamed agent looks its name up in its caller's frame on every run, work that
    # ``govern`` skips (``infer_name=False``) and that would be timed against the bare run.
    agent: Agent[None, str] = Agent(model, name="looker", model_settings={"max_tokens": 1024})

    @agent.tool_plain
    def lookup(key: str) -> str:
        """Look a key up."""
        return f"value of {key}"

    return agent


class DoNothing(AbstractCapability[Any]):
    """The five hooks haltwise's capability overrides, overridden to do nothing."""

    async def before_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        return request_context

    async def prepare_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        return request_context

    async def after_model_request(
        self,
        ctx: RunContext[Any],
        *,
        request_context: ModelRequestContext,
        response: ModelResponse,
    ) -> ModelResponse:
        return response

    async def wrap_tool_execute(
        self,
        ctx: RunContext[Any],
        *,
        call: ToolCallPart,
        tool_def: ToolDefinition,
        args: ValidatedToolArgs,
        handler: WrapToolExecuteHandler,
    ) -> Any:
        return await handler(args)

    async def wrap_output_validate(
        self,
        ctx: RunContext[Any],
        *,
        output_context: OutputContext,
        output: RawOutput,
        handler: WrapOutputValidateHandler,
    ) -> Any:
        return await handler(output)


class NoHooks(AbstractCapability[Any]):
    """A capability that overrides nothing."""


Contender = tuple[str, Callable[[], Awaitable[object]]]


def contenders(model: Model, base: Any) -> list[Contender]:
    """The bare run, the floor, the governed run, and the governed run at ``base`` (the base
    revision's package) unless it is a string: the reason it could not be loaded."""
    agent = make_agent(model)
    governed = govern(agent, Guard(limits(), pricer=PRICES))

    async def bare() -> object:
        result = await agent.run("Look everything up.")
        assert result.output == "Everything was looked up."
        return result

    async def floor() -> object:
        return await agent.run("Look everything up.", capabilities=[DoNothing()])

    async def empty() -> object:
        return await agent.run("Look everything up.", capabilities=[NoHooks()])

    wrapped = WrapperModel(model)

    async def model_wrapped() -> object:
        return await agent.run("Look everything up.", model=wrapped)

    async def under_haltwise() -> object:
        result = await governed.run("Look everything up.")
        assert result.completed, result.outcome
        assert result.usage.tool_calls == TURNS * CALLS_PER_TURN
        return result

    players: list[Contender] = [
        ("pydantic-ai", bare),
        ("+ a do-nothing capability", floor),
        ("+ an empty capability", empty),
        ("model wrapped, no capability", model_wrapped),
        ("govern(agent, guard)", under_haltwise),
    ]
    if not isinstance(base, str):
        adapter = importlib.import_module(f"{base.__name__}.adapters.pydantic_ai")
        governed_at_base = adapter.govern(agent, base_guard(base))

        async def under_base() -> object:
            result = await governed_at_base.run("Look everything up.")
            assert result.completed, result.outcome
            return result

        players.append((f"govern at {BASE_REVISION}", under_base))
    return players


#: One timing: (wall seconds, CPU seconds of this process, the scripted server's thread included).
Sample = tuple[float, float]


async def time_batch(run: Callable[[], Awaitable[object]], runs: int) -> Sample:
    """Wall and CPU seconds per run over ``runs`` runs."""
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(runs):
        await run()
    return (time.perf_counter() - wall) / runs, (time.process_time() - cpu) / runs


async def measure(players: list[Contender], rounds: int, runs: int) -> dict[str, list[Sample]]:
    for _, run in players:  # warm-up: connections opened, prices resolved, code hot
        await time_batch(run, 3)
    times: dict[str, list[Sample]] = {name: [] for name, _ in players}
    for round_no in range(rounds):
        shift = round_no % len(players)
        for name, run in players[shift:] + players[:shift]:
            times[name].append(await time_batch(run, runs))
        if round_no % 10 == 9:
            gc.collect()
    return times


def ratio(times: dict[str, list[Sample]], name: str, which: int) -> float:
    """The median of the per-round ratios of ``name`` to the bare run (0: wall, 1: CPU)."""
    pairs = zip(times[name], times["pydantic-ai"], strict=True)
    return statistics.median(mine[which] / base[which] for mine, base in pairs)


def report(title: str, times: dict[str, list[Sample]]) -> float:
    """Print one table; return haltwise's added share of the bare run's wall time."""
    print(title)
    print(f"  {'':28}{'wall ms/run':>12}{'ratio':>8}{'CPU ms/run':>12}{'ratio':>8}")
    for name, samples in times.items():
        wall = statistics.median(sample[0] for sample in samples) * 1e3
        cpu = statistics.median(sample[1] for sample in samples) * 1e3
        print(
            f"  {name:28}{wall:>12.2f}{ratio(times, name, 0):>7.3f}x"
            f"{cpu:>12.2f}{ratio(times, name, 1):>7.3f}x"
        )
    for which, what in ((0, "wall"), (1, "CPU")):
        governed = ratio(times, "govern(agent, guard)", which) - 1
        floor = ratio(times, "+ a do-nothing capability", which) - 1
        print(
            f"  added, {what}: {governed * 100:+.2f}% in all: pydantic-ai's capability floor "
            f"{floor * 100:+.2f}%, haltwise's own {(governed - floor) * 100:+.2f}%"
        )
    return ratio(times, "govern(agent, guard)", 0) - 1


async def benchmark() -> float:
    base = load_revision(BASE_REVISION, "haltwise_base")
    if isinstance(base, str):
        print(f"(the adapter at {BASE_REVISION} is not timed: {base})")
    script = [scripted] * ((ROUNDS * RUNS_PER_BATCH + 3) * 6 * REQUESTS_PER_RUN)
    with ScriptedServer(script) as server:
        provider = OpenAIProvider(base_url=server.base_url, api_key="test")
        over_http = await measure(
            contenders(OpenAIChatModel(MODEL, provider=provider), base), ROUNDS, RUNS_PER_BATCH
        )
    local = await measure(
        contenders(FunctionModel(scripted_locally, model_name=MODEL), base),
        LOCAL_ROUNDS,
        LOCAL_RUNS_PER_BATCH,
    )
    print(
        f"one run: {TURNS} turns x {CALLS_PER_TURN} parallel tool calls, then the answer "
        f"({REQUESTS_PER_RUN} model requests); medians of interleaved rounds"
    )
    added = report(
        f"over HTTP to the scripted server ({ROUNDS} rounds x {RUNS_PER_BATCH} run)", over_http
    )
    report(
        f"diagnostic, in-process FunctionModel ({LOCAL_ROUNDS} rounds x {LOCAL_RUNS_PER_BATCH})",
        local,
    )
    verdict = "PASS" if added < GOAL else "OVER"
    print(f"goal: under {GOAL:.0%} of wall time added over HTTP: {verdict} ({added * 100:+.2f}%)")
    return added


async def phases() -> None:
    """``--phases``, under callgrind (``count_instructions``): the runs over HTTP."""
    with ScriptedServer([scripted], repeat_last=True) as server:
        provider = OpenAIProvider(base_url=server.base_url, api_key="test")
        base = load_revision(BASE_REVISION, "haltwise_base")
        players = contenders(OpenAIChatModel(MODEL, provider=provider), base)
        await instructions.run_phases(players, INSTRUCTION_ROUNDS, INSTRUCTION_RUNS)


def count_instructions() -> None:
    phases = instructions.counted(
        Path(__file__),
        f"one run ({REQUESTS_PER_RUN} requests and {TURNS * CALLS_PER_TURN} "
        "tool calls over HTTP, the scripted server's included), "
        f"{INSTRUCTION_ROUNDS} phases of {INSTRUCTION_RUNS} runs each",
    )
    if phases is None:
        return
    instructions.report(phases, INSTRUCTION_RUNS, lambda name: "pydantic-ai")


def main() -> None:
    asyncio.run(benchmark())


if __name__ == "__main__":
    if "--instructions" in sys.argv:
        count_instructions()
    elif "--phases" in sys.argv:
        asyncio.run(phases())
    else:
        main()
