"""An OpenAI Agents SDK agent under haltwise, against the scripted server (no network, no key).

A support agent asks a researcher sub-agent (``as_tool``), then wants one more search. The
tool-call budget is three for the whole run, the sub-agent's calls included, and then asks for an
answer from what was gathered (``on_limit="synthesize"``): the fourth call never runs, the SDK
makes one more request with no tools, and its text is the run's ``final_output``.
"""

import asyncio
from typing import Any

from agents import Agent, ModelSettings, OpenAIChatCompletionsModel, RunConfig, function_tool
from openai import AsyncOpenAI

import haltwise
from haltwise.adapters.openai_agents import govern
from haltwise.testing import ScriptedServer, reply, tool_call

SCRIPT = [  # what the scripted model answers, request by request
    reply(tool_calls=[tool_call("researcher", {"input": "parser crash"})], usage=(150, 20)),
    reply(tool_calls=[tool_call("search", {"query": "parser empty input"})], usage=(120, 15)),
    reply(tool_calls=[tool_call("search", {"query": "parser traceback"})], usage=(180, 15)),
    reply("It crashes on empty input: parse() reads tokens[0].", usage=(240, 25)),
    reply(tool_calls=[tool_call("search", {"query": "parser fix"})], usage=(260, 15)),
    reply("parse() fails on empty input (tokens[0]); return early when empty.", usage=(300, 30)),
]
PRICES = haltwise.Prices({"scripted-model": {"input": "0.15", "output": "0.60"}})  # $ per 1M


@function_tool
def search(query: str) -> str:
    """Search the issue tracker."""
    return f"3 issues match {query!r}: IndexError in parse() when the input is empty."


async def solve() -> Any:
    with ScriptedServer(SCRIPT) as server:
        client = AsyncOpenAI(base_url=server.base_url, api_key="test")
        model = OpenAIChatCompletionsModel(model="scripted-model", openai_client=client)
        settings = ModelSettings(max_tokens=512)  # the worst case a cost limit reserves
        researcher = Agent(name="researcher", model=model, model_settings=settings, tools=[search])
        support = Agent(
            name="support",
            instructions="Find the cause of the user's bug and suggest a fix.",
            model=model,
            model_settings=settings,
            tools=[researcher.as_tool("researcher", "Researches a bug."), search],
        )
        guard = haltwise.Guard(
            haltwise.max_tool_calls(3, on_limit="synthesize") | haltwise.max_cost("0.01"),
            pricer=PRICES,
        )
        governed = await govern(support, guard).run(
            "Why does the parser crash?", run_config=RunConfig(tracing_disabled=True)
        )
        sent = ["with tools" if "tools" in request else "no tools" for request in server.requests]

    result, usage = governed.result, governed.usage  # the SDK's RunResult; haltwise's counts
    calls = f"{usage.model_calls} model calls, {usage.tool_calls} tool calls"
    print(f"status:  {governed.outcome.status} ({governed.outcome.reason})")
    print(f"answer:  {result.final_output if result else None}")
    print(f"usage:   {usage.turns} turns, {calls}, ${usage.cost}")
    print(f"sent:    {len(sent)} requests, the last {sent[-1]}")
    return governed


def main() -> Any:
    return asyncio.run(solve())


if __name__ == "__main__":
    main()
