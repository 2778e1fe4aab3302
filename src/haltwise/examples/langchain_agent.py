"""A LangChain agent (``create_agent``) governed by haltwise, against the scripted server.

Runs with no network and no API key: ``python -m haltwise.examples.langchain_agent``.
"""

from typing import Any

from langchain.agents import create_agent
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI

import haltwise
from haltwise.adapters import Governed
from haltwise.adapters.langchain import HaltwiseMiddleware, govern
from haltwise.testing import ScriptedServer, reply, tool_call


@tool
def search(query: str) -> str:
    """Search the web."""
    return f"3 pages about {query}"


def main() -> Governed[dict[str, Any]]:
    guard = haltwise.Guard(
        haltwise.max_tool_calls(2, on_limit="synthesize")  # then answer from what was found
        | haltwise.max_turns(10, warn_at=0.5)
        | haltwise.timeout(minutes=2)
    )
    script = [
        reply(tool_calls=[tool_call("search", {"query": "parser bug"})], usage=(120, 20)),
        reply(tool_calls=[tool_call("search", {"query": "round trip"})], usage=(180, 20)),
        reply(tool_calls=[tool_call("search", {"query": "escapes"})], usage=(240, 20)),
        reply("dump() drops the escapes; the round trip fails there.", usage=(300, 15)),
    ]
    with ScriptedServer(script) as server:
        model = ChatOpenAI(
            model="scripted-model",
            base_url=server.base_url,
            api_key="test",  # type: ignore[arg-type]  # pydantic makes it a SecretStr
            use_responses_api=False,
            max_retries=0,  # a retry would outlive the run's time limit
            max_completion_tokens=500,
        )
        agent = create_agent(
            model,
            tools=[search],
            middleware=[HaltwiseMiddleware(guard)],  # last: it sees every request sent
        )
        governed = govern(agent, guard).run_sync(
            {"messages": [("user", "Why do the parser tests fail?")]}
        )
        sent = server.requests
    outcome, usage = governed.outcome, governed.usage  # the same Outcome in every framework
    offered = len(sent[-1].get("tools", []))
    print(f"status:   {outcome.status} ({outcome.reason})")
    print(f"why:      {outcome.message}")
    print(f"answer:   {governed.output}")
    print(f"usage:    {usage.turns} turns, {usage.model_calls} calls, {usage.tool_calls} tools")
    print(f"sent:     {len(sent)} requests; the last offered {offered} tools")
    return governed


if __name__ == "__main__":
    main()
