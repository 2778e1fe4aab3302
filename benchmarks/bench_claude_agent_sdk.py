"""What governing a Claude Agent SDK agent costs: the same run with and without haltwise.

The SDK's agent loop is the Claude Code CLI it starts, talking to the scripted Anthropic server
(``AnthropicServer``) over real HTTP. The task: 3 turns of 2 parallel calls of an in-process
tool, then the answer (4 model requests, 6 tool calls). Contenders, timed side by side in
interleaved rounds in one process (each run starts its own CLI, as ``govern(options)`` does):

- ``Claude Agent SDK``: a ``ClaudeSDKClient`` on the options as given;
- ``+ do-nothing hooks``: the same with the stream events and the five hooks haltwise uses in
  this task, each answering at once: what any hook-based governance pays the CLI's control
  protocol;
- ``+ pass-through endpoint``: the bare client, its requests through haltwise's local Messages
  endpoint with a gate that admits everything: what seeing every request before it goes costs;
- ``govern(options, guard)``: with ``max_turns(25) | max_tool_calls(50) | max_tokens(200_000) |
  max_cost("5.00") | timeout(minutes=30)``, so that every hook reports and every limit checks,
  and every request goes through haltwise's local Messages endpoint on its way to the server.

Three measures per run: the wall time of the whole run (the CLI's start-up, about half of it,
included); the agent loop alone as the CLI itself measures it (``ResultMessage.duration_ms``,
from the prompt to the result, hooks included); and the CPU time of the run, this process's and
the CLI's, which what else runs on the machine moves less. The added share is the median of
per-round ratios to the bare run of the same round (the goal: under 2% of the run's wall time),
given with the middle half of those ratios (p25-p75: how much the machine's noise moves it),
and split into the hook floor, the endpoint's and haltwise's own.

Twice: with a model that answers at once (the scripted server's own speed: the per-hook costs
at their largest share), and with one that takes ``LATENCY`` seconds per response, still far
quicker than a real model; the goal is judged on the second.

``python benchmarks/run.py claude_agent_sdk``
"""

from __future__ import annotations

import asyncio
import gc
import resource
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from typing import Any

from claude_agent_sdk import (
    ClaudeAgentOptions,
    ClaudeSDKClient,
    HookContext,
    HookInput,
    HookJSONOutput,
    HookMatcher,
    ResultMessage,
    ToolAnnotations,
    create_sdk_mcp_server,
    tool,
)

from haltwise import Guard, Limit, max_cost, max_tokens, max_tool_calls, max_turns
from haltwise import timeout as time_limit
from haltwise.adapters._messages_proxy import Exchange, MessagesProxy
from haltwise.adapters.claude_agent_sdk import govern
from haltwise.testing import AnthropicServer, Reply, reply, tool_call

MODEL = "claude-sonnet-4-5"
TURNS = 3
CALLS_PER_TURN = 2
ROUNDS = 8
LATENCY = 0.2
LATENCY_ROUNDS = 16
GOAL = 0.02
ANSWER = "Everything was looked up."

#: A contender: one run, returning the agent loop's seconds as the CLI measured them.
Contender = tuple[str, Callable[[], Awaitable[float]]]


def limits() -> Limit:
    return (
        max_turns(25)
        | max_tool_calls(50)
        | max_tokens(200_000)
        | max_cost("5.00")
        | time_limit(minutes=30)
    )


def scripted(latency: float) -> Callable[[dict[str, Any]], Reply]:
    """The task's replies, each from how far the conversation has got, after ``latency``."""

    def answer(body: dict[str, Any]) -> Reply:
        turn = sum(1 for message in body["messages"] if message["role"] == "assistant")
        if turn < TURNS:
            calls = [
                tool_call("mcp__kb__lookup", {"key": f"k{turn}-{n}"}) for n in range(CALLS_PER_TURN)
            ]
            return reply(tool_calls=calls, usage=(400 + 150 * turn, 30), delay=latency)
        return reply(ANSWER, usage=(400 + 150 * turn, 12), delay=latency)

    return answer


@tool("lookup", "Look a key up.", {"key": str}, ToolAnnotations(readOnlyHint=True))
async def lookup(arguments: dict[str, Any]) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": f"value of {arguments['key']}"}]}


async def nothing(data: HookInput, tool_use_id: str | None, context: HookContext) -> HookJSONOutput:
    return {}


async def run_client(options: ClaudeAgentOptions) -> ResultMessage:
    async with ClaudeSDKClient(options) as client:
        await client.query("Look everything up.")
        async for message in client.receive_response():
            if isinstance(message, ResultMessage):
                return message
    raise AssertionError("the CLI ended without a result")


def contenders(options: ClaudeAgentOptions) -> list[Contender]:
    events = ("UserPromptSubmit", "PreToolUse", "PostToolUse", "PostToolUseFailure")
    hooks: dict[Any, list[HookMatcher]] = {
        event: [HookMatcher(hooks=[nothing])] for event in (*events, "PostToolBatch")
    }
    with_hooks = ClaudeAgentOptions(**{**vars(options), "hooks": hooks})
    with_hooks.include_partial_messages = True

    async def bare() -> float:
        result = await run_client(options)
        assert result.result == ANSWER, result
        return result.duration_ms / 1e3

    async def floor() -> float:
        result = await run_client(with_hooks)
        assert result.result == ANSWER, result
        return result.duration_ms / 1e3

    async def admit(exchange: Exchange) -> tuple[str, None]:
        return "", None

    async def ignore(exchange: Exchange) -> None:
        return None

    async def through_endpoint() -> float:
        proxy = MessagesProxy(options.env["ANTHROPIC_BASE_URL"], admit, ignore)
        env = {**options.env, "ANTHROPIC_BASE_URL": await proxy.start()}
        try:
            result = await run_client(ClaudeAgentOptions(**{**vars(options), "env": env}))
        finally:
            await proxy.close()
        assert result.result == ANSWER, result
        return result.duration_ms / 1e3

    async def under_haltwise() -> float:
        governed = await govern(options, Guard(limits())).run("Look everything up.")
        assert governed.completed, governed.outcome
        assert governed.usage.tool_calls == TURNS * CALLS_PER_TURN
        assert governed.result is not None
        return governed.result.duration_ms / 1e3

    return [
        ("Claude Agent SDK", bare),
        ("+ do-nothing hooks", floor),
        ("+ pass-through endpoint", through_endpoint),
        ("govern(options, guard)", under_haltwise),
    ]


Times = dict[str, list[float]]


def cpu_seconds() -> tuple[float, float]:
    """CPU time used so far by this process (haltwise, the SDK, the scripted server), and by its
    children that have ended (each run's CLI): less moved than wall time by what else the
    machine runs, this process's least of all."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


async def measure(players: list[Contender], rounds: int) -> tuple[Times, Times, Times, Times]:
    """Wall seconds per run, the agent loop's, and the CPU seconds of this process and of the
    CLI, for each contender."""
    for _, run in players:  # warm-up: the CLI binary paged in, code hot
        await run()
    walls: Times = {name: [] for name, _ in players}
    loops: Times = {name: [] for name, _ in players}
    own: Times = {name: [] for name, _ in players}
    cli: Times = {name: [] for name, _ in players}
    for round_no in range(rounds):
        shift = round_no % len(players)
        for name, run in players[shift:] + players[:shift]:
            started, cpu = time.perf_counter(), cpu_seconds()
            loops[name].append(await run())
            walls[name].append(time.perf_counter() - started)
            after = cpu_seconds()
            own[name].append(after[0] - cpu[0])
            cli[name].append(after[1] - cpu[1])
        gc.collect()
    return walls, loops, own, cli


def report(title: str, times: Times) -> float:
    """Print one table; return haltwise's added share of the bare run's time."""
    bare = times["Claude Agent SDK"]
    print(title)
    ratios = {}
    for name, samples in times.items():
        per_round = [mine / base for mine, base in zip(samples, bare, strict=True)]
        ratios[name] = statistics.median(per_round)
        quartiles = statistics.quantiles(per_round, n=4)
        print(
            f"  {name:26}{statistics.median(samples) * 1e3:>8.1f} ms/run{ratios[name]:>8.3f}x"
            f"   per round p25-p75 {quartiles[0]:.3f}-{quartiles[2]:.3f}x"
        )
    governed = ratios["govern(options, guard)"]
    hooks = ratios["+ do-nothing hooks"] - 1
    endpoint = ratios["+ pass-through endpoint"] - 1
    added = statistics.median(times["govern(options, guard)"]) - statistics.median(bare)
    print(
        f"  added: {(governed - 1) * 100:+.2f}% in all ({added * 1e3:+.1f} ms/run), of which "
        f"the CLI's hook floor {hooks * 100:+.2f}%, the endpoint's {endpoint * 100:+.2f}% "
        f"and haltwise's own {(governed - 1 - hooks - endpoint) * 100:+.2f}%"
    )
    return governed - 1


async def scenario(latency: float, rounds: int) -> float:
    players = 4
    script = [scripted(latency)] * ((rounds + 1) * players * (TURNS + 1))
    with AnthropicServer(script) as server, tempfile.TemporaryDirectory() as home:
        options = ClaudeAgentOptions(
            model=MODEL,
            env=server.claude_code_env(home),
            cwd=home,
            setting_sources=[],
            tools=[],
            mcp_servers={"kb": create_sdk_mcp_server("kb", tools=[lookup])},
            allowed_tools=["mcp__kb__lookup"],
        )
        walls, loops, own, cli = await measure(contenders(options), rounds)
    added = report("The whole run (a new CLI per run):", walls)
    report("The agent loop alone (ResultMessage.duration_ms):", loops)
    report("CPU time of this process per run (haltwise, the SDK, the scripted server):", own)
    report("CPU time of the CLI per run:", cli)
    return added


async def benchmark() -> float:
    print(f"{TURNS} turns of {CALLS_PER_TURN} parallel tool calls, then the answer\n")
    print(f"A model that answers at once; {ROUNDS} interleaved rounds")
    await scenario(0.0, ROUNDS)
    print(f"\nA model that answers in {LATENCY * 1e3:.0f} ms; {LATENCY_ROUNDS} interleaved rounds")
    return await scenario(LATENCY, LATENCY_ROUNDS)


def main() -> None:
    added = asyncio.run(benchmark())
    verdict = "within" if added < GOAL else "over"
    model = f"a {LATENCY * 1e3:.0f} ms model"
    print(f"  goal: under {GOAL:.0%} added to the run with {model}; {verdict} it")


if __name__ == "__main__":
    main()
