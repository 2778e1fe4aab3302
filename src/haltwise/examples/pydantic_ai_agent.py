"""A pydantic-ai agent governed by haltwise, against the scripted server (no network, no key).

The model asks for the weather in three cities at once. The tool-call budget allows two, and
then asks for an answer from what was gathered (``on_limit="synthesize"``): the third call never
runs, pydantic-ai makes one more model call with no tools, and its text is the run's output.
"""

from typing import Any

from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

import haltwise
from haltwise.adapters.pydantic_ai import govern
from haltwise.testing import ScriptedServer, reply, tool_call

CITIES = ("Paris", "Oslo", "Rome")
SCRIPT = [
    reply(tool_calls=[tool_call("weather", {"city": city}) for city in CITIES], usage=(180, 40)),
    reply("Paris is sunny, Oslo is rainy; Rome was not checked.", usage=(320, 20)),
]
PRICES = haltwise.Prices({"scripted-model": {"input": "0.15", "output": "0.60"}})  # $ per 1M


def main() -> Any:
    with ScriptedServer(SCRIPT) as server:
        provider = OpenAIProvider(base_url=server.base_url, api_key="test")
        agent = Agent(
            OpenAIChatModel("scripted-model", provider=provider),
            model_settings={"max_tokens": 512},  # the worst case a cost limit reserves
        )

        @agent.tool_plain
        def weather(city: str) -> str:
            """Today's weather in a city."""
            return {"Paris": "sunny, 24 C", "Oslo": "rain, 11 C"}.get(city, "unknown")

        guard = haltwise.Guard(
            haltwise.max_tool_calls(2, on_limit="synthesize") | haltwise.max_cost("0.01"),
            pricer=PRICES,
        )
        governed = govern(agent, guard).run_sync("What is the weather in Paris, Oslo and Rome?")
        sent = [("tools" in request) for request in server.requests]

    usage = governed.usage
    print(f"status:  {governed.outcome.status} ({governed.outcome.reason})")
    print(f"answer:  {governed.output}")
    print(f"usage:   {usage.model_calls} model calls, {usage.tool_calls} tool calls, ${usage.cost}")
    print(f"sent:    {len(sent)} requests, the last {'with' if sent[-1] else 'without'} tools")
    return governed


if __name__ == "__main__":
    main()
